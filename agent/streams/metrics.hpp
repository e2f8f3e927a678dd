// MLPerf log lines of rank 0's stdout, in any format version (v0.5 :::MLPv0.5.0, v0.6 :::MLL, v0.7+
// :::MLLOG; see jobs/mllog.hpp) -> metric events the agent sends to the scheduler.
//
//   run_start (INTERVAL_START)   -> RunStart{time_ms}
//   eval_accuracy (POINT_IN_TIME) -> EvalPoint{time_ms, epoch, value}  (epoch from metadata.epoch_num)
//   tracked_stats {"throughput"} -> Throughput{time_ms, value}
//   run_stop (INTERVAL_END)      -> RunStop{time_ms, status}
//   time-to-train, once: at run_stop when the run succeeded as MLPerf judges it (jobs::MllogRun), or
//   earlier when the job's target (metric >= value) is met; seconds from the first run_start.
//   MllogNote{what}: what the user should hear about the log, in a sentence the scheduler puts in the
//   job's history: "no time-to-train: <why>" at a run_stop without one, and lines with a token that
//   cannot be read, said at the 1st, 10th, 100th, ... such line (so a log of them all stays a few notes).
// Malformed lines are counted (malformed()) and skipped; ordinary output is ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "jobs/mllog.hpp"

namespace railyard::agent {

struct RunStart {
  std::int64_t time_ms = 0;
};
struct RunStop {
  std::int64_t time_ms = 0;
  std::string status;  // "success", "aborted", or "" when absent
};
struct EvalPoint {
  std::int64_t time_ms = 0;
  std::optional<double> epoch;
  std::string metric;  // the MLLOG key, e.g. "eval_accuracy"
  double value = 0;
};
struct Throughput {
  std::int64_t time_ms = 0;
  double value = 0;  // samples per second as the worker reports it
};
struct TimeToTrain {
  double seconds = 0;
  std::string reason;  // "run_stop" or "target"
};
struct MllogNote {
  std::string what;  // starts with kNoTimeToTrain when it says why a stopped run has no time-to-train
};
inline constexpr std::string_view kNoTimeToTrain = "no time-to-train: ";

using MetricEvent = std::variant<RunStart, RunStop, EvalPoint, Throughput, TimeToTrain, MllogNote>;

struct MetricTarget {
  std::string metric = "eval_accuracy";
  double value = 0;
};

class MllogTracker {
 public:
  explicit MllogTracker(std::optional<MetricTarget> target = std::nullopt);

  std::vector<MetricEvent> feed(std::string_view line);

  int malformed() const { return malformed_; }
  int parsed() const { return parsed_; }
  std::optional<double> time_to_train() const { return ttt_; }

 private:
  void time_to_train(std::int64_t at_ms, const char* reason, std::vector<MetricEvent>& out);
  void malformed_line(const std::string& why, std::vector<MetricEvent>& out);
  void run_stopped(const jobs::MllogEvent& e, std::vector<MetricEvent>& out);

  std::optional<MetricTarget> target_;
  std::optional<std::int64_t> run_start_ms_;
  std::optional<double> ttt_;
  jobs::MllogRun run_;
  int lines_ = 0;
  int malformed_ = 0;
  int first_malformed_line_ = 0;
  int parsed_ = 0;
};

}  // namespace railyard::agent
