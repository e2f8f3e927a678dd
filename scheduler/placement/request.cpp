#include "scheduler/placement/request.hpp"

#include <algorithm>
#include <cctype>

namespace railyard::sched {
namespace {

bool same_type(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool has_features(const std::vector<std::string>& have, const std::vector<std::string>& want) {
  return std::all_of(want.begin(), want.end(),
                     [&](const std::string& f) { return std::find(have.begin(), have.end(), f) != have.end(); });
}

// Spreads `total` GPUs over `nodes` nodes as evenly as possible, largest first.
std::vector<int> even_split(int total, int nodes) {
  std::vector<int> out(nodes, total / nodes);
  for (int i = 0; i < total % nodes; ++i) out[i]++;
  return out;
}

Result<Shape> make_shape(const jobs::JobSpec& spec, int max_per_node) {
  Shape s;
  const int per_node_req = spec.gpus_per_node;
  int total = spec.total_gpus();
  if (spec.nodes > 0 && per_node_req > 0) {
    s.nodes = spec.nodes;
    s.per_node.assign(spec.nodes, per_node_req);
  } else if (spec.nodes > 0) {
    s.nodes = spec.nodes;
    if (total < spec.nodes) return invalid("gpus=" + std::to_string(total) + " is fewer than nodes=" + std::to_string(spec.nodes));
    s.per_node = even_split(total, spec.nodes);
  } else if (per_node_req > 0) {
    s.nodes = (total + per_node_req - 1) / per_node_req;
    s.per_node = even_split(total, s.nodes);
  } else if (spec.exclusive) {
    s.nodes = (total + max_per_node - 1) / max_per_node;
    s.per_node.assign(s.nodes, max_per_node);
  } else {
    s.nodes = (total + max_per_node - 1) / max_per_node;
    s.per_node = even_split(total, s.nodes);
  }
  if (s.k_max() > max_per_node)
    return invalid("gpus_per_node=" + std::to_string(s.k_max()) + ": no eligible node has " + std::to_string(s.k_max()) +
                   " GPUs (largest: " + std::to_string(max_per_node) + ")");
  s.total = 0;
  for (int k : s.per_node) s.total += k;
  s.whole_nodes = std::all_of(s.per_node.begin(), s.per_node.end(), [&](int k) { return k == max_per_node; });
  return s;
}

}  // namespace

Result<Request> make_request(const jobs::JobSpec& spec, const topology::Cluster& cluster, const NodeClasses& classes) {
  Request r;
  r.spec = &spec;
  r.layout = spec.layout;
  r.replicas = spec.kind == jobs::JobKind::kService ? std::max(1, spec.replicas) : 1;
  if (spec.total_gpus() <= 0) return invalid("gpus: a job needs at least one GPU");
  r.eligible.assign(classes.count(), 0);
  r.mig.assign(classes.count(), nullptr);
  int max_per_node = 0;
  const bool any_type = spec.gpu_type.empty() || same_type(spec.gpu_type, "any");
  for (int c = 0; c < classes.count(); ++c) {
    const auto& p = cluster.profiles()[classes.class_profile[c]];
    if (!any_type && !same_type(p.gpu_type, spec.gpu_type)) continue;
    if (!has_features(*classes.class_features[c], spec.features)) continue;
    if (!spec.mig.empty()) {
      r.mig[c] = mig_profile_on(p, spec.mig);
      if (!r.mig[c]) continue;
    }
    r.eligible[c] = 1;
    max_per_node = std::max(max_per_node, p.gpus);
    if (c < 64) r.class_mask |= uint64_t{1} << c;
  }
  if (classes.count() > 64) r.class_mask = 0;
  if (max_per_node == 0) {
    std::string what = any_type ? "" : "gpu_type " + spec.gpu_type + " ";
    if (!spec.features.empty()) what += "with the requested features ";
    if (!spec.mig.empty()) what += "supporting MIG profile " + spec.mig + " ";
    return invalid("no node " + (what.empty() ? std::string("fits") : "has " + what.substr(0, what.size() - 1)));
  }
  if (!spec.mig.empty()) {
    if (spec.total_gpus() != 1) return invalid("mig: a MIG job takes exactly one slice (gpus=1)");
    r.shape.per_node = {1};
    r.shape.total = 1;
    return r;
  }
  auto shape = make_shape(spec, max_per_node);
  if (!shape) return shape.error();
  r.shape = std::move(shape).value();
  // Capacity of the eligible part of the cluster, whatever its health: beyond it the job can never run.
  int capable_nodes = 0, gpus = 0;
  for (int c = 0; c < classes.count(); ++c) {
    if (!r.eligible[c]) continue;
    const int per_node = cluster.profiles()[classes.class_profile[c]].gpus;
    gpus += per_node * classes.class_nodes[c];
    capable_nodes += per_node >= r.shape.k_max() ? classes.class_nodes[c] : 0;
  }
  if (r.shape.total * r.replicas > gpus)
    return invalid("needs " + std::to_string(r.shape.total * r.replicas) + " GPUs; the cluster has " + std::to_string(gpus) +
                   (any_type ? "" : " of type " + spec.gpu_type));
  if (r.shape.nodes > capable_nodes)
    return invalid("needs " + std::to_string(r.shape.nodes) + " nodes with " + std::to_string(r.shape.k_max()) +
                   " GPUs each; the cluster has " + std::to_string(capable_nodes));
  // Which nodes run containers changes with their agents: an image job is never refused for it, it waits
  // (Request::needs_containers says why).
  if (spec.container)
    for (int c = 0; c < classes.count(); ++c)
      if (r.eligible[c] && !classes.class_containers[c]) {
        r.eligible[c] = 0;
        r.needs_containers = true;
        if (c < 64) r.class_mask &= ~(uint64_t{1} << c);
      }
  return r;
}

}  // namespace railyard::sched
