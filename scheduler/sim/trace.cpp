#include "scheduler/sim/trace.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <unordered_map>

namespace railyard::sim {
namespace {

constexpr std::string_view kHeader = "job_id,submit_s,duration_s,num_gpus,user[,status][,qos][,dependency][,array]";
constexpr std::string_view kRequired[] = {"job_id", "submit_s", "duration_s", "num_gpus", "user"};
constexpr size_t kMaxDependencyRefs = 1000;  // names in one row's dependency column

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

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Where the optional columns are (-1: absent), from the header.
struct Columns {
  size_t count = 0;
  int status = -1, qos = -1, dependency = -1, array = -1;
};

Result<Columns> parse_header(std::string_view line) {
  const auto names = split_csv(line);
  auto bad = [&](const std::string& why) {
    return invalid("line 1: " + why + " (expected header \"" + std::string(kHeader) + "\", got " + in_quotes(line) +
                   ")");
  };
  if (names.size() < std::size(kRequired)) return bad("missing columns");
  Columns c;
  c.count = names.size();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string_view n = trim(names[i]);
    if (i < std::size(kRequired)) {
      if (n != kRequired[i]) return bad("column " + std::to_string(i + 1) + " must be " + in_quotes(kRequired[i]));
      continue;
    }
    int* slot = n == "status"       ? &c.status
                : n == "qos"        ? &c.qos
                : n == "dependency" ? &c.dependency
                : n == "array"      ? &c.array
                                    : nullptr;
    if (!slot) return bad("unknown column " + in_quotes(n));
    if (*slot >= 0) return bad("column " + in_quotes(n) + " appears twice");
    *slot = static_cast<int>(i);
  }
  return c;
}

// One name of a row's dependency column, resolved against earlier rows after sorting.
struct Ref {
  jobs::Dependency::Type type;
  std::string name;
};

// "afterok:a:b;afterany:c" -> refs, or the problem.
std::string parse_refs(std::string_view text, std::vector<Ref>& out) {
  size_t start = 0;
  while (start <= text.size()) {
    const size_t semi = text.find(';', start);
    const std::string_view entry =
        trim(text.substr(start, semi == std::string_view::npos ? std::string_view::npos : semi - start));
    start = semi == std::string_view::npos ? text.size() + 1 : semi + 1;
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    const auto type = jobs::parse_dependency_type(entry.substr(0, colon));
    if (!type || colon == std::string_view::npos)
      return "dependency " + in_quotes(entry) + " is not TYPE:JOB_ID[:JOB_ID...] (TYPE afterok, afterany, " +
             "afternotok or aftercorr)";
    for (std::string_view names = entry.substr(colon + 1); !names.empty();) {
      const size_t next = names.find(':');
      const std::string_view name = trim(names.substr(0, next));
      names = next == std::string_view::npos ? std::string_view() : names.substr(next + 1);
      if (name.empty()) return "dependency " + in_quotes(entry) + " names an empty job_id";
      if (out.size() >= kMaxDependencyRefs)
        return "dependency names more than " + std::to_string(kMaxDependencyRefs) + " jobs";
      out.push_back({*type, std::string(name)});
    }
  }
  return "";
}

// Validates one data row. Returns "" and fills `job` when good, else the problem (without the line prefix).
std::string parse_row(const std::vector<std::string_view>& f, const Columns& c, const TraceOptions& o,
                      TraceJob& job, std::vector<Ref>& refs) {
  if (f.size() < std::size(kRequired) || f.size() > c.count)
    return "expected " + std::to_string(c.count) + " columns, got " + std::to_string(f.size());
  auto column = [&](int i) { return i >= 0 && static_cast<size_t>(i) < f.size() ? trim(f[static_cast<size_t>(i)]) : ""; };
  job.job_id = std::string(trim(f[0]));
  if (job.job_id.empty()) return "job_id is empty";
  double submit = 0, duration = 0;
  int64_t gpus = 0;
  if (!parse_double(trim(f[1]), submit)) return "submit_s is not a number: " + in_quotes(trim(f[1]));
  if (!parse_double(trim(f[2]), duration)) return "duration_s is not a number: " + in_quotes(trim(f[2]));
  if (!parse_int(trim(f[3]), gpus)) return "num_gpus is not an integer: " + in_quotes(trim(f[3]));
  if (submit < 0) return "submit_s is negative (" + std::string(trim(f[1])) + ")";
  if (duration < 0) return "duration_s is negative (" + std::string(trim(f[2])) + ")";
  if (gpus <= 0) return "num_gpus must be > 0 (got " + std::to_string(gpus) + ")";
  const int64_t scaled = gpus * o.scale_gpus;
  if (o.max_gpus > 0 && scaled > o.max_gpus)
    return "job needs " + std::to_string(scaled) + " GPUs, the cluster has " + std::to_string(o.max_gpus);
  job.submit_s = submit / o.load;
  job.duration_s = duration;
  job.gpus = static_cast<int>(scaled);
  std::string status(column(c.status));
  for (char& ch : status) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  job.fails = status == "failed" || status == "killed";
  if (const std::string_view qos = column(c.qos); !qos.empty()) {
    const auto parsed = jobs::parse_qos(qos);
    if (!parsed) return "qos must be high, normal or scavenger (got " + in_quotes(qos) + ")";
    job.qos = *parsed;
  }
  if (const std::string_view a = column(c.array); !a.empty()) {
    auto spec = jobs::parse_array_spec(a);
    if (!spec) return "array: " + spec.error().message;
    job.array = std::move(*spec);
  }
  return parse_refs(column(c.dependency), refs);
}

// The row a name (or NAME_INDEX, a task of an array row) refers to among the rows before it.
std::string resolve(const Ref& ref, const std::unordered_map<std::string, size_t>& rows,
                    const std::vector<TraceJob>& jobs, TraceJob::After& out) {
  out.type = ref.type;
  if (auto it = rows.find(ref.name); it != rows.end()) {
    out.row = it->second;
    return "";
  }
  const size_t us = ref.name.rfind('_');
  int64_t task = -1;
  if (us != std::string::npos && parse_int(std::string_view(ref.name).substr(us + 1), task) && task >= 0 &&
      ref.type != jobs::Dependency::Type::kAfterCorr) {
    if (auto it = rows.find(ref.name.substr(0, us)); it != rows.end() && jobs[it->second].array &&
                                                      jobs[it->second].array->position_of(static_cast<int>(task))) {
      out.row = it->second;
      out.task = static_cast<int>(task);
      return "";
    }
  }
  return "dependency names " + in_quotes(ref.name) + ", which is no row submitted before this one";
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
  const auto columns = parse_header(trim(line));
  if (!columns) return columns.error();
  std::vector<std::vector<Ref>> refs;  // per row of trace.jobs
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view view = trim(line);
    if (view.empty()) continue;
    auto fields = split_csv(view);
    if (!options.user.empty() && (fields.size() < 5 || trim(fields[4]) != options.user)) continue;
    TraceJob job;
    std::vector<Ref> row_refs;
    std::string problem = parse_row(fields, *columns, options, job, row_refs);
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
    refs.push_back(std::move(row_refs));
    if (options.limit > 0 && static_cast<int64_t>(trace.jobs.size()) >= options.limit) break;
  }
  if (in.bad()) return internal_error("read error after line " + std::to_string(line_no));
  std::vector<size_t> order(trace.jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return trace.jobs[a].submit_s < trace.jobs[b].submit_s; });
  // Rows in submit order; a dependency resolves to a row kept before it (a later duplicate name wins).
  std::vector<TraceJob> sorted;
  sorted.reserve(order.size());
  std::unordered_map<std::string, size_t> rows;
  for (size_t i : order) {
    TraceJob& job = trace.jobs[i];
    std::string problem;
    for (const Ref& ref : refs[i]) {
      TraceJob::After after;
      problem = resolve(ref, rows, sorted, after);
      if (!problem.empty()) break;
      job.after.push_back(after);
    }
    if (!problem.empty()) {
      std::string message = "line " + std::to_string(job.line) + ": " + problem;
      if (options.stop_on_bad_row) return invalid(message);
      trace.problems.push_back(std::move(message));
      ++trace.skipped_rows;
      continue;
    }
    rows[job.job_id] = sorted.size();
    sorted.push_back(std::move(job));
  }
  trace.jobs = std::move(sorted);
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

std::optional<double> offered_load(const std::vector<TraceJob>& jobs, int64_t cluster_gpus) {
  if (jobs.empty() || cluster_gpus <= 0) return std::nullopt;
  const double span = jobs.back().submit_s - jobs.front().submit_s;
  if (!(span > 0)) return std::nullopt;
  double gpu_s = 0;
  for (const TraceJob& job : jobs)
    gpu_s += static_cast<double>(job.gpus) * job.duration_s * static_cast<double>(job.array ? job.array->size() : 1);
  return gpu_s / (span * static_cast<double>(cluster_gpus));
}

Result<double> set_offered_load(std::vector<TraceJob>& jobs, int64_t cluster_gpus, double target) {
  if (!(target > 0) || !std::isfinite(target)) return invalid("--offered-load must be a positive number");
  const auto load = offered_load(jobs, cluster_gpus);
  if (!load) return invalid("--offered-load needs jobs submitted at more than one time");
  if (!(*load > 0)) return invalid("--offered-load needs jobs that run: every duration is 0");
  const double divisor = target / *load;
  for (TraceJob& job : jobs) job.submit_s /= divisor;
  return divisor;
}

}  // namespace railyard::sim
