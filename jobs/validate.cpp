#include "jobs/validate.hpp"

#include <cmath>
#include <utility>

#include "jobs/container.hpp"
#include "jobs/mig.hpp"
#include "jobs/parse_util.hpp"
#include "jobs/spec_json.hpp"
#include "jobs/time_limit.hpp"

namespace railyard::jobs {
namespace {

using Problems = std::vector<std::string>;

std::string field_eq(std::string_view field, int64_t v) {
  return std::string(field) + "=" + std::to_string(v);
}

// Total GPUs (slices) of one replica, in 64 bits; meaningful once check_size found no problem.
int64_t gpus_per_replica(const JobSpec& s) {
  if (s.nodes > 0 && s.gpus_per_node > 0) return int64_t{s.nodes} * s.gpus_per_node;
  return s.gpus;
}

bool check_size(const JobSpec& s, Problems& p) {
  size_t before = p.size();
  for (auto [field, v] : {std::pair{"gpus", s.gpus}, {"nodes", s.nodes}, {"gpus_per_node", s.gpus_per_node}})
    if (v < 0) p.push_back(field_eq(field, v) + ": must be >= 0");
  if (p.size() > before) return false;
  const int64_t product = int64_t{s.nodes} * s.gpus_per_node;
  if (product > 0) {
    if (s.gpus > 0 && s.gpus != product)
      p.push_back(field_eq("gpus", s.gpus) +
                  ": disagrees with nodes x gpus_per_node = " + std::to_string(s.nodes) + " x " +
                  std::to_string(s.gpus_per_node) + " = " + std::to_string(product));
  } else if (asks_for_whole_nodes(s)) {
    return true;  // the GPU count comes from the nodes (resolve_whole_nodes)
  } else if (s.gpus == 0) {
    p.push_back("gpus: the job asks for no GPUs; set gpus, or nodes and gpus_per_node, or nodes and exclusive "
                "(whole nodes)");
  } else if (s.nodes > s.gpus) {
    p.push_back(field_eq("nodes", s.nodes) + ": more nodes than gpus=" + std::to_string(s.gpus));
  } else if (s.gpus_per_node > 0 && s.gpus % s.gpus_per_node != 0) {
    p.push_back(field_eq("gpus", s.gpus) +
                ": not a multiple of gpus_per_node=" + std::to_string(s.gpus_per_node));
  }
  if (p.size() > before) return false;
  int64_t total = gpus_per_replica(s) * std::max(s.replicas, 1);
  if (total > kMaxJobGpus)
    p.push_back("gpus: " + std::to_string(total) + " GPUs in all; at most " + std::to_string(kMaxJobGpus));
  return p.size() == before;
}

void check_kind_and_limits(const JobSpec& s, Problems& p) {
  if (s.kind == JobKind::kService && s.replicas < 1)
    p.push_back(field_eq("replicas", s.replicas) + ": a service needs at least 1");
  if (s.kind == JobKind::kBatch && s.replicas != 1)
    p.push_back(field_eq("replicas", s.replicas) + ": only services have replicas (a batch job has 1)");
  if (s.array && s.kind != JobKind::kBatch)
    p.push_back("array: only batch jobs come in arrays (a service scales with replicas)");
  if (s.time_limit_s < 0)
    p.push_back(field_eq("time_limit", s.time_limit_s) + ": must be >= 0 seconds (0 means no limit)");
  else if (s.time_limit_s > kMaxTimeLimitS)
    p.push_back(field_eq("time_limit", s.time_limit_s) + ": longer than the 3650-day maximum");
  else if (s.kind == JobKind::kBatch && s.time_limit_s == 0)
    p.push_back("time_limit: a batch job needs a limit > 0 (only services may run without one)");
  if (s.mem_mb < 0) p.push_back(field_eq("mem_mb", s.mem_mb) + ": must be >= 0 MiB (0 means the GPU share)");
  if (s.priority < kMinPriority || s.priority > kMaxPriority)
    p.push_back(field_eq("priority", s.priority) + ": must be between " + std::to_string(kMinPriority) +
                " and " + std::to_string(kMaxPriority));
}

void check_mig(const JobSpec& s, bool size_ok, Problems& p) {
  if (s.mig.empty()) return;
  if (!is_known_mig_profile(s.mig)) {
    std::vector<std::string_view> names;
    for (const MigProfile& m : mig_profiles()) names.push_back(m.name);
    p.push_back("mig " + in_quotes(s.mig) + ": unknown MIG profile" + did_you_mean(s.mig, names) +
                " (known: " + known_mig_profile_names() + ")");
  }
  if (size_ok && gpus_per_replica(s) != 1)
    p.push_back("mig " + in_quotes(s.mig) + ": a MIG job takes exactly one slice, not " +
                std::to_string(gpus_per_replica(s)) + " (use a service with replicas for more)");
  if (s.exclusive) p.push_back("exclusive: a MIG slice job cannot take whole nodes");
}

// A NUL cannot travel in argv or the environment; invalid UTF-8 cannot travel in JSON.
std::string bad_text(std::string_view v) {
  if (v.find('\0') != std::string_view::npos) return "contains a NUL byte";
  if (!is_valid_utf8(v)) return "not valid UTF-8";
  return "";
}

void check_command_and_env(const JobSpec& s, Problems& p) {
  if (s.launcher != Launcher::kNone && s.command.empty())
    p.push_back("command: launcher \"" + std::string(to_string(s.launcher)) + "\" needs a command");
  if (!s.command.empty() && s.command[0].empty()) p.push_back("command[0]: empty program name");
  for (auto [field, n] : {std::pair{"command", s.command.size()},
                          {"env", s.env.size()},
                          {"features", s.features.size()},
                          {"afterok", s.afterok.size()},
                          {"after", s.after.size()}})
    if (n > kMaxListEntries)
      p.push_back(std::string(field) + ": " + std::to_string(n) + " entries; at most " +
                  std::to_string(kMaxListEntries));
  for (size_t i = 0; i < s.command.size() && i < kMaxListEntries; ++i) {
    if (std::string why = bad_text(s.command[i]); !why.empty()) {
      p.push_back("command[" + std::to_string(i) + "]: " + why);
      break;
    }
  }
  for (const auto& [key, value] : s.env) {
    if (key.empty() || key.find('=') != std::string::npos || !bad_text(key).empty()) {
      p.push_back("env: invalid variable name " + in_quotes(key));
    } else if (std::string why = bad_text(value); !why.empty()) {
      p.push_back("env." + key + ": " + why);
    }
  }
  if (!s.workdir.empty() && s.workdir.front() != '/')
    p.push_back("workdir " + in_quotes(s.workdir) + ": must be an absolute path");
}

void check_identity_and_misc(const JobSpec& s, Problems& p) {
  if (s.name.size() > kMaxNameLength)
    p.push_back("name: " + std::to_string(s.name.size()) + " bytes; at most " +
                std::to_string(kMaxNameLength));
  if (s.user.empty()) p.push_back("user: missing (who runs the job?)");
  for (auto [field, v] : {std::pair{"name", &s.name},
                          {"user", &s.user},
                          {"project", &s.project},
                          {"gpu_type", &s.gpu_type},
                          {"mig", &s.mig},
                          {"workdir", &s.workdir}})
    if (std::string why = bad_text(*v); !why.empty()) p.push_back(std::string(field) + ": " + why);
  for (size_t i = 0; i < s.features.size() && i < kMaxListEntries; ++i)
    if (s.features[i].empty() || !bad_text(s.features[i]).empty())
      p.push_back("features[" + std::to_string(i) +
                  "]: " + (s.features[i].empty() ? "empty" : bad_text(s.features[i])));
  if (s.target) {
    if (s.target->metric.empty()) p.push_back("target.metric: empty");
    if (!std::isfinite(s.target->value)) p.push_back("target.value: must be a finite number");
  }
  for (JobId id : s.afterok) {
    if (id <= 0) {
      p.push_back("afterok: job id " + std::to_string(id) + " is not positive");
      break;
    }
  }
  for (const Dependency& d : s.after) {
    if (d.job <= 0 || d.task < -1 || d.task > kMaxArrayIndex) {
      p.push_back("after: " + in_quotes(d.text()) + " names no job or task");
      break;
    }
    if (d.type == Dependency::Type::kAfterCorr && d.task >= 0) {
      p.push_back("after: " + in_quotes(d.text()) + ": aftercorr takes a whole array, not one task");
      break;
    }
    if (d.type == Dependency::Type::kAfterCorr && !s.array) {
      p.push_back(
          "after: " + in_quotes(d.text()) +
          ": aftercorr is for arrays (each task waits for the task with its index); this job is not one");
      break;
    }
  }
}

}  // namespace

bool asks_for_whole_nodes(const JobSpec& s) {
  return s.exclusive && s.nodes > 0 && s.gpus == 0 && s.gpus_per_node == 0 && s.mig.empty();
}

std::vector<std::string> spec_problems(const JobSpec& spec) {
  Problems p;
  check_identity_and_misc(spec, p);
  bool size_ok = check_size(spec, p);
  check_kind_and_limits(spec, p);
  check_mig(spec, size_ok, p);
  check_command_and_env(spec, p);
  if (spec.container) {
    std::vector<std::string> c = container_problems(*spec.container);
    p.insert(p.end(), c.begin(), c.end());
  }
  return p;
}

Status status_from_problems(const std::vector<std::string>& problems) {
  if (problems.empty()) return ok();
  return invalid(join(problems, "; "));
}

Status validate_spec(const JobSpec& spec) { return status_from_problems(spec_problems(spec)); }

Status validate_against_cluster(const JobSpec& spec, const topology::Cluster& cluster) {
  Problems p = spec_problems(spec);
  Problems c = cluster_problems(spec, cluster);
  p.insert(p.end(), c.begin(), c.end());
  return status_from_problems(p);
}

}  // namespace railyard::jobs
