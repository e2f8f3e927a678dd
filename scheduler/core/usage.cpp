#include "scheduler/core/usage.hpp"

#include <algorithm>

namespace railyard::sched {

NodeClasses::NodeClasses(const topology::Cluster& cluster) {
  // Clusters have a handful of classes: a linear search beats a map keyed by feature lists.
  std::vector<std::vector<std::string>> sorted_features;
  class_of.reserve(cluster.node_count());
  for (const auto& node : cluster.nodes()) {
    std::vector<std::string> features = node.features;
    std::sort(features.begin(), features.end());
    int found = -1;
    for (int c = 0; c < count() && found < 0; ++c)
      if (class_profile[c] == node.profile && sorted_features[c] == features) found = c;
    if (found < 0) {
      found = count();
      class_profile.push_back(node.profile);
      class_features.push_back(&node.features);
      class_nodes.push_back(0);
      sorted_features.push_back(std::move(features));
    }
    class_of.push_back(found);
    class_nodes[found]++;
  }
}

ClusterUsage::ClusterUsage(const topology::Cluster& cluster, const NodeClasses& classes,
                           std::span<const NodeHealth> health)
    : cluster_(&cluster), classes_(&classes) {
  const int nodes = cluster.node_count();
  usable_.assign(nodes, 1);
  for (size_t n = 0; n < health.size() && n < static_cast<size_t>(nodes); ++n)
    usable_[n] = health[n] == NodeHealth::kUp ? 1 : 0;
  owner_.assign(cluster.gpu_count(), kFree);
  mig_.assign(cluster.gpu_count(), 0);
  node_free_.assign(nodes, 0);
  domain_whole_.assign(cluster.domains().size(), 0);
  class_free_.assign(classes.count(), 0);
  buckets_.resize(classes.count());
  for (int c = 0; c < classes.count(); ++c)
    buckets_[c].resize(cluster.profiles()[classes.class_profile[c]].gpus + 1);
  bucket_pos_.assign(nodes, -1);
  split_pos_.assign(cluster.gpu_count(), -1);
  node_reserved_.assign(nodes, 0);
  reserved_index_.assign(cluster.gpu_count(), -1);
  for (NodeId n = 0; n < nodes; ++n) set_node_free(n, cluster.node(n).gpus);
}

void ClusterUsage::bucket_remove(NodeId n) {
  if (bucket_pos_[n] < 0) return;
  auto& b = buckets_[classes_->class_of[n]][node_free_[n]];
  NodeId last = b.back();
  b[bucket_pos_[n]] = last;
  bucket_pos_[last] = bucket_pos_[n];
  b.pop_back();
  bucket_pos_[n] = -1;
}

void ClusterUsage::bucket_add(NodeId n) {
  if (!usable_[n] || node_free_[n] == 0) return;
  auto& b = buckets_[classes_->class_of[n]][node_free_[n]];
  bucket_pos_[n] = static_cast<int32_t>(b.size());
  b.push_back(n);
}

// Moves node n to a new free count, keeping buckets, class totals and whole-free domain counters right.
void ClusterUsage::set_node_free(NodeId n, int count) {
  const auto& node = cluster_->node(n);
  const int old = node_free_[n];
  if (usable_[n]) {
    bucket_remove(n);
    class_free_[classes_->class_of[n]] += count - old;
    const bool was_whole = old == node.gpus, is_whole = count == node.gpus;
    if (was_whole != is_whole)
      for (topology::DomainId d : node.up)
        if (d >= 0) domain_whole_[d] += is_whole ? 1 : -1;
  }
  node_free_[n] = static_cast<int16_t>(count);
  bucket_add(n);
}

void ClusterUsage::take(std::span<const GpuId> gpus, int32_t owner) {
  // One set_node_free per run of GPUs on one node: moving a node f -> f-1 -> ... -> f-m one step at a time
  // leaves it at the end of each intermediate bucket, so every later step removes it without moving
  // another node; the buckets end exactly as after the single move f -> f-m.
  for (size_t i = 0; i < gpus.size();) {
    const NodeId n = cluster_->node_of(gpus[i]);
    int taken = 0;
    for (; i < gpus.size() && cluster_->node_of(gpus[i]) == n; ++i) {
      if (owner_[gpus[i]] != kFree) continue;  // already held: the caller's bug; never count twice
      owner_[gpus[i]] = owner;
      ++taken;
    }
    if (taken > 0) set_node_free(n, node_free_[n] - taken);
  }
}

void ClusterUsage::give(std::span<const GpuId> gpus) {
  for (size_t i = 0; i < gpus.size();) {  // one step per node, as in take()
    const NodeId n = cluster_->node_of(gpus[i]);
    int given = 0;
    for (; i < gpus.size() && cluster_->node_of(gpus[i]) == n; ++i) {
      if (owner_[gpus[i]] == kFree || owner_[gpus[i]] == kMig) continue;
      owner_[gpus[i]] = kFree;
      ++given;
    }
    if (given > 0) set_node_free(n, node_free_[n] + given);
  }
}

void ClusterUsage::take_slice(const MigSlice& s) {
  uint8_t bits = static_cast<uint8_t>(((1u << s.slots) - 1) << s.first_slot);
  if (mig_[s.gpu] == 0) {
    if (owner_[s.gpu] != kFree) return;
    owner_[s.gpu] = kMig;
    NodeId n = cluster_->node_of(s.gpu);
    set_node_free(n, node_free_[n] - 1);
    split_pos_[s.gpu] = static_cast<int32_t>(split_.size());
    split_.push_back(s.gpu);
  }
  mig_[s.gpu] |= bits;
}

void ClusterUsage::give_slice(const MigSlice& s) {
  uint8_t bits = static_cast<uint8_t>(((1u << s.slots) - 1) << s.first_slot);
  if (owner_[s.gpu] != kMig) return;
  mig_[s.gpu] &= static_cast<uint8_t>(~bits);
  if (mig_[s.gpu] != 0) return;
  owner_[s.gpu] = kFree;  // the last slice left: the GPU is whole again
  NodeId n = cluster_->node_of(s.gpu);
  set_node_free(n, node_free_[n] + 1);
  GpuId last = split_.back();
  split_[split_pos_[s.gpu]] = last;
  split_pos_[last] = split_pos_[s.gpu];
  split_.pop_back();
  split_pos_[s.gpu] = -1;
}

void ClusterUsage::reserve(std::span<const GpuId> gpus, Window w) {
  for (GpuId g : gpus) {
    if (reserved_index_[g] < 0) {
      reserved_index_[g] = static_cast<int32_t>(reserved_windows_.size());
      reserved_windows_.emplace_back();
      reserved_.push_back(g);
    }
    reserved_windows_[reserved_index_[g]].push_back(w);
    node_reserved_[cluster_->node_of(g)] = 1;
  }
}

bool ClusterUsage::gpu_usable(GpuId g, Window w) const {
  if (owner_[g] != kFree) return false;
  if (reserved_index_[g] < 0) return true;
  for (const Window& r : reserved_windows_[reserved_index_[g]])
    if (r.start < w.end && w.start < r.end) return false;
  return true;
}

int ClusterUsage::usable_on(NodeId n, Window w) const {
  if (!usable_[n]) return 0;
  if (!node_reserved_[n]) return node_free_[n];
  const auto& node = cluster_->node(n);
  int count = 0;
  for (int i = 0; i < node.gpus; ++i) count += gpu_usable(node.first_gpu + i, w) ? 1 : 0;
  return count;
}

ClusterUsage ClusterUsage::without_reservations() const {
  ClusterUsage copy = *this;
  copy.node_reserved_.assign(node_reserved_.size(), 0);
  copy.reserved_index_.assign(reserved_index_.size(), -1);
  copy.reserved_windows_.clear();
  copy.reserved_.clear();
  return copy;
}

void ClusterUsage::drop_reservations() {
  for (GpuId g : reserved_) reserved_index_[g] = -1;
  reserved_.clear();
  reserved_windows_.clear();
  std::fill(node_reserved_.begin(), node_reserved_.end(), uint8_t{0});
}

void ClusterUsage::reset_to(const ClusterUsage& empty) {
  for (GpuId g : reserved_) reserved_index_[g] = -1;
  reserved_.clear();
  reserved_windows_.clear();
  for (GpuId g : split_) split_pos_[g] = -1;
  split_.clear();
  // A node's free count is its GPU count minus the GPUs with an owner (job or MIG): only nodes below
  // their count hold GPUs to clear.
  for (NodeId n = 0; n < cluster_->node_count(); ++n) {
    const auto& node = cluster_->node(n);
    if (node_free_[n] == node.gpus) continue;
    std::fill_n(owner_.begin() + node.first_gpu, node.gpus, kFree);
    std::fill_n(mig_.begin() + node.first_gpu, node.gpus, uint8_t{0});
  }
  usable_ = empty.usable_;
  node_free_ = empty.node_free_;
  domain_whole_ = empty.domain_whole_;
  class_free_ = empty.class_free_;
  buckets_ = empty.buckets_;
  bucket_pos_ = empty.bucket_pos_;
  node_reserved_ = empty.node_reserved_;
}

}  // namespace railyard::sched
