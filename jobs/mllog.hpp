// MLPerf logging ("MLLOG") lines: a writer for workers and a parser for whoever reads their stdout.
//
//   :::MLLOG {"namespace": "", "time_ms": 1700000000000, "event_type": "POINT_IN_TIME",
//             "key": "eval_accuracy", "value": 0.96, "metadata": {"file": "trainer.cpp", "lineno": 80,
//             "epoch_num": 3}}
//
// The writer prints the format mlperf_logging.mllog prints (v0.7 and later), so real framework code
// (PyTorch reference implementations, NVIDIA's submissions) and railyard-train produce lines the same
// parser reads. The parser also reads the two older formats, as the MLPerf compliance checker's rulesets
// for them do, and turns every version into the same MllogEvent:
//
//   v0.5   :::MLPv0.5.0 resnet 1541720285.254530191 (file.py:123) run_stop: {"success": true}
//          (benchmark, seconds, (file:line), key last, an optional JSON value; mllog_legacy.cpp)
//   v0.6   :::MLL 1558666200.971 run_stop: {"value": null, "metadata": {"status": "success"}}
//          (seconds with milliseconds, key before the colon, a JSON {value, metadata}; mllog_legacy.cpp)
//   v0.7+  :::MLLOG {json}
//
// Whatever precedes the token on a line (srun --label "0: ", Open MPI's "[1,0]<stdout>:", text glued on)
// is ignored. A line with a token that cannot be read is an error, never ordinary output.
// Nothing here throws: the parser reports malformed lines as errors, the writer never fails.
// Depends on nlohmann_json and common/ (Result, and the JSON depth check in mllog.cpp) only, so the agent can
// link it cheaply.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace railyard::jobs {

enum class MllogEventType { kPointInTime, kIntervalStart, kIntervalEnd };

// The log format a line was written in, by its token.
enum class MllogFormat { kV05, kV06, kV07 };
std::string_view to_string(MllogFormat format);  // "v0.5", "v0.6", "v0.7+"

// Where an event was written from, for the "file"/"lineno" metadata mlperf_logging adds. Used as a default
// argument, current() records the caller's position. (Not std::source_location: clang-tidy 14 cannot
// parse libstdc++ 12's; GCC's and Clang's builtins behave the same here.)
struct SourceLocation {
  static constexpr SourceLocation current(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return SourceLocation{file, line};
  }
  const char* file = "";
  int line = 0;
};

std::string_view to_string(MllogEventType type);
std::optional<MllogEventType> event_type_from_string(std::string_view text);

// Keys railyard-train emits (MLPerf's names, plus kResume, which MLPerf has no word for).
namespace mllog_key {
inline constexpr std::string_view kInitStart = "init_start";
inline constexpr std::string_view kInitStop = "init_stop";
inline constexpr std::string_view kRunStart = "run_start";
inline constexpr std::string_view kRunStop = "run_stop";
inline constexpr std::string_view kEpochStart = "epoch_start";
inline constexpr std::string_view kEpochStop = "epoch_stop";
inline constexpr std::string_view kEvalAccuracy = "eval_accuracy";
inline constexpr std::string_view kTrackedStats = "tracked_stats";
inline constexpr std::string_view kSubmissionBenchmark = "submission_benchmark";
inline constexpr std::string_view kSubmissionOrg = "submission_org";
inline constexpr std::string_view kSubmissionDivision = "submission_division";
inline constexpr std::string_view kSubmissionStatus = "submission_status";
inline constexpr std::string_view kSubmissionPlatform = "submission_platform";
inline constexpr std::string_view kGlobalBatchSize = "global_batch_size";
inline constexpr std::string_view kLearningRate = "opt_base_learning_rate";
inline constexpr std::string_view kSeed = "seed";
inline constexpr std::string_view kTrainSamples = "train_samples";
inline constexpr std::string_view kEvalSamples = "eval_samples";
inline constexpr std::string_view kResume = "resume";
inline constexpr std::string_view kEvalTarget = "eval_target";  // v0.5: the quality a run must reach
}  // namespace mllog_key

inline constexpr std::string_view kMllogPrefix = ":::MLLOG ";
inline constexpr std::string_view kStatusSuccess = "success";
inline constexpr std::string_view kStatusAborted = "aborted";

// One event in v0.7+ terms, whatever format it was read from. Before v0.7 lines carry no event type: it is
// INTERVAL_START for keys ending "_start", INTERVAL_END for "_stop", else POINT_IN_TIME. v0.5 values are
// brought to v0.7's shape: eval_accuracy {"epoch", "value"} becomes the value with metadata.epoch_num,
// run_stop {"success": b} becomes metadata.status "success"/"aborted", and file, lineno and benchmark go
// to metadata. Times before v0.7 are seconds, kept to the nearest millisecond.
struct MllogEvent {
  std::string name_space;  // "namespace" in the JSON; usually empty
  MllogFormat format = MllogFormat::kV07;
  std::int64_t time_ms = 0;
  MllogEventType type = MllogEventType::kPointInTime;
  std::string key;
  nlohmann::json value;     // null, number, string or object, as the key requires
  nlohmann::json metadata;  // an object (file, lineno, epoch_num, status, ...)

  // metadata[name] as a number/string when present with that type.
  std::optional<double> metadata_number(std::string_view name) const;
  std::optional<std::string> metadata_string(std::string_view name) const;
};

// Renders one line, without the trailing newline, in mlperf_logging's key order.
std::string format_mllog_line(const MllogEvent& event);

// Reads one line of output, in any of the three formats.
//   value std::nullopt  -> no MLPerf token (ordinary output; ignore it);
//   value an event      -> a well-formed line;
//   error               -> a token followed by what its format does not allow (malformed JSON, a missing
//                          or mistyped field, a bad time), or a :::MLP version other than v0.5; the
//                          message says which, in at most a short sentence.
// The token may appear after other text (launchers prepend "[1,0]<stdout>:" or "0: ").
Result<std::optional<MllogEvent>> parse_mllog(std::string_view line);

// Convenience form: the event, or nothing for both ordinary and malformed lines.
std::optional<MllogEvent> parse_mllog_line(std::string_view line);

// A run's verdict as MLPerf's result summarizer reaches it, fed one event at a time (the agent feeds it as
// lines arrive, time_to_train_s a whole log). Time-to-train is run_stop - run_start in seconds, only for a
// run that succeeded: run_stop's metadata.status "success"; in a v0.5 log whose run_stop says nothing,
// an eval_accuracy at or above the log's eval_target. It uses the first run_start and the last run_stop,
// so a log holding a preempted attempt and its resumed continuation (whose run_start repeats the
// original time, see README) yields the whole wall time including the interruption.
class MllogRun {
 public:
  void add(const MllogEvent& event);

  bool started() const { return start_ms_.has_value(); }
  bool stopped() const { return stop_ms_.has_value(); }
  // The time-to-train, once the run has stopped and succeeded.
  std::optional<double> time_to_train_s() const;
  // Why there is none, once the run has stopped without one ("the run was aborted (run_stop status
  // \"aborted\")", ...); also for a log that ends without run_stop. Empty when there is one.
  std::string no_time_to_train() const;

 private:
  std::optional<std::int64_t> start_ms_;
  std::optional<std::int64_t> stop_ms_;
  std::optional<std::string> stop_status_;  // metadata.status of the last run_stop, when it had one
  MllogFormat stop_format_ = MllogFormat::kV07;
  std::optional<double> eval_target_;  // v0.5
  std::optional<double> best_accuracy_;
};

// Time-to-train of a whole log (MllogRun over its events); absent when the run did not succeed.
std::optional<double> time_to_train_s(const std::vector<MllogEvent>& events);

// Parses every line of a text (e.g. captured stdout), skipping ordinary and malformed lines.
std::vector<MllogEvent> parse_mllog_text(std::string_view text);

// The lines of a text that carry a token but cannot be read: 1-based line number and the reason.
std::vector<std::pair<int, std::string>> malformed_mllog_lines(std::string_view text);

// Writes MLLOG lines to a stream, one whole line per call (safe to share between threads).
// The clock returns milliseconds since the Unix epoch; tests inject a fake.
class MllogWriter {
 public:
  using Clock = std::function<std::int64_t()>;
  explicit MllogWriter(std::ostream& out, Clock clock = system_clock_ms);

  void point(std::string_view key, nlohmann::json value = nullptr,
             nlohmann::json metadata = nlohmann::json::object(),
             SourceLocation where = SourceLocation::current());
  void start(std::string_view key, nlohmann::json value = nullptr,
             nlohmann::json metadata = nlohmann::json::object(),
             SourceLocation where = SourceLocation::current());
  void end(std::string_view key, nlohmann::json value = nullptr,
           nlohmann::json metadata = nlohmann::json::object(),
           SourceLocation where = SourceLocation::current());
  // An event stamped with an explicit time (a resumed run's original run_start).
  void at(std::int64_t time_ms, MllogEventType type, std::string_view key, nlohmann::json value,
          nlohmann::json metadata, SourceLocation where = SourceLocation::current());

  std::int64_t now_ms() const { return clock_(); }
  static std::int64_t system_clock_ms();

 private:
  void emit(std::int64_t time_ms, MllogEventType type, std::string_view key, nlohmann::json value,
            nlohmann::json metadata, const SourceLocation& where);

  std::ostream& out_;
  Clock clock_;
  std::mutex mutex_;
};

}  // namespace railyard::jobs
