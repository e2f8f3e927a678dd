// The immutable cluster model: nodes (each of a NodeProfile) hung off a tree of switch domains
// (NVLink block -> leaf group -> spine group -> core). Built once by ClusterBuilder, then shared read-only
// by schedulers and snapshots; usage lives elsewhere (scheduler snapshots), never here.
//
// Invariant that keeps queries O(1): nodes are stored in depth-first order of the switch tree, so every
// domain covers a contiguous range of node ids and of GPU ids. The smallest domain containing a set is
// therefore the smallest domain containing its lowest and highest node.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "topology/profile.hpp"

namespace railyard::topology {

using GpuId = int32_t;     // dense, 0..gpu_count()-1, node-major
using NodeId = int32_t;    // dense, 0..node_count()-1, depth-first order of the switch tree
using DomainId = int32_t;  // index into domains(); -1 means "none"

// Levels, innermost first. kCluster stands for "crosses the top of the tree".
enum class Level : uint8_t { kGpu, kNvlDomain, kNode, kBlock, kLeaf, kSpine, kCore, kCluster };
std::string_view to_string(Level l);
Result<Level> parse_level(std::string_view s);  // "block", "leaf", "spine", "core"

// Switch levels that nodes can hang under, in the order of Node::up.
inline constexpr std::array<Level, 4> kSwitchLevels = {Level::kBlock, Level::kLeaf, Level::kSpine, Level::kCore};
constexpr int switch_level_index(Level l) { return static_cast<int>(l) - static_cast<int>(Level::kBlock); }

// A switch group: an NVLink block (multi-node NVLink domain), a leaf group (the lowest switches a node hangs
// off; in a rail-optimized scalable unit, the SU's set of rail leaves), a spine group or the core.
struct Domain {
  std::string name;
  Level level = Level::kLeaf;
  DomainId parent = -1;
  std::vector<DomainId> children;
  NodeId first_node = 0, end_node = 0;  // [first, end)
  GpuId first_gpu = 0, end_gpu = 0;
  int switch_count = 1;           // physical switches in the group (8 rail leaves in a DGX SU)
  bool rail_optimized = false;    // leaf group only: GPU i of every node goes through HCA i to switch i
  double oversubscription = 1.0;  // bandwidth to the level above divides by this (1 = non-blocking)
  double block_gbytes_s = 0;      // block only: per-GPU NVLink ring bandwidth across the block

  int node_count() const { return end_node - first_node; }
  int gpu_count() const { return end_gpu - first_gpu; }
};

struct Node {
  std::string name;
  int profile = 0;  // index into Cluster::profiles()
  GpuId first_gpu = 0;
  int gpus = 0;
  std::array<DomainId, 4> up = {-1, -1, -1, -1};  // containing domain per kSwitchLevels entry
  std::vector<std::string> features;

  DomainId leaf() const { return up[switch_level_index(Level::kLeaf)]; }
  DomainId domain_at(Level l) const { return up[switch_level_index(l)]; }
};

// Where a set of GPUs lives: its smallest enclosing domain.
struct DomainRef {
  Level level = Level::kCluster;
  int32_t id = -1;  // node id for kNode/kNvlDomain/kGpu, domain id for switch levels, -1 for kCluster
};

class Cluster {
 public:
  const std::string& name() const { return name_; }
  const std::vector<NodeProfile>& profiles() const { return profiles_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Domain>& domains() const { return domains_; }
  const std::vector<DomainId>& roots() const { return roots_; }
  const std::vector<DomainId>& leaves() const { return leaves_; }  // leaf groups in node order
  // The domains of one switch level with their node ranges, in id order (node order: domains are laid out
  // depth first); a compact copy for walks that read only the ranges.
  struct LevelDomain {
    DomainId id;
    NodeId first_node, end_node;
  };
  const std::vector<LevelDomain>& domains_at(Level l) const {
    return at_level_[static_cast<size_t>(switch_level_index(l))];
  }

  int node_count() const { return static_cast<int>(nodes_.size()); }
  int gpu_count() const { return static_cast<int>(gpu_node_.size()); }
  const Node& node(NodeId n) const { return nodes_[n]; }
  const Domain& domain(DomainId d) const { return domains_[d]; }
  const NodeProfile& profile_of(NodeId n) const { return profiles_[nodes_[n].profile]; }
  NodeId node_of(GpuId g) const { return gpu_node_[g]; }
  int local_index(GpuId g) const { return g - nodes_[gpu_node_[g]].first_gpu; }
  int max_gpus_per_node() const { return max_gpus_per_node_; }

  // Node by name; -1 when unknown.
  NodeId find_node(std::string_view name) const;
  DomainId find_domain(std::string_view name) const;

  // Smallest domain containing every GPU of the set (or every node). An empty set gives kCluster.
  DomainRef smallest_domain(std::span<const GpuId> gpus) const;
  DomainRef smallest_domain_of_nodes(std::span<const NodeId> nodes) const;
  // Smallest switch domain holding both nodes (level kNode when a == b).
  DomainRef common_domain(NodeId a, NodeId b) const;

  // Distinct leaf groups the nodes hang off (any order, duplicates allowed).
  int leaves_spanned(std::span<const NodeId> nodes) const;
  // Fewest leaf groups that could hold `nodes` whole nodes on an empty cluster.
  int min_leaves_for_nodes(int nodes) const;

 private:
  friend class ClusterBuilder;
  std::string name_;
  std::vector<NodeProfile> profiles_;
  std::vector<Node> nodes_;
  std::vector<Domain> domains_;
  std::vector<DomainId> roots_;
  std::vector<DomainId> leaves_;
  std::array<std::vector<LevelDomain>, kSwitchLevels.size()> at_level_;
  std::vector<NodeId> gpu_node_;
  std::vector<int> leaf_sizes_desc_prefix_;  // prefix sums of leaf node counts, largest first
  std::unordered_map<std::string, NodeId> node_index_;
  std::unordered_map<std::string, DomainId> domain_index_;
  int max_gpus_per_node_ = 0;
};

// Collects nodes and switches in any order, validates, and lays them out depth first.
// Errors name the offending node or switch: duplicate names, unknown profile, a switch attached twice or
// in a loop, a node under no leaf (when switches exist) or under two, levels that do not increase upward.
class ClusterBuilder {
 public:
  explicit ClusterBuilder(std::string name = "cluster") : name_(std::move(name)) {}

  // Registers a custom profile (or replaces nothing: a name already known is an error).
  Status add_profile(NodeProfile profile);
  // Adds a node of a built-in or previously added profile.
  Status add_node(std::string name, std::string_view profile, std::vector<std::string> features = {});

  struct SwitchSpec {
    std::string name;
    Level level = Level::kLeaf;
    int switch_count = 1;
    bool rail_optimized = false;
    double oversubscription = 1.0;
    double block_gbytes_s = 0;
  };
  Status add_switch(SwitchSpec spec);
  Status attach_node(std::string_view switch_name, std::string_view node_name);
  Status attach_switch(std::string_view parent, std::string_view child);

  Result<Cluster> build() &&;

 private:
  struct PendingSwitch {
    SwitchSpec spec;
    std::vector<std::string> child_switches;
    std::vector<std::string> nodes;
    std::string parent;
  };
  struct PendingNode {
    std::string name;
    int profile;
    std::vector<std::string> features;
    std::string parent;
  };
  std::string name_;
  std::vector<NodeProfile> profiles_;
  std::vector<PendingNode> nodes_;
  std::unordered_map<std::string, size_t> node_pos_;
  std::vector<PendingSwitch> switches_;
  std::unordered_map<std::string, size_t> switch_pos_;
};

}  // namespace railyard::topology
