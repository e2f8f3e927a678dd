// MllogRun: a run's verdict from its events, the way MLPerf's result summarizer reaches it
// (result_summarizer.py: run_stop - run_start of a run the compliance checker passed as successful).
#include <cstdio>
#include <string>

#include "jobs/mllog.hpp"

namespace railyard::jobs {
namespace {

std::optional<double> number_of(const nlohmann::json& value) {
  if (value.is_number()) return value.get<double>();
  if (value.is_object() && value.contains("value") && value["value"].is_number()) return value["value"].get<double>();
  return std::nullopt;
}

std::string plain(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

void MllogRun::add(const MllogEvent& e) {
  if (e.key == mllog_key::kRunStart) {
    if (!start_ms_) start_ms_ = e.time_ms;  // a resumed run repeats the original start
  } else if (e.key == mllog_key::kRunStop) {
    stop_ms_ = e.time_ms;
    stop_status_ = e.metadata_string("status");
    stop_format_ = e.format;
  } else if (e.key == mllog_key::kEvalTarget) {
    eval_target_ = number_of(e.value);
  } else if (e.key == mllog_key::kEvalAccuracy && e.value.is_number()) {
    const double v = e.value.get<double>();
    if (!best_accuracy_ || v > *best_accuracy_) best_accuracy_ = v;
  }
}

std::optional<double> MllogRun::time_to_train_s() const {
  if (!start_ms_ || !stop_ms_ || *stop_ms_ < *start_ms_ || !no_time_to_train().empty()) return std::nullopt;
  return static_cast<double>(*stop_ms_ - *start_ms_) / 1000.0;
}

std::string MllogRun::no_time_to_train() const {
  if (!stop_ms_) return start_ms_ ? "the log has run_start but no run_stop" : "the log has no run_start";
  if (!start_ms_) return "the log has run_stop but no run_start";
  if (*stop_ms_ < *start_ms_) return "run_stop comes before run_start";
  if (stop_status_) {
    if (*stop_status_ == kStatusSuccess) return {};
    return "the run did not succeed (run_stop status \"" + stop_status_->substr(0, 32) + "\")";
  }
  if (stop_format_ != MllogFormat::kV05) return "run_stop has no status (\"success\" or \"aborted\")";
  // v0.5: a run_stop that says nothing succeeded when the quality reached the log's eval_target.
  if (!eval_target_) return "the v0.5 log has no eval_target and run_stop says nothing of success";
  if (best_accuracy_ && *best_accuracy_ >= *eval_target_) return {};
  return "eval_accuracy never reached eval_target " + plain(*eval_target_) +
         (best_accuracy_ ? " (best " + plain(*best_accuracy_) + ")" : " (no eval_accuracy)");
}

}  // namespace railyard::jobs
