// Mutable usage over the immutable Cluster: who holds each GPU, free counts per node, whole-free node counts
// per domain, free-count buckets per node class for O(1) best fit, MIG slot masks, and reservation windows.
// One pass builds it from a Snapshot; placements take and give GPUs as the pass goes. A fresh usage costs
// O(nodes + GPUs); reset_to() brings a used one back to empty in O(nodes + GPUs touched), so a shell that
// schedules pass after pass (sched::Scheduler) reuses one.
// Not thread-safe; copyable (reservation search works on copies).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "scheduler/core/snapshot.hpp"

namespace railyard::sched {

inline constexpr int64_t kForever = std::numeric_limits<int64_t>::max() / 4;

// Time window a placement would occupy: [start, end).
struct Window {
  int64_t start = 0;
  int64_t end = kForever;
};

// Node classes: nodes with the same profile and features are interchangeable for eligibility.
struct NodeClasses {
  explicit NodeClasses(const topology::Cluster& cluster);
  std::vector<int> class_of;              // per node
  std::vector<int> class_profile;         // per class
  std::vector<const std::vector<std::string>*> class_features;  // per class
  std::vector<int> class_nodes;           // per class: node count
  int count() const { return static_cast<int>(class_profile.size()); }
};

class ClusterUsage {
 public:
  ClusterUsage(const topology::Cluster& cluster, const NodeClasses& classes, std::span<const NodeHealth> health);

  const topology::Cluster& cluster() const { return *cluster_; }
  const NodeClasses& classes() const { return *classes_; }
  bool node_usable(NodeId n) const { return usable_[n] != 0; }
  int free_on(NodeId n) const { return node_free_[n]; }
  bool gpu_free(GpuId g) const { return owner_[g] == kFree; }
  int32_t owner(GpuId g) const { return owner_[g]; }  // running-job index, kFree or kMig
  uint8_t mig_mask(GpuId g) const { return mig_[g]; }
  int class_free(int cls) const { return class_free_[cls]; }
  int whole_free_nodes(topology::DomainId d) const { return domain_whole_[d]; }
  // Nodes of class `cls` with exactly `count` free GPUs (usable nodes only).
  const std::vector<NodeId>& bucket(int cls, int count) const { return buckets_[cls][count]; }
  const std::vector<GpuId>& split_gpus() const { return split_; }

  // take/give handle each run of consecutive GPUs on one node as one step; the result (bucket order
  // included) is the same as taking or giving them one at a time.
  void take(std::span<const GpuId> gpus, int32_t owner);
  void give(std::span<const GpuId> gpus);
  void take_slice(const MigSlice& s);
  void give_slice(const MigSlice& s);

  // Reservations: GPUs promised to a future start. A GPU is usable in a window if it is free and no
  // reservation on it overlaps the window.
  void reserve(std::span<const GpuId> gpus, Window w);
  bool gpu_usable(GpuId g, Window w) const;
  bool node_has_reservations(NodeId n) const { return node_reserved_[n] != 0; }
  // Free GPUs on node n usable in w.
  int usable_on(NodeId n, Window w) const;
  bool any_reservations() const { return !reserved_.empty(); }
  // The same usage with every reservation dropped.
  ClusterUsage without_reservations() const;
  // Makes this usage equal to `empty` (bucket order included), reusing its buffers. `empty` must be a
  // freshly constructed usage of the same cluster and classes (nothing taken, nothing reserved).
  void reset_to(const ClusterUsage& empty);
  // Drops every reservation in place (O(reserved GPUs + nodes)); takes stay as they are.
  void drop_reservations();

  static constexpr int32_t kFree = -1;
  static constexpr int32_t kMig = -2;

 private:
  void set_node_free(NodeId n, int count);
  void bucket_remove(NodeId n);
  void bucket_add(NodeId n);

  const topology::Cluster* cluster_;
  const NodeClasses* classes_;
  std::vector<uint8_t> usable_;
  std::vector<int32_t> owner_;
  std::vector<uint8_t> mig_;
  std::vector<int16_t> node_free_;
  std::vector<int32_t> domain_whole_;
  std::vector<int32_t> class_free_;
  std::vector<std::vector<std::vector<NodeId>>> buckets_;  // [class][free count] -> nodes
  std::vector<int32_t> bucket_pos_;                         // per node, index in its bucket
  std::vector<GpuId> split_;
  std::vector<int32_t> split_pos_;
  std::vector<uint8_t> node_reserved_;
  std::vector<std::vector<Window>> reserved_windows_;  // per GPU, only for reserved GPUs (sparse by index)
  std::vector<int32_t> reserved_index_;                 // per GPU: index into reserved_windows_ or -1
  std::vector<GpuId> reserved_;
};

}  // namespace railyard::sched
