#include "agent/streams/metrics.hpp"

#include "jobs/mllog.hpp"

namespace railyard::agent {

MllogTracker::MllogTracker(std::optional<MetricTarget> target) : target_(std::move(target)) {}

void MllogTracker::time_to_train(std::int64_t at_ms, const char* reason, std::vector<MetricEvent>& out) {
  if (ttt_ || !run_start_ms_) return;
  ttt_ = static_cast<double>(at_ms - *run_start_ms_) / 1000.0;
  out.push_back(TimeToTrain{*ttt_, reason});
}

std::vector<MetricEvent> MllogTracker::feed(std::string_view line) {
  std::vector<MetricEvent> out;
  auto parsed = jobs::parse_mllog(line);
  if (!parsed) {
    ++malformed_;
    return out;
  }
  if (!*parsed) return out;
  ++parsed_;
  const jobs::MllogEvent& e = **parsed;
  if (e.key == jobs::mllog_key::kRunStart) {
    if (!run_start_ms_) run_start_ms_ = e.time_ms;  // a resumed run repeats the original start
    out.push_back(RunStart{e.time_ms});
  } else if (e.key == jobs::mllog_key::kRunStop) {
    const std::string status = e.metadata_string("status").value_or("");
    out.push_back(RunStop{e.time_ms, status});
    if (status == jobs::kStatusSuccess) time_to_train(e.time_ms, "run_stop", out);
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
