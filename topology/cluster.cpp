#include "topology/cluster.hpp"

#include <algorithm>
#include <functional>

namespace railyard::topology {

std::string_view to_string(Level l) {
  switch (l) {
    case Level::kGpu: return "gpu";
    case Level::kNvlDomain: return "nvlink";
    case Level::kNode: return "node";
    case Level::kBlock: return "block";
    case Level::kLeaf: return "leaf";
    case Level::kSpine: return "spine";
    case Level::kCore: return "core";
    case Level::kCluster: return "cluster";
  }
  return "unknown";
}

Result<Level> parse_level(std::string_view s) {
  for (Level l : kSwitchLevels)
    if (to_string(l) == s) return l;
  return invalid("unknown switch level \"" + std::string(s) + "\" (expected block, leaf, spine or core)");
}

NodeId Cluster::find_node(std::string_view name) const {
  auto it = node_index_.find(std::string(name));
  return it == node_index_.end() ? -1 : it->second;
}

DomainId Cluster::find_domain(std::string_view name) const {
  auto it = domain_index_.find(std::string(name));
  return it == domain_index_.end() ? -1 : it->second;
}

DomainRef Cluster::common_domain(NodeId a, NodeId b) const {
  if (a == b) return {Level::kNode, a};
  const Node& na = nodes_[a];
  const Node& nb = nodes_[b];
  for (size_t i = 0; i < kSwitchLevels.size(); ++i)
    if (na.up[i] != -1 && na.up[i] == nb.up[i]) return {kSwitchLevels[i], na.up[i]};
  return {Level::kCluster, -1};
}

DomainRef Cluster::smallest_domain_of_nodes(std::span<const NodeId> nodes) const {
  if (nodes.empty()) return {};
  auto [lo, hi] = std::minmax_element(nodes.begin(), nodes.end());
  return common_domain(*lo, *hi);
}

DomainRef Cluster::smallest_domain(std::span<const GpuId> gpus) const {
  if (gpus.empty()) return {};
  auto [lo, hi] = std::minmax_element(gpus.begin(), gpus.end());
  NodeId a = gpu_node_[*lo], b = gpu_node_[*hi];
  if (a != b) return common_domain(a, b);
  if (*lo == *hi) return {Level::kGpu, a};
  const NodeProfile& p = profile_of(a);
  if (p.nvlink_domain_size >= nodes_[a].gpus) return {Level::kNode, a};
  int d = p.nvlink_domain_of(local_index(*lo));
  bool same = std::all_of(gpus.begin(), gpus.end(), [&](GpuId g) { return p.nvlink_domain_of(local_index(g)) == d; });
  return {same && p.nvlink_domain_size > 1 ? Level::kNvlDomain : Level::kNode, a};
}

int Cluster::leaves_spanned(std::span<const NodeId> nodes) const {
  if (std::is_sorted(nodes.begin(), nodes.end())) {
    // Leaves cover contiguous node ranges, so in node order each leaf spanned is one run: no sort needed.
    int runs = 0;
    DomainId prev = -1;
    for (NodeId n : nodes) {
      runs += nodes_[n].leaf() != prev;
      prev = nodes_[n].leaf();
    }
    return runs;
  }
  // Unsorted: a sort is cheaper than a hash set at these sizes.
  std::vector<DomainId> leaves;
  leaves.reserve(nodes.size());
  for (NodeId n : nodes) leaves.push_back(nodes_[n].leaf());
  std::sort(leaves.begin(), leaves.end());
  return static_cast<int>(std::unique(leaves.begin(), leaves.end()) - leaves.begin());
}

int Cluster::min_leaves_for_nodes(int nodes) const {
  if (nodes <= 0) return 0;
  auto it = std::lower_bound(leaf_sizes_desc_prefix_.begin(), leaf_sizes_desc_prefix_.end(), nodes);
  if (it == leaf_sizes_desc_prefix_.end()) return static_cast<int>(leaf_sizes_desc_prefix_.size());
  return static_cast<int>(it - leaf_sizes_desc_prefix_.begin()) + 1;
}

Status ClusterBuilder::add_profile(NodeProfile profile) {
  if (profile.name.empty()) return invalid("profile without a name");
  if (profile.gpus <= 0 || profile.gpus > 64)
    return invalid("profile \"" + profile.name + "\": gpus must be 1..64, got " + std::to_string(profile.gpus));
  if (profile.nvlink_domain_size <= 0 || profile.gpus % profile.nvlink_domain_size != 0)
    return invalid("profile \"" + profile.name + "\": nvlink_domain_size must divide gpus");
  if (profile.intra_gbytes_s <= 0 || profile.cross_gbytes_s <= 0 || profile.full_node_gbytes_s <= 0)
    return invalid("profile \"" + profile.name + "\": bandwidths must be positive");
  if (profile.hcas < 0 || (profile.hcas > 0 && profile.hca_gbits_s <= 0))
    return invalid("profile \"" + profile.name + "\": hcas must be >= 0 with a positive hca_gbits_s");
  for (const auto& p : profiles_)
    if (p.name == profile.name) return invalid("profile \"" + profile.name + "\" defined twice");
  profiles_.push_back(std::move(profile));
  return ok();
}

Status ClusterBuilder::add_node(std::string name, std::string_view profile, std::vector<std::string> features) {
  if (name.empty()) return invalid("node without a name");
  if (node_pos_.count(name)) return invalid("duplicate node name \"" + name + "\"");
  if (switch_pos_.count(name)) return invalid("name \"" + name + "\" is used by both a node and a switch");
  int index = -1;
  for (size_t i = 0; i < profiles_.size(); ++i)
    if (profiles_[i].name == profile) index = static_cast<int>(i);
  if (index < 0) {
    const NodeProfile* builtin = find_builtin_profile(profile);
    if (!builtin) return invalid("node \"" + name + "\": unknown profile \"" + std::string(profile) + "\"");
    profiles_.push_back(*builtin);
    index = static_cast<int>(profiles_.size()) - 1;
  }
  node_pos_.emplace(name, nodes_.size());
  nodes_.push_back({std::move(name), index, std::move(features), {}});
  return ok();
}

Status ClusterBuilder::add_switch(SwitchSpec spec) {
  if (spec.name.empty()) return invalid("switch without a name");
  if (switch_pos_.count(spec.name)) return invalid("duplicate switch name \"" + spec.name + "\"");
  if (node_pos_.count(spec.name)) return invalid("name \"" + spec.name + "\" is used by both a node and a switch");
  if (spec.switch_count < 1) return invalid("switch \"" + spec.name + "\": switch count must be at least 1");
  if (spec.oversubscription < 1.0)
    return invalid("switch \"" + spec.name + "\": oversubscription must be >= 1 (1 means non-blocking)");
  if (spec.level == Level::kBlock && spec.block_gbytes_s <= 0)
    return invalid("block \"" + spec.name + "\": needs a positive NVLink bandwidth");
  switch_pos_.emplace(spec.name, switches_.size());
  switches_.push_back({std::move(spec), {}, {}, {}});
  return ok();
}

Status ClusterBuilder::attach_node(std::string_view switch_name, std::string_view node_name) {
  auto s = switch_pos_.find(std::string(switch_name));
  if (s == switch_pos_.end()) return invalid("unknown switch \"" + std::string(switch_name) + "\"");
  auto n = node_pos_.find(std::string(node_name));
  if (n == node_pos_.end())
    return invalid("switch \"" + std::string(switch_name) + "\" names unknown node \"" + std::string(node_name) + "\"");
  PendingNode& node = nodes_[n->second];
  if (!node.parent.empty())
    return invalid("node \"" + node.name + "\" is attached to both \"" + node.parent + "\" and \"" +
                   std::string(switch_name) + "\"");
  PendingSwitch& sw = switches_[s->second];
  if (sw.spec.level != Level::kLeaf && sw.spec.level != Level::kBlock)
    return invalid("node \"" + node.name + "\" hangs off " + std::string(to_string(sw.spec.level)) + " switch \"" +
                   sw.spec.name + "\"; nodes attach to leaf or block switches");
  node.parent = sw.spec.name;
  sw.nodes.push_back(node.name);
  return ok();
}

Status ClusterBuilder::attach_switch(std::string_view parent, std::string_view child) {
  auto p = switch_pos_.find(std::string(parent));
  if (p == switch_pos_.end()) return invalid("unknown switch \"" + std::string(parent) + "\"");
  auto c = switch_pos_.find(std::string(child));
  if (c == switch_pos_.end())
    return invalid("switch \"" + std::string(parent) + "\" names undefined switch \"" + std::string(child) + "\"");
  if (p->second == c->second) return invalid("switch \"" + std::string(parent) + "\" lists itself (a loop)");
  PendingSwitch& ps = switches_[p->second];
  PendingSwitch& cs = switches_[c->second];
  if (!cs.parent.empty())
    return invalid("switch \"" + cs.spec.name + "\" has two parents: \"" + cs.parent + "\" and \"" + ps.spec.name + "\"");
  if (static_cast<int>(cs.spec.level) >= static_cast<int>(ps.spec.level))
    return invalid("switch \"" + ps.spec.name + "\" (" + std::string(to_string(ps.spec.level)) + ") cannot sit above \"" +
                   cs.spec.name + "\" (" + std::string(to_string(cs.spec.level)) + "): levels must rise toward the core");
  cs.parent = ps.spec.name;
  ps.child_switches.push_back(cs.spec.name);
  return ok();
}

Result<Cluster> ClusterBuilder::build() && {
  if (nodes_.empty()) return invalid("cluster \"" + name_ + "\" has no nodes");
  if (switches_.empty()) {  // a flat cluster: one leaf for everyone
    if (auto s = add_switch({"leaf", Level::kLeaf}); !s) return s.error();
    for (const auto& n : std::vector<PendingNode>(nodes_))
      if (auto s = attach_node("leaf", n.name); !s) return s.error();
  }
  for (const auto& n : nodes_)
    if (n.parent.empty()) return invalid("node \"" + n.name + "\" is attached to no switch");

  Cluster c;
  c.name_ = name_;
  c.profiles_ = profiles_;
  std::vector<bool> visited(switches_.size(), false);

  // Depth-first layout: pre-order domain ids, nodes numbered as they are met.
  std::function<DomainId(size_t, DomainId)> visit = [&](size_t si, DomainId parent) -> DomainId {
    visited[si] = true;
    const PendingSwitch& ps = switches_[si];
    DomainId id = static_cast<DomainId>(c.domains_.size());
    Domain d;
    d.name = ps.spec.name;
    d.level = ps.spec.level;
    d.parent = parent;
    d.switch_count = ps.spec.switch_count;
    d.rail_optimized = ps.spec.rail_optimized;
    d.oversubscription = ps.spec.oversubscription;
    d.block_gbytes_s = ps.spec.block_gbytes_s;
    d.first_node = static_cast<NodeId>(c.nodes_.size());
    c.domains_.push_back(std::move(d));
    for (const auto& nn : ps.nodes) {
      const PendingNode& pn = nodes_[node_pos_.at(nn)];
      Node node;
      node.name = pn.name;
      node.profile = pn.profile;
      node.gpus = profiles_[pn.profile].gpus;
      node.features = pn.features;
      c.nodes_.push_back(std::move(node));
    }
    for (const auto& cn : ps.child_switches) {
      DomainId child = visit(switch_pos_.at(cn), id);
      c.domains_[id].children.push_back(child);
    }
    c.domains_[id].end_node = static_cast<NodeId>(c.nodes_.size());
    return id;
  };
  for (size_t i = 0; i < switches_.size(); ++i)
    if (switches_[i].parent.empty()) c.roots_.push_back(visit(i, -1));
  for (size_t i = 0; i < switches_.size(); ++i)
    if (!visited[i]) return invalid("switches form a loop through \"" + switches_[i].spec.name + "\"");

  // GPU numbering, the node -> domain table and per-domain GPU ranges.
  GpuId next_gpu = 0;
  for (NodeId n = 0; n < static_cast<NodeId>(c.nodes_.size()); ++n) {
    Node& node = c.nodes_[n];
    node.first_gpu = next_gpu;
    next_gpu += node.gpus;
    c.max_gpus_per_node_ = std::max(c.max_gpus_per_node_, node.gpus);
    for (int g = 0; g < node.gpus; ++g) c.gpu_node_.push_back(n);
    c.node_index_.emplace(node.name, n);
  }
  for (DomainId d = 0; d < static_cast<DomainId>(c.domains_.size()); ++d) {
    Domain& dom = c.domains_[d];
    c.domain_index_.emplace(dom.name, d);
    dom.first_gpu = dom.first_node < c.node_count() ? c.nodes_[dom.first_node].first_gpu : next_gpu;
    dom.end_gpu = dom.end_node < c.node_count() ? c.nodes_[dom.end_node].first_gpu : next_gpu;
    for (NodeId n = dom.first_node; n < dom.end_node; ++n)
      c.nodes_[n].up[switch_level_index(dom.level)] = d;
    if (dom.level == Level::kLeaf) c.leaves_.push_back(d);
    c.at_level_[static_cast<size_t>(switch_level_index(dom.level))].push_back({d, dom.first_node, dom.end_node});
  }
  for (const Node& n : c.nodes_)
    if (n.leaf() == -1) return invalid("node \"" + n.name + "\" is under no leaf switch");
  std::vector<int> sizes;
  for (DomainId l : c.leaves_) sizes.push_back(c.domains_[l].node_count());
  std::sort(sizes.rbegin(), sizes.rend());
  int sum = 0;
  for (int s : sizes) c.leaf_sizes_desc_prefix_.push_back(sum += s);
  return c;
}

}  // namespace railyard::topology
