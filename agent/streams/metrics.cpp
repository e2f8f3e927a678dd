#include "agent/streams/metrics.hpp"

namespace railyard::agent {
namespace {

// What a note may quote of a job's output: a malformed line's reason holds at most a key or a version.
constexpr size_t kMaxNoteBytes = 300;

bool is_power_of_ten(int n) {
  while (n >= 10 && n % 10 == 0) n /= 10;
  return n == 1;
}

}  // namespace

MllogTracker::MllogTracker(std::optional<MetricTarget> target) : target_(std::move(target)) {}

void MllogTracker::time_to_train(std::int64_t at_ms, const char* reason, std::vector<MetricEvent>& out) {
  if (ttt_ || !run_start_ms_) return;
  ttt_ = static_cast<double>(at_ms - *run_start_ms_) / 1000.0;
  out.push_back(TimeToTrain{*ttt_, reason});
}

void MllogTracker::malformed_line(const std::string& why, std::vector<MetricEvent>& out) {
  if (++malformed_ == 1) first_malformed_line_ = lines_;
  if (!is_power_of_ten(malformed_)) return;
  std::string what =
      malformed_ == 1
          ? "MLPerf log: line " + std::to_string(lines_) + " of rank 0's output could not be read: " + why
          : "MLPerf log: " + std::to_string(malformed_) + " lines of rank 0's output could not be read (the first: line " +
                std::to_string(first_malformed_line_) + ")";
  if (what.size() > kMaxNoteBytes) what.resize(kMaxNoteBytes);
  out.push_back(MllogNote{std::move(what)});
}

void MllogTracker::run_stopped(const jobs::MllogEvent& e, std::vector<MetricEvent>& out) {
  out.push_back(RunStop{e.time_ms, e.metadata_string("status").value_or(run_.time_to_train_s() ? "success" : "")});
  if (run_.time_to_train_s()) {
    time_to_train(e.time_ms, "run_stop", out);
  } else if (!ttt_) {
    std::string what = std::string(kNoTimeToTrain) + run_.no_time_to_train() + " (MLPerf " +
                       std::string(jobs::to_string(e.format)) + " log)";
    if (what.size() > kMaxNoteBytes) what.resize(kMaxNoteBytes);
    out.push_back(MllogNote{std::move(what)});
  }
}

std::vector<MetricEvent> MllogTracker::feed(std::string_view line) {
  std::vector<MetricEvent> out;
  ++lines_;
  auto parsed = jobs::parse_mllog(line);
  if (!parsed) {
    malformed_line(parsed.error().message, out);
    return out;
  }
  if (!*parsed) return out;
  ++parsed_;
  const jobs::MllogEvent& e = **parsed;
  run_.add(e);
  if (e.key == jobs::mllog_key::kRunStart) {
    if (!run_start_ms_) run_start_ms_ = e.time_ms;  // a resumed run repeats the original start
    out.push_back(RunStart{e.time_ms});
  } else if (e.key == jobs::mllog_key::kRunStop) {
    run_stopped(e, out);
  } else if (e.key == jobs::mllog_key::kTrackedStats) {
    if (e.value.is_object() && e.value.contains("throughput") && e.value["throughput"].is_number())
      out.push_back(Throughput{e.time_ms, e.value["throughput"].get<double>()});
  }
  const bool is_metric = e.key == jobs::mllog_key::kEvalAccuracy || (target_ && e.key == target_->metric);
  if (is_metric && e.value.is_number()) {
    const double v = e.value.get<double>();
    out.push_back(EvalPoint{e.time_ms, e.metadata_number("epoch_num"), e.key, v});
    if (target_ && e.key == target_->metric && v >= target_->value) time_to_train(e.time_ms, "target", out);
  }
  return out;
}

}  // namespace railyard::agent
