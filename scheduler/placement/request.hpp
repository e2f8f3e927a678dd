// What a job asks of the placer, worked out once per job from its spec and the cluster: which node classes
// are eligible (filter stage) and the shape (how many nodes, GPUs on each).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "jobs/spec.hpp"
#include "scheduler/model/usage.hpp"
#include "scheduler/placement/mig.hpp"

namespace railyard::sched {

struct Shape {
  int nodes = 1;
  std::vector<int> per_node;  // GPUs on each node, largest first, as even as can be: a function of total and nodes
  int total = 0;
  bool whole_nodes = false;   // every node's GPUs all taken
  int k_max() const { return per_node.empty() ? 0 : per_node.front(); }
};

struct Request {
  const jobs::JobSpec* spec = nullptr;
  std::vector<char> eligible;                 // per node class
  std::vector<const jobs::MigProfile*> mig;         // per node class, MIG jobs only
  Shape shape;                                // one replica for services
  int replicas = 1;
  jobs::Layout layout = jobs::Layout::kAuto;
  Window window;                              // set per attempt: [start, start + time limit)
  uint64_t class_mask = 0;                    // eligible classes as bits (0 when more than 64 classes)
  bool needs_containers = false;              // an image job that some nodes were left out for (no engine)
  bool is_mig() const { return !spec->mig.empty(); }
};

// What the placer's answer for a request depends on besides the usage and the window: requests with equal
// keys are placed alike. nullopt for requests no key describes (MIG, more than 64 classes).
struct ShapeKey {
  uint64_t classes = 0;
  int nodes = 0, k = 0, total = 0, replicas = 0;
  bool whole = false;
  int layout = 0;
  bool operator==(const ShapeKey&) const = default;
};
struct ShapeKeyHash {
  size_t operator()(const ShapeKey& k) const {
    return std::hash<uint64_t>()(k.classes) ^ (static_cast<size_t>(k.nodes) * 1000003u) ^
           (static_cast<size_t>(k.total) * 7919u) ^ (static_cast<size_t>(k.k) << 20) ^
           (static_cast<size_t>(k.replicas) << 40) ^ (static_cast<size_t>(k.layout) << 50) ^ k.whole;
  }
};
inline std::optional<ShapeKey> shape_key(const Request& r) {
  if (r.class_mask == 0 || r.is_mig()) return std::nullopt;
  return ShapeKey{r.class_mask, r.shape.nodes, r.shape.k_max(), r.shape.total, r.replicas, r.shape.whole_nodes,
                  static_cast<int>(r.layout)};
}

// Filter + shape. Fails (as a value) when the job can never fit this cluster: no eligible node, more GPUs
// per node than any eligible node has, more GPUs or nodes than the cluster has of that kind.
Result<Request> make_request(const jobs::JobSpec& spec, const topology::Cluster& cluster, const NodeClasses& classes);

}  // namespace railyard::sched
