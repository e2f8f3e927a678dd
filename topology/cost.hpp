// Alpha-beta cost model for allreduce over a set of GPUs.
//
//   ring: every GPU sends 2(n-1)/n * S bytes; R parallel rings (one per rail in use) split the data, so
//         T = max(NVLink part, IB part) + 2(n-1) * alpha
//         NVLink part = 2(n-1)/n * S * (k-1)/k / B_intra      (k GPUs per node; the k-th hop leaves the node)
//         IB part     = 2(n-1)/n * S / (R * B_rail_eff)      (B_rail_eff: HCA speed over the oversubscription
//                                                             of every switch level the path crosses)
//   tree: double binary tree between nodes, chain inside:  T = max(NVLink part, 2 * S / (R * B_rail_eff))
//         + 2 * (ceil(log2 m) * alpha_inter + (k-1) * alpha_intra)
// The estimate is the faster of the two, as NCCL picks. Rail-optimized fabrics: when the nodes of a job
// use different GPU indices (so rail i of one node talks to rail j of another), traffic that could have
// stayed under one leaf switch goes through the spine; the model charges the spine path for it.
// Multi-node NVLink blocks: a set inside one block is one NVLink ring at the block's bandwidth.
#pragma once

#include <span>

#include "topology/cluster.hpp"

namespace railyard::topology {

struct CostParams {
  double inter_alpha_us = 5.0;  // per ring step between nodes, software + HCA
  double hop_latency_us = 0.5;  // per switch hop on the path
};

struct AllreduceEstimate {
  double seconds = 0;       // min(ring, tree)
  double ring_seconds = 0;
  double tree_seconds = 0;
  double bus_gbytes_s = 0;  // NCCL-style bus bandwidth: S / T * 2(n-1)/n
  double bottleneck_gbits_s = 0;  // slowest link the ring crosses, after oversubscription
  int gpus = 0;
  int nodes = 0;
  int leaves_spanned = 0;
  Level span = Level::kCluster;  // smallest domain holding the set
  bool rail_aligned = true;      // every node uses the same local GPU indices
};

// GPU ids may come in any order; duplicates are the caller's bug (counted twice).
AllreduceEstimate estimate_allreduce(const Cluster& cluster, std::span<const GpuId> gpus, double bytes,
                                     const CostParams& params = {});

// All GPUs of the given nodes.
std::vector<GpuId> gpus_of_nodes(const Cluster& cluster, std::span<const NodeId> nodes);

}  // namespace railyard::topology
