// MLPerf logging ("MLLOG") lines: a writer for workers and a parser for whoever reads their stdout.
//
//   :::MLLOG {"namespace": "", "time_ms": 1700000000000, "event_type": "POINT_IN_TIME",
//             "key": "eval_accuracy", "value": 0.96, "metadata": {"file": "trainer.cpp", "lineno": 80,
//             "epoch_num": 3}}
//
// The format is the one mlperf_logging.mllog prints, so real framework code (PyTorch reference
// implementations, NVIDIA's submissions) and railyard-train produce lines the same parser reads.
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
#include <vector>

#include "common/result.hpp"

namespace railyard::jobs {

enum class MllogEventType { kPointInTime, kIntervalStart, kIntervalEnd };

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
}  // namespace mllog_key

inline constexpr std::string_view kMllogPrefix = ":::MLLOG ";
inline constexpr std::string_view kStatusSuccess = "success";
inline constexpr std::string_view kStatusAborted = "aborted";

struct MllogEvent {
  std::string name_space;  // "namespace" in the JSON; usually empty
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

// Reads one line of output.
//   value std::nullopt  -> not an MLLOG line (ordinary output; ignore it);
//   value an event      -> a well-formed MLLOG line;
//   error               -> an MLLOG prefix followed by malformed JSON or missing/mistyped fields.
// The prefix may appear after other text (launchers prepend "[1,0]<stdout>:" or "0: ").
Result<std::optional<MllogEvent>> parse_mllog(std::string_view line);

// Convenience form: the event, or nothing for both ordinary and malformed lines.
std::optional<MllogEvent> parse_mllog_line(std::string_view line);

// Time-to-train as MLPerf defines it: run_stop.time_ms - run_start.time_ms, in seconds, only when
// run_stop says status "success". Uses the first run_start and the last run_stop of the log, so a log
// holding a preempted attempt and its resumed continuation (whose run_start repeats the original
// time, see README) yields the whole wall time including the interruption. Absent otherwise.
std::optional<double> time_to_train_s(const std::vector<MllogEvent>& events);

// Parses every line of a text (e.g. captured stdout), skipping ordinary and malformed lines.
std::vector<MllogEvent> parse_mllog_text(std::string_view text);

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
