#include "scheduler/model/usage.hpp"

#include <algorithm>
#include <bit>

namespace railyard::sched {

NodeClasses::NodeClasses(const topology::Cluster& cluster, const std::vector<char>& containers) {
  // Clusters have a handful of classes: a linear search beats a map keyed by feature lists.
  std::vector<std::vector<std::string>> sorted_features;
  class_of.reserve(cluster.node_count());
  for (const auto& node : cluster.nodes()) {
    std::vector<std::string> features = node.features;
    std::sort(features.begin(), features.end());
    const size_t id = class_of.size();
    const char runs_images = containers.empty() || (id < containers.size() && containers[id]);
    int found = -1;
    for (int c = 0; c < count() && found < 0; ++c)
      if (class_profile[c] == node.profile && sorted_features[c] == features && class_containers[c] == runs_images)
        found = c;
    if (found < 0) {
      found = count();
      class_profile.push_back(node.profile);
      class_containers.push_back(runs_images);
      class_features.push_back(&node.features);
      class_nodes.push_back(0);
      sorted_features.push_back(std::move(features));
    }
    class_of.push_back(found);
    class_nodes[found]++;
  }
}

NodeId NodeSet::next(NodeId from) const {
  if (from < 0) from = 0;
  size_t w = static_cast<size_t>(from) / 64;
  if (w >= words_.size()) return -1;
  uint64_t bits = words_[w] & (~uint64_t{0} << (from % 64));
  while (bits == 0) {
    if (++w >= words_.size()) return -1;
    bits = words_[w];
  }
  return static_cast<NodeId>(w * 64 + static_cast<size_t>(std::countr_zero(bits)));
}

ClusterUsage::ClusterUsage(const topology::Cluster& cluster, const NodeClasses& classes,
                           std::span<const NodeHealth> health)
    : cluster_(&cluster), classes_(&classes) {
  const int nodes = cluster.node_count();
  usable_.assign(nodes, 1);
  for (size_t n = 0; n < health.size() && n < static_cast<size_t>(nodes); ++n) {
    usable_[n] = health[n] == NodeHealth::kUp ? 1 : 0;
    if (health[n] != NodeHealth::kRemoved) continue;
    if (present_.empty()) present_ = classes.class_nodes;
    --present_[classes.class_of[n]];
    ++removed_;
  }
  owner_.assign(cluster.gpu_count(), kFree);
  mig_.assign(cluster.gpu_count(), 0);
  node_free_.assign(nodes, 0);
  free_mask_.assign(nodes, 0);
  domain_whole_.assign(cluster.domains().size(), 0);
  int widest = 0;
  for (topology::DomainId l : cluster.leaves())
    widest = std::max(widest, cluster.domain(l).end_node - cluster.domain(l).first_node);
  leaves_by_whole_.assign(static_cast<size_t>(widest) + 1, 0);
  leaves_by_whole_[0] = static_cast<int32_t>(cluster.leaves().size());
  class_free_.assign(classes.count(), 0);
  buckets_.resize(classes.count());
  for (int c = 0; c < classes.count(); ++c)
    buckets_[c].assign(cluster.profiles()[classes.class_profile[c]].gpus + 1, NodeSet(nodes));
  split_pos_.assign(cluster.gpu_count(), -1);
  reserved_nodes_ = NodeSet(nodes);
  reserved_index_.assign(cluster.gpu_count(), -1);
  for (NodeId n = 0; n < nodes; ++n) {
    const int gpus = cluster.node(n).gpus;  // at most 64 (topology::Cluster checks profiles)
    free_mask_[n] = gpus == 64 ? ~uint64_t{0} : (uint64_t{1} << gpus) - 1;
    set_node_free(n, gpus);
  }
}

// Moves node n to a new free count, keeping buckets, class totals and whole-free domain counters right.
void ClusterUsage::set_node_free(NodeId n, int count) {
  const auto& node = cluster_->node(n);
  const int old = node_free_[n];
  if (usable_[n]) {
    auto& buckets = buckets_[classes_->class_of[n]];
    if (old > 0) buckets[old].erase(n);
    if (count > 0) buckets[count].insert(n);
    class_free_[classes_->class_of[n]] += count - old;
    const bool was_whole = old == node.gpus, is_whole = count == node.gpus;
    if (was_whole != is_whole) {
      for (topology::DomainId d : node.up)
        if (d >= 0) domain_whole_[d] += is_whole ? 1 : -1;
      if (const topology::DomainId leaf = node.leaf(); leaf >= 0) {
        --leaves_by_whole_[domain_whole_[leaf] - (is_whole ? 1 : -1)];
        ++leaves_by_whole_[domain_whole_[leaf]];
      }
    }
  }
  node_free_[n] = static_cast<int16_t>(count);
}

bool ClusterUsage::whole_nodes_in_leaves(int n, int groups) const {
  int sum = 0;
  for (size_t w = leaves_by_whole_.size(); w-- > 1 && groups > 0 && sum < n;) {
    const int take = std::min(groups, leaves_by_whole_[w]);
    sum += take * static_cast<int>(w);
    groups -= take;
  }
  return sum >= n;
}

// Sets one GPU's owner and its node's free mask; the caller moves the node's free count.
void ClusterUsage::set_owner(GpuId g, int32_t owner) {
  owner_[g] = owner;
  const NodeId n = cluster_->node_of(g);
  const uint64_t bit = uint64_t{1} << (g - cluster_->node(n).first_gpu);
  if (owner == kFree)
    free_mask_[n] |= bit;
  else
    free_mask_[n] &= ~bit;
}

void ClusterUsage::split_add(GpuId g) {
  split_pos_[g] = static_cast<int32_t>(split_.size());
  split_.push_back(g);
}

void ClusterUsage::split_remove(GpuId g) {
  const GpuId last = split_.back();
  split_[split_pos_[g]] = last;
  split_pos_[last] = split_pos_[g];
  split_.pop_back();
  split_pos_[g] = -1;
}

void ClusterUsage::take(std::span<const GpuId> gpus, int32_t owner) {
  for (size_t i = 0; i < gpus.size();) {
    const NodeId n = cluster_->node_of(gpus[i]);
    int taken = 0;
    for (; i < gpus.size() && cluster_->node_of(gpus[i]) == n; ++i) {
      if (!gpu_free(gpus[i])) continue;  // already held: the caller's bug; never count twice
      set_owner(gpus[i], owner);
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
      const GpuId g = gpus[i];
      if (gpu_free(g) || owner_[g] == kMig) continue;
      set_owner(g, kFree);
      ++given;
    }
    if (given > 0) set_node_free(n, node_free_[n] + given);
  }
}

void ClusterUsage::release(NodeId n, uint64_t mask, UndoLog& log) {
  uint64_t freed = mask & ~free_mask_[n];
  if (!split_.empty()) {  // a GPU split for MIG is not free either, and comes back only with its slices
    const GpuId first = cluster_->node(n).first_gpu;
    for (uint64_t m = freed; m; m &= m - 1)
      if (const int i = std::countr_zero(m); owner_[first + i] == kMig) freed &= ~(uint64_t{1} << i);
  }
  if (freed == 0) return;
  log.push_back({n, -1, free_mask_[n], 0, 0});
  free_mask_[n] |= freed;
  set_node_free(n, std::popcount(free_mask_[n]));
}

void ClusterUsage::relabel(std::span<const GpuId> gpus, int32_t owner) {
  for (GpuId g : gpus)
    if (owner_[g] >= 0) owner_[g] = owner;
}

void ClusterUsage::take_slice(const MigSlice& s) {
  uint8_t bits = static_cast<uint8_t>(((1u << s.slots) - 1) << s.first_slot);
  if (mig_[s.gpu] == 0) {
    if (owner_[s.gpu] != kFree) return;
    set_owner(s.gpu, kMig);
    NodeId n = cluster_->node_of(s.gpu);
    set_node_free(n, node_free_[n] - 1);
    split_add(s.gpu);
  }
  mig_[s.gpu] |= bits;
}

void ClusterUsage::give_slice(const MigSlice& s, UndoLog* log) {
  uint8_t bits = static_cast<uint8_t>(((1u << s.slots) - 1) << s.first_slot);
  if (owner_[s.gpu] != kMig) return;
  if (log) log->push_back({-1, s.gpu, 0, kMig, mig_[s.gpu]});
  mig_[s.gpu] &= static_cast<uint8_t>(~bits);
  if (mig_[s.gpu] != 0) return;
  set_owner(s.gpu, kFree);  // the last slice left: the GPU is whole again
  NodeId n = cluster_->node_of(s.gpu);
  set_node_free(n, node_free_[n] + 1);
  split_remove(s.gpu);
}

void ClusterUsage::undo(const UndoLog& log) {
  for (auto it = log.rbegin(); it != log.rend(); ++it) {  // newest first
    if (it->node >= 0) {
      free_mask_[it->node] = it->free_mask;
      set_node_free(it->node, std::popcount(it->free_mask));
      continue;
    }
    const GpuId g = it->gpu;
    if (owner_[g] == kFree) {  // a slice's GPU given back whole: split again
      set_owner(g, it->owner);
      const NodeId n = cluster_->node_of(g);
      set_node_free(n, node_free_[n] - 1);
      split_add(g);
    }
    mig_[g] = it->mig;
  }
}

void ClusterUsage::reserve(std::span<const GpuId> gpus, Window w) {
  for (GpuId g : gpus) {
    if (reserved_index_[g] < 0) {
      // Entries past reserved_.size() are buffers of dropped reservations, reused.
      const size_t i = reserved_.size();
      if (i == reserved_windows_.size()) reserved_windows_.emplace_back();
      reserved_windows_[i].clear();
      reserved_index_[g] = static_cast<int32_t>(i);
      reserved_.push_back(g);
    }
    reserved_windows_[reserved_index_[g]].push_back(w);
    reserved_nodes_.insert(cluster_->node_of(g));
  }
}

bool ClusterUsage::gpu_usable(GpuId g, Window w) const {
  if (!gpu_free(g)) return false;
  if (reserved_index_[g] < 0) return true;
  for (const Window& r : reserved_windows_[reserved_index_[g]])
    if (r.start < w.end && w.start < r.end) return false;
  return true;
}

int ClusterUsage::usable_on(NodeId n, Window w) const {
  if (!usable_[n]) return 0;
  if (!reserved_nodes_.contains(n)) return node_free_[n];
  const auto& node = cluster_->node(n);
  int count = 0;
  for (int i = 0; i < node.gpus; ++i) count += gpu_usable(node.first_gpu + i, w) ? 1 : 0;
  return count;
}

ClusterUsage ClusterUsage::without_reservations() const {
  ClusterUsage copy = *this;
  copy.reserved_nodes_.clear();
  copy.reserved_index_.assign(reserved_index_.size(), -1);
  copy.reserved_windows_.clear();
  copy.reserved_.clear();
  return copy;
}

void ClusterUsage::drop_reservations() {
  for (GpuId g : reserved_) reserved_index_[g] = -1;
  reserved_.clear();  // reserved_windows_ keeps its buffers for the next reservations
  reserved_nodes_.clear();
}

void ClusterUsage::reset_to(const ClusterUsage& empty) {
  for (GpuId g : reserved_) reserved_index_[g] = -1;
  reserved_.clear();  // reserved_windows_ keeps its buffers for the next reservations
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
  removed_ = empty.removed_;
  present_ = empty.present_;
  node_free_ = empty.node_free_;
  free_mask_ = empty.free_mask_;
  domain_whole_ = empty.domain_whole_;
  leaves_by_whole_ = empty.leaves_by_whole_;
  class_free_ = empty.class_free_;
  buckets_ = empty.buckets_;
  reserved_nodes_ = empty.reserved_nodes_;
}

}  // namespace railyard::sched
