#include "scheduler/sim/trace.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string_view>

namespace railyard::sim {
namespace {

constexpr std::string_view kHeader = "job_id,submit_s,duration_s,num_gpus,user,status";

std::vector<std::string_view> split_csv(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    out.push_back(
        line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool parse_double(std::string_view s, double& out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(out);
}

bool parse_int(std::string_view s, int64_t& out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Validates one data row. Returns "" and fills `job` when good, else the problem (without the line prefix).
std::string parse_row(const std::vector<std::string_view>& f, const TraceOptions& o, TraceJob& job) {
  if (f.size() < 5 || f.size() > 6)
    return "expected 6 columns (" + std::string(kHeader) + "), got " + std::to_string(f.size());
  job.job_id = std::string(trim(f[0]));
  if (job.job_id.empty()) return "job_id is empty";
  double submit = 0, duration = 0;
  int64_t gpus = 0;
  if (!parse_double(trim(f[1]), submit)) return "submit_s is not a number: " + quoted(trim(f[1]));
  if (!parse_double(trim(f[2]), duration)) return "duration_s is not a number: " + quoted(trim(f[2]));
  if (!parse_int(trim(f[3]), gpus)) return "num_gpus is not an integer: " + quoted(trim(f[3]));
  if (submit < 0) return "submit_s is negative (" + std::string(trim(f[1])) + ")";
  if (duration < 0) return "duration_s is negative (" + std::string(trim(f[2])) + ")";
  if (gpus <= 0) return "num_gpus must be > 0 (got " + std::to_string(gpus) + ")";
  const int64_t scaled = gpus * o.scale_gpus;
  if (o.max_gpus > 0 && scaled > o.max_gpus)
    return "job needs " + std::to_string(scaled) + " GPUs, the cluster has " + std::to_string(o.max_gpus);
  job.submit_s = submit / o.load;
  job.duration_s = duration;
  job.gpus = static_cast<int>(scaled);
  return "";
}

Status check_options(const TraceOptions& o) {
  if (o.scale_gpus < 1 || o.scale_gpus > 1'000'000) return invalid("--scale-gpus must be 1..1000000");
  if (!(o.load > 0) || !std::isfinite(o.load)) return invalid("--load must be a positive number");
  if (o.limit < 0) return invalid("--limit must be >= 0");
  return ok();
}

}  // namespace

Result<Trace> read_trace(std::istream& in, const TraceOptions& options) {
  if (auto s = check_options(options); !s) return s.error();
  Trace trace;
  std::string line;
  int line_no = 0;
  if (!std::getline(in, line))
    return invalid("trace is empty (expected header \"" + std::string(kHeader) + "\")");
  ++line_no;
  if (trim(line).substr(0, 6) != "job_id")
    return invalid("line 1: expected header \"" + std::string(kHeader) + "\", got " + quoted(trim(line)));
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view view = trim(line);
    if (view.empty()) continue;
    auto fields = split_csv(view);
    if (!options.user.empty() && (fields.size() < 5 || trim(fields[4]) != options.user)) continue;
    TraceJob job;
    std::string problem = parse_row(fields, options, job);
    if (!problem.empty()) {
      std::string message = "line " + std::to_string(line_no) + ": " + problem;
      if (options.stop_on_bad_row) return invalid(message);
      trace.problems.push_back(std::move(message));
      ++trace.skipped_rows;
      continue;
    }
    job.user = std::string(trim(fields[4]));
    job.line = line_no;
    trace.jobs.push_back(std::move(job));
    if (options.limit > 0 && static_cast<int64_t>(trace.jobs.size()) >= options.limit) break;
  }
  if (in.bad()) return internal_error("read error after line " + std::to_string(line_no));
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  return trace;
}

Result<Trace> load_trace_file(const std::string& path, const TraceOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return invalid("cannot read trace \"" + path + "\": is a directory");
  std::ifstream in(path);
  if (!in) return invalid("cannot read trace \"" + path + "\": no such file or not readable");
  auto trace = read_trace(in, options);
  if (!trace) return Error{trace.error().code, path + ": " + trace.error().message};
  return trace;
}

}  // namespace railyard::sim
