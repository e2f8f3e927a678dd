// Job arrays: one submit that stands for many tasks of the same spec, told apart by an index
// (RAILYARD_ARRAY_TASK_ID). The syntax is Slurm's `--array`: comma-separated indexes and ranges, a range may
// have a step, and "%M" at the end caps how many tasks run at once:
//
//   "0-999"   "1,3,5-9"   "0-98:2"   "0-4999%64"
//
// The daemon stores an array as one record and creates its tasks as jobs lazily, a window at a time
// (scheduler/lifecycle/job_table.hpp), so a 5,000-task array costs one row to submit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace railyard::jobs {

inline constexpr int kMaxArrayIndex = 9'999'999;
inline constexpr int64_t kMaxArrayTasks = 1'000'000;

struct ArrayRange {
  int first = 0, last = 0, step = 1;  // first, first+step, ... <= last
  int64_t size() const { return (last - first) / step + 1; }
  bool operator==(const ArrayRange&) const = default;
};

struct ArraySpec {
  std::vector<ArrayRange> ranges;  // in the order given; indexes are unique across them
  int max_running = 0;             // tasks running at once; 0 = no cap

  // Tasks in the array.
  int64_t size() const;
  // The index of the task at `position` (0 <= position < size()), in the order given.
  int index_at(int64_t position) const;
  // Where task `index` is in the order given (index_at's inverse); nullopt when the array has no such task.
  std::optional<int64_t> position_of(int index) const;
  // Canonical text: parse_array_spec(text()) == *this.
  std::string text() const;
  bool operator==(const ArraySpec&) const = default;
};

// Errors name the part that is wrong: an empty part, a non-number, a range that runs backwards, a step of
// 0, an index above kMaxArrayIndex, an index given twice, more than kMaxArrayTasks tasks, a bad "%M".
Result<ArraySpec> parse_array_spec(std::string_view text);

}  // namespace railyard::jobs
