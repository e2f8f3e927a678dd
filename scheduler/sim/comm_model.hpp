// Communication slowdown: how much longer a data-parallel job runs on the GPUs it got than on the most
// compact set of the same size. Model and the reasons for its numbers: scheduler/sim/README.md.
//
//   stretch = compute_share + comm_share * clamp(T_placed / T_ideal, 1, max_ratio)
//   T_placed = allreduce estimate of the placement; T_ideal = the same on the first `gpus` GPU ids of the
//   cluster (consecutive whole nodes from node 0, or consecutive GPUs of node 0 for a sub-node job).
// The time limit a simulated job asks for is its duration times the largest stretch it could get
// (`allowance`), so no placement pushes a job past its own limit.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "topology/cluster.hpp"

namespace railyard::sim {

struct CommParams {
  double share_single = 0.0;       // 1 GPU: no collective at all
  double share_in_node = 0.10;     // 2..gpus-per-node GPUs: NVLink allreduce, mostly overlapped with backward
  double share_multi_node = 0.30;  // more than one node's worth: InfiniBand allreduce
  double max_ratio = 4.0;          // T_placed / T_ideal is clamped to this (and the time limit covers it)
  double allreduce_bytes = 1e9;    // must equal PolicyConfig::allreduce_bytes (Placement::allreduce_s)
};

class CommModel {
 public:
  CommModel(const topology::Cluster& cluster, CommParams params);

  double comm_share(int gpus) const;
  // Largest stretch a job of this size can get: compute_share + comm_share * max_ratio.
  double allowance(int gpus) const;
  // Allreduce time on the most compact set of `gpus` GPUs of an empty cluster (cached per size).
  double ideal_seconds(int gpus);
  // Stretch factor (>= 1) for a placement whose allreduce estimate is `placed_seconds`.
  double stretch(int gpus, double placed_seconds);
  const CommParams& params() const { return params_; }

 private:
  const topology::Cluster* cluster_;
  CommParams params_;
  std::unordered_map<int, double> ideal_;
};

}  // namespace railyard::sim
