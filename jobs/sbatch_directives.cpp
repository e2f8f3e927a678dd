// What each #SBATCH directive means for a JobSpec. Table of the mapping: jobs/README.md ("#SBATCH import").
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
  if (!spec.gpu_type.empty() && spec.gpu_type != type) {
    st.error(o, "GPU type " + type + " conflicts with " + spec.gpu_type + " from line " +
                    std::to_string(st.gpu_type_line));
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
void on_ntasks_per_node(const Option& o, ImportState& st) {
  auto n = required_positive(o, st);
  if (n && *n > 1) st.warn(o, "Railyard starts the script once; the script's srun/mpirun starts the tasks");
}

void ignore_log_path(const Option& o, ImportState& st) {
  st.warn_line(o.line, "#SBATCH " + o.spelled + " ignored: Railyard keeps per-rank logs (railyard logs JOB)");
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

using Handler = void (*)(const Option&, ImportState&);
struct Directive {
  std::string_view long_name;
  char short_name;  // 0 when none
  Arity arity;
  Handler apply;
};

template <std::string JobSpec::*M>
void set_string(const Option& o, ImportState& st) {
  st.out.spec.*M = *o.value;
}
template <int JobSpec::*M>
void set_gpu_count(const Option& o, ImportState& st) {
  if (auto n = typed_count(o, st)) st.out.spec.*M = *n;
}
template <bool kValue>
void set_requeue(const Option&, ImportState& st) {
  st.out.spec.requeue = kValue;
}

const std::array<Directive, 20> kDirectives = {{
    {"nodes", 'N', Arity::kRequired, on_nodes},
    {"ntasks-per-node", 0, Arity::kRequired, on_ntasks_per_node},
    {"gpus-per-node", 0, Arity::kRequired, set_gpu_count<&JobSpec::gpus_per_node>},
    {"gres", 0, Arity::kRequired, on_gres},
    {"gpus", 'G', Arity::kRequired, set_gpu_count<&JobSpec::gpus>},
    {"time", 't', Arity::kRequired, on_time},
    {"job-name", 'J', Arity::kRequired, set_string<&JobSpec::name>},
    {"partition", 'p', Arity::kRequired, on_partition},
    {"constraint", 'C', Arity::kRequired, on_constraint},
    {"qos", 'q', Arity::kRequired, on_qos},
    {"dependency", 'd', Arity::kRequired, on_dependency},
    {"array", 'a', Arity::kRequired, on_array},
    {"account", 'A', Arity::kRequired, set_string<&JobSpec::project>},
    {"chdir", 'D', Arity::kRequired, set_string<&JobSpec::workdir>},
    {"exclusive", 0, Arity::kEqualsOnly, on_exclusive},
    {"requeue", 0, Arity::kNone, set_requeue<true>},
    {"no-requeue", 0, Arity::kNone, set_requeue<false>},
    {"output", 'o', Arity::kRequired, ignore_log_path},
    {"error", 'e', Arity::kRequired, ignore_log_path},
    {"open-mode", 0, Arity::kRequired, ignore_log_path},
}};

const Directive* find_directive(std::string_view name, bool is_short) {
  for (const Directive& d : kDirectives) {
    if (is_short ? (name.size() == 1 && d.short_name == name[0]) : d.long_name == name) return &d;
  }
  return nullptr;
}

}  // namespace

std::optional<Arity> option_arity(std::string_view name, bool is_short) {
  const Directive* d = find_directive(name, is_short);
  if (!d) return std::nullopt;
  return d->arity;
}

void apply_option(const Option& o, ImportState& st) {
  const Directive* d = find_directive(o.name, o.is_short);
  if (!d) return st.warn_line(o.line, "#SBATCH " + o.spelled + " ignored: not supported");
  if (d->arity == Arity::kNone && o.value) st.warn(o, "takes no value; the value is ignored");
  d->apply(o, st);
}

void finish_import(std::string_view script, ImportState& st) {
  JobSpec& spec = st.out.spec;
  if (spec.gpus_per_node > 0 && spec.nodes == 0 && spec.gpus == 0) spec.nodes = 1;  // sbatch's default
  if (spec.gpus == 0 && spec.gpus_per_node == 0)
    st.out.warnings.push_back(
        "no GPU request (--gpus, --gpus-per-node or --gres=gpu:N): the job asks for no GPUs");
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
