#include "scheduler/sim/comm_model.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "topology/cost.hpp"

namespace railyard::sim {

CommModel::CommModel(const topology::Cluster& cluster, CommParams params)
    : cluster_(&cluster), params_(params) {}

double CommModel::comm_share(int gpus) const {
  if (gpus <= 1) return params_.share_single;
  if (gpus <= cluster_->max_gpus_per_node()) return params_.share_in_node;
  return params_.share_multi_node;
}

double CommModel::allowance(int gpus) const {
  const double share = comm_share(gpus);
  return (1.0 - share) + share * params_.max_ratio;
}

double CommModel::ideal_seconds(int gpus) {
  if (auto it = ideal_.find(gpus); it != ideal_.end()) return it->second;
  const int n = std::clamp(gpus, 0, cluster_->gpu_count());
  std::vector<topology::GpuId> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  const double t = topology::estimate_allreduce(*cluster_, ids, params_.allreduce_bytes).seconds;
  ideal_.emplace(gpus, t);
  return t;
}

double CommModel::stretch(int gpus, double placed_seconds) {
  const double share = comm_share(gpus);
  if (share <= 0) return 1.0;
  const double ideal = ideal_seconds(gpus);
  const double ratio = ideal > 0 ? std::clamp(placed_seconds / ideal, 1.0, params_.max_ratio) : 1.0;
  return (1.0 - share) + share * ratio;
}

}  // namespace railyard::sim
