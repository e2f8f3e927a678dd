// Job traces for the simulator: CSV `job_id,submit_s,duration_s,num_gpus,user,status` (header line).
//
// Reading applies, in this order: the --user filter (rows of other users are dropped unchecked), row
// validation (a bad row is reported with its file line and skipped, or stops the read), --scale-gpus,
// --load (submit times divided by F), --limit (the first N good rows that pass the filter). The result is
// sorted by submit time, file order breaking ties, because merged traces (philly_gavel: one clock per
// virtual cluster) are not sorted.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace railyard::sim {

struct TraceJob {
  std::string job_id;
  double submit_s = 0;    // after --load
  double duration_s = 0;  // the time the job held its GPUs in the original trace (ideal run time)
  int gpus = 0;           // after --scale-gpus
  std::string user;
  int line = 0;  // 1-based line in the file (the header is line 1)
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
  std::vector<TraceJob> jobs;         // sorted by (submit_s, line)
  std::vector<std::string> problems;  // one message per skipped row: "line 7: num_gpus must be > 0 (got 0)"
  int64_t skipped_rows = 0;
};

// Errors (kInvalidArgument): bad options, a missing header, or the first bad row when stop_on_bad_row.
Result<Trace> read_trace(std::istream& in, const TraceOptions& options);
// As read_trace; an unreadable file is an error naming the path.
Result<Trace> load_trace_file(const std::string& path, const TraceOptions& options);

}  // namespace railyard::sim
