// The arithmetic and formatting of railyard-allreduce, kept apart from MPI and NCCL so it is unit-tested.
// Definitions follow nccl-tests (doc/PERFORMANCE.md):
//   algbw = S / t                 (S bytes per rank, t seconds per allreduce)
//   busbw = algbw * 2 (n - 1) / n (what each link carries in a ring; comparable across rank counts)
// GB means 1e9 bytes, as in nccl-tests.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace railyard::workloads {

struct BenchPoint {
  size_t bytes = 0;
  double time_us = 0;
  double algbw_gbytes_s = 0;
  double busbw_gbytes_s = 0;
};

// "8", "64K", "1M", "1G" (binary multiples, as nccl-tests reads -b/-e); optional trailing "B".
Result<size_t> parse_size(std::string_view text);

// min, min*factor, ... up to and including max (a last step that would pass max is clamped to max).
// Sizes are rounded down to whole floats (4 bytes), at least one float.
Result<std::vector<size_t>> bench_sizes(size_t min_bytes, size_t max_bytes, double factor);

BenchPoint make_point(size_t bytes, double seconds_per_iteration, int world);

// [{"bytes": ..., "time_us": ..., "algbw_gbytes_s": ..., "busbw_gbytes_s": ...}, ...]
nlohmann::ordered_json to_json(const std::vector<BenchPoint>& points);

// nccl-tests-like table lines.
std::string table_header();
std::string table_row(const BenchPoint& point);

}  // namespace railyard::workloads
