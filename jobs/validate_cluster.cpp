// cluster_problems: the "can never fit in this cluster" checks of jobs/validate.hpp.
#include <algorithm>
#include <set>

#include "jobs/mig.hpp"
#include "jobs/parse_util.hpp"
#include "jobs/validate.hpp"

namespace railyard::jobs {
namespace {

using Problems = std::vector<std::string>;
using topology::Cluster;
using topology::Node;
using topology::NodeProfile;

bool any_type(const JobSpec& s) { return s.gpu_type.empty() || iequals(s.gpu_type, "any"); }

bool has_feature(const Node& n, std::string_view f) {
  return std::find(n.features.begin(), n.features.end(), f) != n.features.end();
}

// The nodes a job may use at all: its GPU type and every feature it asks for.
bool eligible(const JobSpec& s, const Cluster& c, const Node& n) {
  if (!any_type(s) && !iequals(c.profiles()[n.profile].gpu_type, s.gpu_type)) return false;
  return std::all_of(s.features.begin(), s.features.end(),
                     [&](const std::string& f) { return has_feature(n, f); });
}

// " of type H100", " of type H100 with features a, b", or "".
std::string pool_words(const JobSpec& s) {
  std::string out = any_type(s) ? "" : " of type " + s.gpu_type;
  if (!s.features.empty()) out += " with features " + join(s.features, ", ");
  return out;
}

bool check_gpu_type(const JobSpec& s, const Cluster& c, Problems& p) {
  if (any_type(s)) return true;
  std::set<std::string> types;
  for (const Node& n : c.nodes()) types.insert(c.profiles()[n.profile].gpu_type);
  for (const std::string& t : types)
    if (iequals(t, s.gpu_type)) return true;
  std::vector<std::string> listed(types.begin(), types.end());
  p.push_back("gpu_type " + in_quotes(s.gpu_type) + ": no node has it (cluster has: " + join(listed, ", ") +
              ")");
  return false;
}

bool check_each_feature(const JobSpec& s, const Cluster& c, Problems& p) {
  size_t before = p.size();
  for (const std::string& f : s.features) {
    if (std::none_of(c.nodes().begin(), c.nodes().end(), [&](const Node& n) { return has_feature(n, f); }))
      p.push_back("features: no node has feature " + in_quotes(f));
  }
  return p.size() == before;
}

// Each feature exists somewhere (check_each_feature); do the type and all features meet on one node?
bool check_feature_combination(const JobSpec& s, const Cluster& c, Problems& p) {
  if (s.features.empty()) return true;
  if (std::any_of(c.nodes().begin(), c.nodes().end(), [&](const Node& n) { return eligible(s, c, n); }))
    return true;
  p.push_back("features: no node" + std::string(any_type(s) ? "" : " of type " + s.gpu_type) +
              " has all of " + join(s.features, ", "));
  return false;
}

struct Pool {
  int64_t nodes = 0;
  int64_t gpus = 0;
  int max_gpus_per_node = 0;
  int64_t nodes_big_enough = 0;  // nodes with at least gpus_per_node GPUs
};

Pool pool_of(const JobSpec& s, const Cluster& c) {
  Pool pool;
  for (const Node& n : c.nodes()) {
    if (!eligible(s, c, n)) continue;
    ++pool.nodes;
    pool.gpus += n.gpus;
    pool.max_gpus_per_node = std::max(pool.max_gpus_per_node, n.gpus);
    if (n.gpus >= s.gpus_per_node) ++pool.nodes_big_enough;
  }
  return pool;
}

void check_capacity(const JobSpec& s, const Pool& pool, Problems& p) {
  std::string words = pool_words(s);
  if (s.gpus_per_node > pool.max_gpus_per_node) {
    std::string who = any_type(s) && s.features.empty() ? "node type" : "node" + words;
    p.push_back("gpus_per_node=" + std::to_string(s.gpus_per_node) + ": no " + who + " has " +
                std::to_string(s.gpus_per_node) +
                " GPUs (largest: " + std::to_string(pool.max_gpus_per_node) + ")");
    return;
  }
  if (s.nodes > pool.nodes_big_enough) {
    std::string size =
        s.gpus_per_node > 0 ? " with at least " + std::to_string(s.gpus_per_node) + " GPUs" : "";
    p.push_back("nodes=" + std::to_string(s.nodes) + ": needs " + std::to_string(s.nodes) + " nodes" + words +
                size + "; the cluster has " + std::to_string(pool.nodes_big_enough));
    return;
  }
  if (!s.mig.empty()) return;  // one slice; check_cluster_mig decides
  int64_t per_replica = s.nodes > 0 && s.gpus_per_node > 0 ? int64_t{s.nodes} * s.gpus_per_node : s.gpus;
  int64_t replicas = s.kind == JobKind::kService ? std::max(s.replicas, 1) : 1;
  if (per_replica * replicas <= pool.gpus) return;
  std::string need = std::to_string(per_replica * replicas) + " GPUs" + words;
  if (replicas > 1)
    p.push_back("replicas=" + std::to_string(replicas) + ": " + std::to_string(replicas) + " x " +
                std::to_string(per_replica) + " needs " + need + "; the cluster has " +
                std::to_string(pool.gpus));
  else
    p.push_back("gpus: needs " + need + "; the cluster has " + std::to_string(pool.gpus));
}

void check_cluster_mig(const JobSpec& s, const Cluster& c, Problems& p) {
  if (s.mig.empty() || !is_known_mig_profile(s.mig)) return;
  std::set<std::string> mig_gpus;  // "A100 80 GB"
  for (const Node& n : c.nodes()) {
    const NodeProfile& prof = c.profiles()[n.profile];
    if (!eligible(s, c, n) || !prof.mig_capable) continue;
    if (find_mig_profile(s.mig, prof.gpu_memory_gb)) return;
    mig_gpus.insert(prof.gpu_type + " " + std::to_string(prof.gpu_memory_gb) + " GB");
  }
  if (mig_gpus.empty()) {
    p.push_back("mig " + in_quotes(s.mig) + ": " +
                (any_type(s) ? "no GPU in this cluster supports MIG" : s.gpu_type + " GPUs have no MIG"));
    return;
  }
  std::vector<std::string> models, have(mig_gpus.begin(), mig_gpus.end());
  for (const MigProfile& m : mig_profiles())
    if (m.name == s.mig) models.emplace_back(m.gpu_models);
  p.push_back("mig " + in_quotes(s.mig) + ": a profile of " + join(models, ", ") +
              " GPUs; the MIG GPUs here are " + join(have, ", "));
}

bool size_is_sane(const JobSpec& s) {
  if (s.gpus < 0 || s.nodes < 0 || s.gpus_per_node < 0 || s.replicas < 0) return false;
  return (int64_t{s.nodes} * s.gpus_per_node > 0 || s.gpus > 0);
}

}  // namespace

Status resolve_whole_nodes(JobSpec& spec, const topology::Cluster& cluster) {
  if (!asks_for_whole_nodes(spec)) return ok();
  std::set<int> sizes;
  for (const Node& n : cluster.nodes())
    if (n.gpus > 0 && eligible(spec, cluster, n)) sizes.insert(n.gpus);
  if (sizes.size() > 1) {
    std::vector<std::string> listed;
    for (int g : sizes) listed.push_back(std::to_string(g));
    return invalid("nodes=" + std::to_string(spec.nodes) + " (whole nodes): the nodes" + pool_words(spec) +
                   " have " + join(listed, " or ") +
                   " GPUs; set gpus_per_node (or a gpu_type or features that pick one size)");
  }
  if (!sizes.empty()) spec.gpus_per_node = *sizes.begin();
  return ok();
}

std::vector<std::string> cluster_problems(const JobSpec& spec, const topology::Cluster& cluster) {
  Problems p;
  bool type_ok = check_gpu_type(spec, cluster, p);
  bool features_ok = check_each_feature(spec, cluster, p);
  // Past here every check would only repeat "no such node".
  if (!type_ok || !features_ok || !check_feature_combination(spec, cluster, p)) return p;
  if (asks_for_whole_nodes(spec))  // resolve_whole_nodes found no size
    p.push_back("nodes=" + std::to_string(spec.nodes) + " (whole nodes): no node" + pool_words(spec) +
                " has GPUs");
  if (size_is_sane(spec)) check_capacity(spec, pool_of(spec, cluster), p);
  check_cluster_mig(spec, cluster, p);
  return p;
}

}  // namespace railyard::jobs
