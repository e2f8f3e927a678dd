#include "workloads/allreduce_bench.hpp"

#include <cctype>
#include <charconv>
#include <cstdio>

namespace railyard::workloads {

Result<size_t> parse_size(std::string_view text) {
  if (!text.empty() && (text.back() == 'B' || text.back() == 'b')) text.remove_suffix(1);
  size_t multiplier = 1;
  if (!text.empty()) {
    switch (std::toupper(static_cast<unsigned char>(text.back()))) {
      case 'K':
        multiplier = size_t{1} << 10;
        break;
      case 'M':
        multiplier = size_t{1} << 20;
        break;
      case 'G':
        multiplier = size_t{1} << 30;
        break;
      default:
        break;
    }
    if (multiplier != 1) text.remove_suffix(1);
  }
  size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return invalid("not a size: '" + std::string(text) + "' (examples: 8, 64K, 1M, 1G)");
  }
  return value * multiplier;
}

Result<std::vector<size_t>> bench_sizes(size_t min_bytes, size_t max_bytes, double factor) {
  if (min_bytes == 0 || max_bytes < min_bytes) return invalid("need 0 < -b <= -e");
  if (min_bytes != max_bytes && !(factor > 1.0)) return invalid("-f must be greater than 1");
  std::vector<size_t> sizes;
  for (double size = static_cast<double>(min_bytes);; size *= factor) {
    const auto bytes = std::min(static_cast<size_t>(size), max_bytes);
    sizes.push_back(std::max<size_t>(bytes / 4 * 4, 4));
    if (bytes >= max_bytes) break;
  }
  return sizes;
}

BenchPoint make_point(size_t bytes, double seconds, int world) {
  BenchPoint point;
  point.bytes = bytes;
  point.time_us = seconds * 1e6;
  point.algbw_gbytes_s = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
  point.busbw_gbytes_s = world > 0 ? point.algbw_gbytes_s * 2.0 * (world - 1) / world : 0.0;
  return point;
}

nlohmann::ordered_json to_json(const std::vector<BenchPoint>& points) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& p : points) {
    out.push_back({{"bytes", p.bytes},
                   {"time_us", p.time_us},
                   {"algbw_gbytes_s", p.algbw_gbytes_s},
                   {"busbw_gbytes_s", p.busbw_gbytes_s}});
  }
  return out;
}

std::string table_header() { return "#       size(B)    count(float)    time(us)  algbw(GB/s)  busbw(GB/s)"; }

std::string table_row(const BenchPoint& p) {
  char line[128];
  std::snprintf(line, sizeof line, "%15zu %15zu %11.2f %12.3f %12.3f", p.bytes, p.bytes / 4, p.time_us,
                p.algbw_gbytes_s, p.busbw_gbytes_s);
  return line;
}

}  // namespace railyard::workloads
