// Job traces for the simulator: CSV with a header line naming its columns: `job_id,submit_s,duration_s,
// num_gpus,user` and, optional, in any order after them, `status` (failed or killed, in any case: the job
// ends FAILED; anything else: COMPLETED), `qos` (high, normal or scavenger; empty: normal), `dependency` (Slurm's --dependency text with trace job_ids for job ids and `;` for `,`:
// "afterok:prep_1;afterany:eval", "afterok:sweep_3" for the task with index 3 of array row "sweep",
// "aftercorr:sweep") and `array` (Slurm's --array text: "0-99%8"; the row is an array of that many tasks,
// each of the row's duration and GPUs). A dependency must name a row submitted before this one.
//
// Reading applies, in this order: the --user filter (rows of other users are dropped unchecked), row
// validation (a bad row is reported with its file line and skipped, or stops the read), --scale-gpus,
// --load (submit times divided by F), --limit (the first N good rows that pass the filter). The result is
// sorted by submit time, file order breaking ties, because merged traces (philly_gavel: one clock per
// virtual cluster) are not sorted.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "jobs/array.hpp"
#include "jobs/spec.hpp"

namespace railyard::sim {

struct TraceJob {
  std::string job_id;
  double submit_s = 0;    // after --load
  double duration_s = 0;  // the time the job held its GPUs in the original trace (ideal run time)
  int gpus = 0;           // after --scale-gpus
  std::string user;
  int line = 0;  // 1-based line in the file (the header is line 1)
  bool fails = false;  // status failed or killed: ends FAILED (exit code 1) after its duration
  jobs::Qos qos = jobs::Qos::kNormal;
  // A row it depends on (an index into Trace::jobs, always a smaller one), as its dependency column says.
  struct After {
    jobs::Dependency::Type type = jobs::Dependency::Type::kAfterOk;
    size_t row = 0;
    int task = -1;  // an index of array row `row`; -1: the whole row
  };
  std::vector<After> after;
  std::optional<jobs::ArraySpec> array;
};

struct TraceOptions {
  int scale_gpus = 1;    // multiplies num_gpus
  double load = 1.0;     // divides submit_s (> 1: more load)
  int64_t limit = 0;     // 0 = all rows
  std::string user;      // "" = every user
  int64_t max_gpus = 0;  // a job asking more (after scaling) is a bad row; 0 = no check
  bool stop_on_bad_row = false;
};

struct Trace {
  std::vector<TraceJob> jobs;         // sorted by (submit_s, line); `after` names earlier rows
  std::vector<std::string> problems;  // one message per skipped row: "line 7: num_gpus must be > 0 (got 0)"
  int64_t skipped_rows = 0;
};

// Errors (kInvalidArgument): bad options, a missing header, or the first bad row when stop_on_bad_row.
Result<Trace> read_trace(std::istream& in, const TraceOptions& options);
// As read_trace; an unreadable file is an error naming the path.
Result<Trace> load_trace_file(const std::string& path, const TraceOptions& options);

// The offered load of `jobs` (sorted by submit time) on `cluster_gpus` GPUs: the GPU-seconds they ask (an
// array row: each of its tasks) over the time from the first submit to the last, per GPU. 1.0 keeps every
// GPU busy on average, as `--synth load=1.0` does. nullopt when every job is submitted at the same time.
std::optional<double> offered_load(const std::vector<TraceJob>& jobs, int64_t cluster_gpus);

// Divides every submit time so that offered_load(jobs, cluster_gpus) becomes `target` (> 0), and returns the
// divisor: `railyard sim --offered-load`. Errors (kInvalidArgument): a target that is not a positive number,
// or jobs without a submit span (offered_load is nullopt).
Result<double> set_offered_load(std::vector<TraceJob>& jobs, int64_t cluster_gpus, double target);

}  // namespace railyard::sim
