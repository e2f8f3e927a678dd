#include "workloads/collective.hpp"

#include <algorithm>

namespace railyard::workloads {

Status broadcast_from(Collective& collective, int root, std::span<double> data) {
  if (collective.rank() != root) std::fill(data.begin(), data.end(), 0.0);
  return collective.allreduce_sum(data);
}

Range shard(int count, int rank, int world) {
  const auto at = [&](int r) { return static_cast<int>(static_cast<long long>(count) * r / world); };
  return Range{at(rank), at(rank + 1)};
}

CpuEngine::CpuEngine(const MlpShape& shape, const Dataset& train, std::vector<float> params,
                     Collective& collective)
    : shape_(shape), train_(train), params_(std::move(params)), collective_(collective) {
  grad_.assign(params_.size(), 0.0f);
}

Status CpuEngine::step(std::span<const int> rows, int global_rows, float learning_rate) {
  if (global_rows <= 0) return ok();
  const float scale = 1.0f / static_cast<float>(global_rows);
  compute_gradients(shape_, params_, train_, rows, scale, grad_, scratch_);
  if (auto reduced = collective_.allreduce_sum(std::span<float>(grad_)); !reduced) return reduced;
  for (size_t i = 0; i < params_.size(); ++i) params_[i] -= learning_rate * grad_[i];
  return ok();
}

}  // namespace railyard::workloads
