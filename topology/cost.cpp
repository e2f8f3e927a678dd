#include "topology/cost.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

namespace railyard::topology {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct NodeUse {
  NodeId node;
  int count = 0;
  uint64_t mask = 0;  // local GPU indices in use
  int profile = 0;    // copied from the Node, so later passes need not touch it again
  DomainId leaf = -1;
};

// Ring bandwidth inside one node for the GPUs in `use` (GB/s); infinite when one GPU (no intra traffic).
double intra_bandwidth(const NodeProfile& p, const NodeUse& use) {
  if (use.count <= 1) return kInf;
  if (use.count == p.gpus) return p.full_node_gbytes_s;
  int first = std::countr_zero(use.mask);
  int domain = p.nvlink_domain_of(first);
  for (uint64_t m = use.mask; m; m &= m - 1)
    if (p.nvlink_domain_of(std::countr_zero(m)) != domain) return p.cross_gbytes_s;
  return p.intra_gbytes_s;
}

int rails_used(const NodeProfile& p, uint64_t mask) {
  uint64_t rails = 0;
  for (uint64_t m = mask; m; m &= m - 1) rails |= uint64_t{1} << p.rail_of(std::countr_zero(m));
  return std::popcount(rails);
}

int hops_for(Level l) {
  switch (l) {
    case Level::kBlock:
    case Level::kLeaf:
      return 1;
    case Level::kSpine:
      return 3;
    default:
      return 5;
  }
}

// True when p[0..k) are exactly first, first+1, ..., first+k-1. An OR-reduction without early exit, which
// the compiler turns into a few vector compares; the common k = 8 gets its own fixed-length copy.
template <int K>
bool equals_iota(const GpuId* p, GpuId first) {
  uint32_t diff = 0;
  for (int j = 0; j < K; ++j) diff |= static_cast<uint32_t>(p[j] ^ (first + j));
  return diff == 0;
}

bool is_whole_node(std::span<const GpuId> gpus, size_t i, GpuId first, int k) {
  if (i + k > gpus.size()) return false;
  const GpuId* p = gpus.data() + i;
  if (k == 8) return equals_iota<8>(p, first);
  uint32_t diff = 0;
  for (int j = 0; j < k; ++j) diff |= static_cast<uint32_t>(p[j] ^ (first + j));
  return diff == 0;
}

// Per-node use of a GPU set, in node order. nullopt when `gpus` is not sorted (the caller sorts a copy).
// Whole nodes, the common case, cost one vector compare; other GPUs are taken one by one.
std::optional<std::vector<NodeUse>> collect_uses(const Cluster& cluster, std::span<const GpuId> gpus) {
  std::vector<NodeUse> uses;
  uses.reserve(gpus.size() / std::max(1, cluster.max_gpus_per_node()) + 1);
  GpuId prev = -1;
  for (size_t i = 0; i < gpus.size();) {
    if (gpus[i] < prev) return std::nullopt;
    const NodeId n = cluster.node_of(gpus[i]);
    const Node& node = cluster.node(n);
    const GpuId end = node.first_gpu + node.gpus;
    NodeUse use{n, 0, 0, node.profile, node.leaf()};
    if (is_whole_node(gpus, i, node.first_gpu, node.gpus)) {
      use.count = node.gpus;
      use.mask = node.gpus == 64 ? ~uint64_t{0} : (uint64_t{1} << node.gpus) - 1;
      i += node.gpus;
      prev = end - 1;
    }
    for (; i < gpus.size() && gpus[i] < end; ++i) {
      if (gpus[i] < prev) return std::nullopt;
      prev = gpus[i];
      use.count++;
      use.mask |= uint64_t{1} << (gpus[i] - node.first_gpu);
    }
    uses.push_back(use);
  }
  return uses;
}

// The worst figures over the nodes of a set, gathered in one pass.
struct NodeFigures {
  double b_intra = kInf;  // slowest intra-node ring
  double alpha_intra = 0;
  int k_max = 1;  // most GPUs on one node
  int rails = std::numeric_limits<int>::max();
  double b_rail = kInf;  // slowest HCA, GB/s
  double leaf_oversub = 1.0, spine_oversub = 1.0;
  int leaves_spanned = 0;
  bool rail_aligned = true;
};

// Per-leaf figures: leaves cover contiguous node ranges, so in node order each leaf spanned is one run,
// and every node of a leaf shares its spine.
void add_leaf(const Cluster& cluster, DomainId leaf, NodeFigures& f) {
  ++f.leaves_spanned;
  if (leaf < 0) return;
  const Domain& d = cluster.domain(leaf);
  f.leaf_oversub = std::max(f.leaf_oversub, d.oversubscription);
  if (DomainId spine = cluster.node(d.first_node).domain_at(Level::kSpine); spine >= 0)
    f.spine_oversub = std::max(f.spine_oversub, cluster.domain(spine).oversubscription);
}

NodeFigures node_figures(const Cluster& cluster, const std::vector<NodeUse>& uses) {
  NodeFigures f;
  DomainId prev_leaf = -2;
  // Figures of the last (profile, mask) pair: a set repeats one pair on most of its nodes.
  const NodeUse* cached = nullptr;
  double bw = kInf;
  int rails = 1;
  for (const NodeUse& u : uses) {
    if (!cached || u.profile != cached->profile || u.mask != cached->mask) {
      const NodeProfile& p = cluster.profiles()[u.profile];
      bw = intra_bandwidth(p, u);
      rails = std::max(1, rails_used(p, u.mask));
      f.alpha_intra = std::max(f.alpha_intra, p.intra_latency_us * 1e-6);
      f.b_rail = std::min(f.b_rail, p.hcas > 0 ? p.hca_gbits_s / 8.0 : kInf);
      cached = &u;
    }
    f.b_intra = std::min(f.b_intra, bw);
    f.k_max = std::max(f.k_max, u.count);
    f.rails = std::min(f.rails, rails);
    f.rail_aligned = f.rail_aligned && u.mask == uses.front().mask;
    if (u.leaf != prev_leaf) add_leaf(cluster, u.leaf, f);
    prev_leaf = u.leaf;
  }
  return f;
}

// One NVLink domain (a node, or a multi-node block): a flat NVLink ring.
void estimate_nvlink_ring(AllreduceEstimate& e, double s, double b_intra, double alpha_intra) {
  const double ring_factor = 2.0 * (e.gpus - 1) / e.gpus;
  e.ring_seconds = ring_factor * s / b_intra + 2.0 * (e.gpus - 1) * alpha_intra;
  e.tree_seconds = e.ring_seconds;  // NCCL's tree inside one NVLink domain is a chain: no better
  e.seconds = e.ring_seconds;
  e.bottleneck_gbits_s = b_intra * 8.0;
  e.bus_gbytes_s = s / e.seconds * ring_factor;
}

void estimate_inter_node(AllreduceEstimate& e, const NodeFigures& f, double s, const CostParams& params,
                         bool leaf_rail_optimized) {
  const int n = e.gpus, m = e.nodes;
  const double ring_factor = 2.0 * (n - 1) / n;
  // The path between nodes: the span level, pushed up to the spine when rails are crossed under a
  // rail-optimized leaf group. Every switch level below the path's top adds its oversubscription.
  Level path = e.span;
  if (path == Level::kLeaf && !e.rail_aligned && leaf_rail_optimized) path = Level::kSpine;
  double oversub = 1.0;
  if (static_cast<int>(path) > static_cast<int>(Level::kLeaf)) oversub *= f.leaf_oversub;
  if (static_cast<int>(path) > static_cast<int>(Level::kSpine)) oversub *= f.spine_oversub;
  const double b_rail_eff = f.b_rail / oversub;
  const double alpha_inter = (params.inter_alpha_us + hops_for(path) * params.hop_latency_us) * 1e-6;
  const double k_share = f.k_max > 1 ? static_cast<double>(f.k_max - 1) / f.k_max : 0.0;
  const double nvlink_part = f.b_intra == kInf ? 0.0 : ring_factor * s * k_share / f.b_intra;
  const double ib_part = ring_factor * s / (f.rails * b_rail_eff);
  e.ring_seconds = std::max(nvlink_part, ib_part) + 2.0 * (n - 1) * alpha_inter;
  const double tree_ib = 2.0 * s / (f.rails * b_rail_eff);
  e.tree_seconds = std::max(nvlink_part, tree_ib) +
                   2.0 * (std::ceil(std::log2(m)) * alpha_inter + (f.k_max - 1) * f.alpha_intra);
  e.seconds = std::min(e.ring_seconds, e.tree_seconds);
  e.bottleneck_gbits_s = std::min(f.b_intra, b_rail_eff) * 8.0;
  e.bus_gbytes_s = s / e.seconds * ring_factor;
}

}  // namespace

std::vector<GpuId> gpus_of_nodes(const Cluster& cluster, std::span<const NodeId> nodes) {
  std::vector<GpuId> out;
  for (NodeId n : nodes)
    for (int g = 0; g < cluster.node(n).gpus; ++g) out.push_back(cluster.node(n).first_gpu + g);
  return out;
}

AllreduceEstimate estimate_allreduce(const Cluster& cluster, std::span<const GpuId> gpus_in, double bytes,
                                     const CostParams& params) {
  AllreduceEstimate e;
  e.gpus = static_cast<int>(gpus_in.size());
  if (gpus_in.empty()) return e;
  std::span<const GpuId> gpus = gpus_in;
  std::vector<GpuId> sorted;
  auto uses = collect_uses(cluster, gpus);
  if (!uses) {
    sorted.assign(gpus.begin(), gpus.end());
    std::sort(sorted.begin(), sorted.end());
    gpus = sorted;
    uses = collect_uses(cluster, gpus);
  }
  const NodeFigures f = node_figures(cluster, *uses);
  e.nodes = static_cast<int>(uses->size());
  e.leaves_spanned = f.leaves_spanned;
  e.rail_aligned = f.rail_aligned;
  // Sorted GPUs on several nodes: the smallest domain is that of the first and last node.
  const DomainRef span = e.nodes > 1 ? cluster.common_domain(uses->front().node, uses->back().node)
                                     : cluster.smallest_domain(gpus);
  e.span = span.level;
  if (e.gpus == 1) {
    e.bottleneck_gbits_s = kInf;
    return e;
  }
  const double s = bytes / 1e9;  // GB
  if (e.nodes == 1 || e.span == Level::kBlock) {
    double b = f.b_intra;
    if (e.span == Level::kBlock) b = std::min(b, cluster.domain(span.id).block_gbytes_s);
    estimate_nvlink_ring(e, s, b, f.alpha_intra);
    return e;
  }
  const bool rail_optimized = cluster.domain(cluster.node(uses->front().node).leaf()).rail_optimized;
  estimate_inter_node(e, f, s, params, rail_optimized);
  return e;
}

}  // namespace railyard::topology
