#include "topology/cost.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace railyard::topology {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct NodeUse {
  NodeId node;
  int count = 0;
  uint64_t mask = 0;  // local GPU indices in use
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
    case Level::kLeaf: return 1;
    case Level::kSpine: return 3;
    default: return 5;
  }
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
  std::vector<GpuId> sorted;
  std::span<const GpuId> gpus = gpus_in;
  if (!std::is_sorted(gpus.begin(), gpus.end())) {
    sorted.assign(gpus.begin(), gpus.end());
    std::sort(sorted.begin(), sorted.end());
    gpus = sorted;
  }
  std::vector<NodeUse> uses;
  for (GpuId g : gpus) {
    NodeId n = cluster.node_of(g);
    if (uses.empty() || uses.back().node != n) uses.push_back({n});
    uses.back().count++;
    uses.back().mask |= uint64_t{1} << cluster.local_index(g);
  }
  const int n = e.gpus;
  const int m = static_cast<int>(uses.size());
  e.nodes = m;
  std::vector<NodeId> node_ids;
  node_ids.reserve(uses.size());
  for (const auto& u : uses) node_ids.push_back(u.node);
  e.leaves_spanned = cluster.leaves_spanned(node_ids);
  e.span = cluster.smallest_domain(gpus).level;
  for (const auto& u : uses) e.rail_aligned = e.rail_aligned && u.mask == uses.front().mask;
  if (n == 1) {
    e.bottleneck_gbits_s = kInf;
    return e;
  }

  const double s = bytes / 1e9;  // GB
  const double ring_factor = 2.0 * (n - 1) / n;
  double b_intra = kInf, alpha_intra = 0;
  int k_max = 1, rails = std::numeric_limits<int>::max();
  double b_rail = kInf;
  for (const auto& u : uses) {
    const NodeProfile& p = cluster.profile_of(u.node);
    b_intra = std::min(b_intra, intra_bandwidth(p, u));
    alpha_intra = std::max(alpha_intra, p.intra_latency_us * 1e-6);
    k_max = std::max(k_max, u.count);
    rails = std::min(rails, std::max(1, rails_used(p, u.mask)));
    b_rail = std::min(b_rail, p.hcas > 0 ? p.hca_gbits_s / 8.0 : kInf);
  }

  if (m == 1 || e.span == Level::kBlock) {
    // One NVLink domain (a node, or a multi-node block): a flat NVLink ring.
    if (e.span == Level::kBlock) b_intra = std::min(b_intra, cluster.domain(cluster.smallest_domain(gpus).id).block_gbytes_s);
    e.ring_seconds = ring_factor * s / b_intra + 2.0 * (n - 1) * alpha_intra;
    e.tree_seconds = e.ring_seconds;  // NCCL's tree inside one NVLink domain is a chain: no better
    e.seconds = e.ring_seconds;
    e.bottleneck_gbits_s = b_intra * 8.0;
    e.bus_gbytes_s = s / e.seconds * ring_factor;
    return e;
  }

  // The path between nodes: the span level, pushed up to the spine when rails are crossed under a
  // rail-optimized leaf group.
  Level path = e.span;
  if (path == Level::kLeaf && !e.rail_aligned && cluster.domain(cluster.node(uses.front().node).leaf()).rail_optimized)
    path = Level::kSpine;
  double oversub = 1.0;
  for (Level l : {Level::kLeaf, Level::kSpine}) {
    if (static_cast<int>(path) <= static_cast<int>(l)) break;
    double worst = 1.0;
    for (const auto& u : uses) {
      DomainId d = cluster.node(u.node).domain_at(l);
      if (d >= 0) worst = std::max(worst, cluster.domain(d).oversubscription);
    }
    oversub *= worst;
  }
  const double b_rail_eff = b_rail / oversub;
  const double alpha_inter = (params.inter_alpha_us + hops_for(path) * params.hop_latency_us) * 1e-6;
  const double k_share = k_max > 1 ? static_cast<double>(k_max - 1) / k_max : 0.0;
  const double nvlink_part = b_intra == kInf ? 0.0 : ring_factor * s * k_share / b_intra;
  const double ib_part = ring_factor * s / (rails * b_rail_eff);
  e.ring_seconds = std::max(nvlink_part, ib_part) + 2.0 * (n - 1) * alpha_inter;
  const double tree_ib = 2.0 * s / (rails * b_rail_eff);
  e.tree_seconds = std::max(nvlink_part, tree_ib) +
                   2.0 * (std::ceil(std::log2(m)) * alpha_inter + (k_max - 1) * alpha_intra);
  e.seconds = std::min(e.ring_seconds, e.tree_seconds);
  e.bottleneck_gbits_s = std::min(b_intra, b_rail_eff) * 8.0;
  e.bus_gbytes_s = s / e.seconds * ring_factor;
  return e;
}

}  // namespace railyard::topology
