// What each mapped sbatch option means for a JobSpec. Table of the mapping: jobs/README.md ("#SBATCH import").
#include <algorithm>
#include <array>
#include <cctype>
#include <climits>
#include <vector>

#include "jobs/parse_util.hpp"
#include "jobs/sbatch_internal.hpp"
#include "jobs/time_limit.hpp"
#include "topology/profile.hpp"

namespace railyard::jobs::sbatch_detail {
namespace {

std::optional<int> positive_int(std::string_view s) {
  auto v = parse_digits(s);
  if (!v || *v <= 0 || *v > INT_MAX) return std::nullopt;
  return static_cast<int>(*v);
}

std::optional<int> required_positive(const Option& o, ImportState& st) {
  auto v = positive_int(*o.value);
  if (!v) st.error(o, "expected a positive integer");
  return v;
}

// Site GRES names such as "nvidia_h100_80gb_hbm3" or "a100-sxm4-80gb" carry a type Railyard knows:
// read them as that type (with a warning), otherwise upper-case the name.
std::string gpu_type_from(std::string_view raw, const Option& o, ImportState& st) {
  std::string upper = to_upper(raw);
  for (const topology::NodeProfile& p : topology::builtin_profiles()) {
    if (upper == p.gpu_type) return upper;
  }
  size_t start = 0;
  while (start < upper.size()) {
    size_t end = start;
    while (end < upper.size() && std::isalnum(static_cast<unsigned char>(upper[end]))) ++end;
    std::string_view word = std::string_view(upper).substr(start, end - start);
    for (const topology::NodeProfile& p : topology::builtin_profiles()) {
      if (word != p.gpu_type) continue;
      st.warn(o, "GPU type " + in_quotes(raw) + " read as " + p.gpu_type);
      return p.gpu_type;
    }
    start = end + 1;
  }
  return upper;
}

void set_gpu_type(std::string_view raw, const Option& o, ImportState& st) {
  std::string type = gpu_type_from(raw, o, st);
  JobSpec& spec = st.out.spec;
  const bool command_line_wins = o.line == 0 && st.gpu_type_line > 0;
  if (!spec.gpu_type.empty() && spec.gpu_type != type && !command_line_wins) {
    st.error(o, "GPU type " + type + " conflicts with " + spec.gpu_type + " from " + where(st.gpu_type_line));
    return;
  }
  spec.gpu_type = type;
  st.gpu_type_line = o.line;
}

// "[TYPE:]COUNT" as --gpus and --gpus-per-node take it.
std::optional<int> typed_count(const Option& o, ImportState& st) {
  std::string_view v = *o.value;
  size_t colon = v.rfind(':');
  auto count = positive_int(colon == std::string_view::npos ? v : v.substr(colon + 1));
  if (!count || colon == 0) {
    st.error(o, "expected [TYPE:]COUNT, e.g. 8 or h100:8");
    return std::nullopt;
  }
  if (colon != std::string_view::npos) set_gpu_type(v.substr(0, colon), o, st);
  return count;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = std::min(s.find(sep, start), s.size());
    parts.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

}  // namespace

void on_nodes(const Option& o, ImportState& st) {
  std::string_view v = *o.value;
  size_t dash = v.find('-');
  if (dash != std::string_view::npos) {  // Slurm's MIN-MAX node range
    auto lo = positive_int(v.substr(0, dash));
    if (!lo || !positive_int(v.substr(dash + 1))) return st.error(o, "expected a node count or MIN-MAX");
    st.warn(o, "node ranges are not supported (a gang needs one size); using " + std::to_string(*lo));
    st.out.spec.nodes = *lo;
    return;
  }
  if (auto n = required_positive(o, st)) st.out.spec.nodes = *n;
}

// --gres=gpu[:TYPE][:COUNT][,other...]: COUNT GPUs on every node.
void on_gres(const Option& o, ImportState& st) {
  for (std::string_view item : split(*o.value, ',')) {
    std::vector<std::string_view> parts = split(item, ':');
    if (parts[0] != "gpu") {
      st.warn(o, "GRES " + in_quotes(item) + " ignored: only gpu is supported");
      continue;
    }
    bool typed = parts.size() == 3 || (parts.size() == 2 && !parse_digits(parts[1]));
    std::optional<int> count =
        parts.size() == 1 || (parts.size() == 2 && typed) ? 1 : positive_int(parts.back());
    if (!count || parts.size() > 3 || (typed && parts[1].empty()))
      return st.error(o, "expected gpu[:TYPE][:COUNT], e.g. gpu:8 or gpu:h100:8");
    if (typed) set_gpu_type(parts[1], o, st);
    st.out.spec.gpus_per_node = *count;
  }
}

// Tasks are not Railyard's: it starts the script once, and the script's srun/mpirun starts them.
void on_ntasks(const Option& o, ImportState& st) {
  auto n = required_positive(o, st);
  if (n && *n > 1) st.warn(o, "Railyard starts the script once; the script's srun/mpirun starts the tasks");
}


void on_time(const Option& o, ImportState& st) {
  auto t = parse_slurm_time(*o.value);
  if (!t) return st.error(o, t.error().message);
  st.out.spec.time_limit_s = *t;
  st.saw_time = true;
}

void on_partition(const Option& o, ImportState& st) {
  std::string_view v = *o.value;
  std::string_view first = v.substr(0, v.find(','));
  if (first.empty()) return st.error(o, "expected a partition name");
  if (first.size() < v.size())
    st.warn(o, "several partitions (any of) are not supported; using " + in_quotes(first) + " only");
  auto& features = st.out.spec.features;
  if (std::find(features.begin(), features.end(), first) == features.end()) features.emplace_back(first);
}

void on_constraint(const Option& o, ImportState& st) {
  std::string_view v = *o.value;
  if (v.find_first_of("|[]*") != std::string_view::npos)
    return st.warn(o, "only AND constraints (a&b) are supported; ignored");
  size_t start = 0;
  while (start <= v.size()) {
    size_t sep = std::min(v.find_first_of("&,", start), v.size());
    std::string_view f = v.substr(start, sep - start);
    start = sep + 1;
    if (f.empty()) continue;
    auto& features = st.out.spec.features;
    if (std::find(features.begin(), features.end(), f) == features.end()) features.emplace_back(f);
  }
}

void on_qos(const Option& o, ImportState& st) {
  auto q = parse_qos(to_lower(*o.value));
  if (!q) st.warn(o, "unknown QOS (Railyard has high, normal, scavenger); using normal");
  st.out.spec.qos = q.value_or(Qos::kNormal);
}

void on_dependency(const Option& o, ImportState& st) {
  auto deps = parse_dependency(*o.value);
  if (!deps) return st.error(o, deps.error().message);
  auto& spec = st.out.spec;
  for (JobId id : deps->afterok)
    if (std::find(spec.afterok.begin(), spec.afterok.end(), id) == spec.afterok.end())
      spec.afterok.push_back(id);
  for (const Dependency& d : deps->after)
    if (std::find(spec.after.begin(), spec.after.end(), d) == spec.after.end()) spec.after.push_back(d);
}

void on_array(const Option& o, ImportState& st) {
  auto a = parse_array_spec(*o.value);
  if (!a) return st.error(o, a.error().message);
  st.out.spec.array = std::move(*a);
}

void on_exclusive(const Option& o, ImportState& st) {
  if (o.value) st.warn(o, "only whole-node exclusivity is supported; treated as --exclusive");
  st.out.spec.exclusive = true;
}


void on_gpus_per_node(const Option& o, ImportState& st) {
  if (auto n = typed_count(o, st)) st.out.spec.gpus_per_node = *n;
}
void on_gpus(const Option& o, ImportState& st) {
  if (auto n = typed_count(o, st)) st.out.spec.gpus = *n;
}
void on_job_name(const Option& o, ImportState& st) { st.out.spec.name = *o.value; }
void on_account(const Option& o, ImportState& st) { st.out.spec.project = *o.value; }
void on_chdir(const Option& o, ImportState& st) { st.out.spec.workdir = *o.value; }
void on_requeue(const Option&, ImportState& st) { st.out.spec.requeue = true; }
void on_no_requeue(const Option&, ImportState& st) { st.out.spec.requeue = false; }
void on_spread_job(const Option&, ImportState& st) { st.out.spec.layout = Layout::kSpread; }
void on_honoured(const Option&, ImportState&) {}

// --mem: per node, MiB without a unit, K/M/G/T suffixes; 0 is "all of the node's memory", which is
// Railyard's default for a whole node.
void on_mem(const Option& o, ImportState& st) {
  std::string_view v = *o.value;
  size_t digits = 0;
  while (digits < v.size() && std::isdigit(static_cast<unsigned char>(v[digits]))) ++digits;
  auto n = parse_digits(v.substr(0, digits));
  const std::string unit = to_upper(v.substr(digits));
  const int64_t scale = unit.empty() || unit == "M" ? 1 : unit == "G" ? 1024 : unit == "T" ? 1024 * 1024 : 0;
  if (!n || (scale == 0 && unit != "K")) return st.error(o, "expected memory per node: 512, 512M, 64G, 1T");
  const int64_t mb = unit == "K" ? *n / 1024 : *n * scale;
  if (mb > INT_MAX) return st.error(o, "more memory than a node can have");
  if (*n > 0 && mb == 0) return st.error(o, "less than 1 MiB");
  st.out.spec.mem_mb = static_cast<int>(mb);
}

// Railyard's priority is a boost in -1000..1000; larger values are clamped, with a warning.
void set_priority(const Option& o, ImportState& st, int64_t value) {
  const int64_t clamped = std::clamp<int64_t>(value, -1000, 1000);
  if (clamped != value) st.warn(o, "priority is clamped to " + std::to_string(clamped) + " (range -1000..1000)");
  st.out.spec.priority = static_cast<int>(clamped);
}

// --nice[=N]: a positive nice lowers the priority (default 100, as sbatch's).
void on_nice(const Option& o, ImportState& st) {
  std::string_view v = o.value ? std::string_view(*o.value) : "100";
  const bool negative = v.starts_with('-');
  auto n = parse_digits(negative ? v.substr(1) : v);
  if (!n) return st.error(o, "expected an integer");
  set_priority(o, st, negative ? *n : -*n);
}

void on_priority(const Option& o, ImportState& st) {
  auto n = parse_digits(*o.value);
  if (!n) return st.error(o, "expected a non-negative integer (TOP is not supported)");
  set_priority(o, st, *n);
}

void on_hold(const Option&, ImportState& st) { st.out.effects.hold = true; }
void on_wait(const Option&, ImportState& st) { st.out.effects.wait = true; }
void on_parsable(const Option&, ImportState& st) { st.out.effects.parsable = true; }
void on_test_only(const Option&, ImportState& st) { st.out.effects.test_only = true; }
void on_quiet(const Option&, ImportState& st) { st.out.effects.quiet = true; }
void on_command_line_only(const Option& o, ImportState& st) {
  if (o.line > 0) st.warn(o, "ignored: only on the command line");
}

void apply_option(const Option& o, ImportState& st) {
  const std::string what = o.line > 0 ? "#SBATCH " + o.spelled : o.spelled;
  const Directive* d = find_directive(o.name, o.is_short);
  if (!d) return st.warn_line(o.line, what + " ignored: not an sbatch option Railyard knows");
  if (d->arity == Arity::kNone && o.value) st.warn(o, "takes no value; the value is ignored");
  if (!d->apply) return st.warn_line(o.line, what + " ignored: " + std::string(d->ignored_because));
  d->apply(o, st);
}

namespace {

// A script that asks for no GPU count (MLPerf's run.sub: the size comes from `sbatch -N 96`, the node from
// --exclusive) asks, on a GPU cluster, for whole nodes: all their GPUs. The scheduler fills in the count.
void take_whole_nodes(ImportState& st) {
  JobSpec& spec = st.out.spec;
  if (spec.nodes == 0) spec.nodes = 1;  // sbatch's default
  const std::string nodes =
      std::to_string(spec.nodes) + " whole node" + (spec.nodes == 1 ? "" : "s") + ", all their GPUs";
  if (spec.exclusive)
    st.out.warnings.push_back("no GPU request: --exclusive takes " + nodes);
  else
    st.out.warnings.push_back("no GPU request (--gpus, --gpus-per-node or --gres=gpu:N): the job takes " + nodes +
                              ", as --exclusive (give --gpus-per-node to take fewer)");
  spec.exclusive = true;
}

}  // namespace

void finish_import(std::string_view script, ImportState& st) {
  finish_container(st);
  JobSpec& spec = st.out.spec;
  if (spec.gpus_per_node > 0 && spec.nodes == 0 && spec.gpus == 0) spec.nodes = 1;  // sbatch's default
  if (spec.gpus == 0 && spec.gpus_per_node == 0) take_whole_nodes(st);
  if (!st.saw_time)
    st.out.warnings.push_back("no --time: Railyard's default limit " + format_time_limit(spec.time_limit_s) +
                              " applies");
  spec.launcher = Launcher::kNone;
  // A task of an array finds its index under Slurm's names too (Railyard's: RAILYARD_ARRAY_TASK_ID).
  const std::string prelude = spec.array ? "export SLURM_ARRAY_JOB_ID=\"$RAILYARD_ARRAY_JOB_ID\" "
                                           "SLURM_ARRAY_TASK_ID=\"$RAILYARD_ARRAY_TASK_ID\"\n"
                                         : "";
  spec.command = {"/bin/bash", "-c", prelude + std::string(script)};
}

}  // namespace railyard::jobs::sbatch_detail
