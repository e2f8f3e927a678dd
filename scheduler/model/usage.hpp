// Mutable usage over the immutable Cluster: who holds each GPU, free counts and free-GPU masks per node,
// whole-free node counts per domain, free-count buckets per node class for best fit, MIG slot masks, and
// reservation windows. One pass builds it from a Snapshot; placements take and give GPUs as the pass goes.
// A fresh usage costs O(nodes + GPUs); reset_to() brings a used one back to empty in O(nodes + GPUs
// touched), so a shell that schedules pass after pass (sched::Scheduler) reuses one.
// Everything but the owner labels is a function of which GPUs (and MIG slots) are held, not of the order
// they were taken and given in: buckets are sets in node order. So a usage kept across passes, given the
// GPUs of jobs that ended and taken those of new ones, equals one built afresh, and a reservation search
// may give GPUs back and undo() them instead of working on a copy.
// Not thread-safe; copyable.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "scheduler/model/snapshot.hpp"

namespace railyard::sched {

inline constexpr int64_t kForever = std::numeric_limits<int64_t>::max() / 4;

// Time window a placement would occupy: [start, end).
struct Window {
  int64_t start = 0;
  int64_t end = kForever;
};

// A set of node ids in node order (a bitset): O(1) insert and erase, iteration in ascending id, and content
// that does not depend on the order of inserts and erases.
class NodeSet {
 public:
  explicit NodeSet(int nodes = 0) : words_((static_cast<size_t>(nodes) + 63) / 64, 0) {}
  void insert(NodeId n) {
    uint64_t& w = words_[static_cast<size_t>(n) / 64];
    const uint64_t bit = uint64_t{1} << (n % 64);
    size_ += (w & bit) ? 0 : 1;
    w |= bit;
  }
  void erase(NodeId n) {
    uint64_t& w = words_[static_cast<size_t>(n) / 64];
    const uint64_t bit = uint64_t{1} << (n % 64);
    size_ -= (w & bit) ? 1 : 0;
    w &= ~bit;
  }
  bool contains(NodeId n) const { return (words_[static_cast<size_t>(n) / 64] >> (n % 64)) & 1; }
  void clear() {
    std::fill(words_.begin(), words_.end(), uint64_t{0});
    size_ = 0;
  }
  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The smallest member >= from, or -1.
  NodeId next(NodeId from) const;
  // Bit n % 64 of word n / 64: whether n is a member.
  const std::vector<uint64_t>& words() const { return words_; }
  bool operator==(const NodeSet&) const = default;

 private:
  std::vector<uint64_t> words_;
  int size_ = 0;
};

// Node classes: nodes with the same profile, features and container engine (Snapshot::containers) are
// interchangeable for eligibility.
struct NodeClasses {
  explicit NodeClasses(const topology::Cluster& cluster, const std::vector<char>& containers = {});
  std::vector<int> class_of;              // per node
  std::vector<int> class_profile;         // per class
  std::vector<const std::vector<std::string>*> class_features;  // per class
  std::vector<int> class_nodes;           // per class: node count
  std::vector<char> class_containers;     // per class: its nodes run image jobs
  int count() const { return static_cast<int>(class_profile.size()); }
};

class ClusterUsage {
 public:
  ClusterUsage(const topology::Cluster& cluster, const NodeClasses& classes, std::span<const NodeHealth> health);

  const topology::Cluster& cluster() const { return *cluster_; }
  const NodeClasses& classes() const { return *classes_; }
  bool node_usable(NodeId n) const { return usable_[n] != 0; }
  int free_on(NodeId n) const { return node_free_[n]; }
  // Bit i: GPU first_gpu + i of node n is free (no job, not split for MIG); reservations aside.
  uint64_t free_mask(NodeId n) const { return free_mask_[n]; }
  bool gpu_free(GpuId g) const { return (free_mask_[cluster_->node_of(g)] >> cluster_->local_index(g)) & 1; }
  int32_t owner(GpuId g) const { return owner_[g]; }  // running-job index, kFree or kMig
  uint8_t mig_mask(GpuId g) const { return mig_[g]; }
  int class_free(int cls) const { return class_free_[cls]; }
  int whole_free_nodes(topology::DomainId d) const { return domain_whole_[d]; }
  // Whether `groups` leaf groups hold `n` whole free nodes between them (the groups with the most), in
  // O(nodes per leaf group) from a histogram of leaf groups by whole free nodes.
  bool whole_nodes_in_leaves(int n, int groups) const;
  // Nodes of class `cls` with exactly `count` free GPUs (usable nodes only).
  const NodeSet& bucket(int cls, int count) const { return buckets_[cls][count]; }
  // Usable nodes of class `cls` with at least `count` free GPUs (reservations aside).
  int nodes_with_free(int cls, int count) const {
    int n = 0;
    for (size_t f = static_cast<size_t>(std::max(count, 1)); f < buckets_[cls].size(); ++f) n += buckets_[cls][f].size();
    return n;
  }
  const std::vector<GpuId>& split_gpus() const { return split_; }

  // What release() and give_slice() changed, for undo(): a node's free mask, or a GPU's owner and MIG mask.
  struct Undo {
    NodeId node;  // -1 for a GPU entry
    GpuId gpu;
    uint64_t free_mask;
    int32_t owner;
    uint8_t mig;
  };
  using UndoLog = std::vector<Undo>;

  // take/give handle each run of consecutive GPUs on one node as one step.
  void take(std::span<const GpuId> gpus, int32_t owner);
  void give(std::span<const GpuId> gpus);
  void take_slice(const MigSlice& s);
  // With `log`, appends what it changes for undo().
  void give_slice(const MigSlice& s, UndoLog* log = nullptr);
  // For a reservation search's replay: frees the GPUs of `mask` (local indices) on node n that a job holds,
  // leaving their owner labels as they are (stale until undo(): only owner() reads them, and nothing asks
  // during a search), and logs the change. undo(log) restores everything in O(entries).
  void release(NodeId n, uint64_t mask, UndoLog& log);
  void undo(const UndoLog& log);
  // Moves GPUs held by one job to another owner label (a running job's new index); counts do not change.
  void relabel(std::span<const GpuId> gpus, int32_t owner);

  // Reservations: GPUs promised to a future start. A GPU is usable in a window if it is free and no
  // reservation on it overlaps the window.
  void reserve(std::span<const GpuId> gpus, Window w);
  bool gpu_usable(GpuId g, Window w) const;
  bool node_has_reservations(NodeId n) const { return reserved_nodes_.contains(n); }
  // The nodes with a reserved GPU (whatever the windows).
  const NodeSet& reserved_nodes() const { return reserved_nodes_; }
  // Free GPUs on node n usable in w.
  int usable_on(NodeId n, Window w) const;
  bool any_reservations() const { return !reserved_.empty(); }
  // Nodes the health this usage was built for marks removed, and per class the nodes that are not (empty
  // when none is removed): what a pass tells a job that only removed nodes could hold.
  int removed_nodes() const { return removed_; }
  const std::vector<int>& present_nodes() const { return present_; }
  // The same usage with every reservation dropped.
  ClusterUsage without_reservations() const;
  // Makes this usage equal to `empty`, reusing its buffers. `empty` must be a
  // freshly constructed usage of the same cluster and classes (nothing taken, nothing reserved).
  void reset_to(const ClusterUsage& empty);
  // Drops every reservation in place (O(reserved GPUs + nodes)); takes stay as they are.
  void drop_reservations();

  static constexpr int32_t kFree = -1;
  static constexpr int32_t kMig = -2;

 private:
  void set_node_free(NodeId n, int count);
  void set_owner(GpuId g, int32_t owner);
  void split_add(GpuId g);
  void split_remove(GpuId g);

  const topology::Cluster* cluster_;
  const NodeClasses* classes_;
  std::vector<uint8_t> usable_;
  int removed_ = 0;
  std::vector<int> present_;
  std::vector<int32_t> owner_;
  std::vector<uint8_t> mig_;
  std::vector<int16_t> node_free_;
  std::vector<uint64_t> free_mask_;  // per node
  std::vector<int32_t> domain_whole_;
  std::vector<int32_t> leaves_by_whole_;  // [w]: leaf groups with exactly w whole free nodes
  std::vector<int32_t> class_free_;
  std::vector<std::vector<NodeSet>> buckets_;  // [class][free count] -> usable nodes
  std::vector<GpuId> split_;  // GPUs split for MIG, in no particular order (readers must not depend on it)
  std::vector<int32_t> split_pos_;
  NodeSet reserved_nodes_;
  // The windows of reserved_[i] are reserved_windows_[i]; entries past reserved_.size() are spare buffers.
  std::vector<std::vector<Window>> reserved_windows_;
  std::vector<int32_t> reserved_index_;  // per GPU: index into reserved_ and reserved_windows_, or -1
  std::vector<GpuId> reserved_;
};

}  // namespace railyard::sched
