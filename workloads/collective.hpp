// The two seams between the training loop and a backend:
//   Collective      - rank, size and a sum-allreduce on host buffers (MPI, or NCCL through the module);
//   GradientEngine  - one synchronous data-parallel SGD step: local gradients, allreduce, update.
// The CPU engine here works over any Collective; the GPU engine lives with the NCCL loader.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "common/result.hpp"
#include "workloads/dataset.hpp"
#include "workloads/mlp.hpp"

namespace railyard::workloads {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place; every rank ends with the same bits (both backends reduce in one order and broadcast).
  virtual Status allreduce_sum(std::span<float> data) = 0;
  virtual Status allreduce_sum(std::span<double> data) = 0;
};

// Rank root's values on every rank: the others contribute zeros to a sum (x + 0 == x exactly),
// which spares the interface a broadcast.
Status broadcast_from(Collective& collective, int root, std::span<double> data);

// A world of one, for tests and single-process runs.
class LocalCollective final : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status allreduce_sum(std::span<float>) override { return ok(); }
  Status allreduce_sum(std::span<double>) override { return ok(); }
};

class GradientEngine {
 public:
  virtual ~GradientEngine() = default;
  // rows: this rank's share of the global batch (may be empty); global_rows: the batch's size over all
  // ranks. Every rank must call step the same number of times (it holds a collective).
  virtual Status step(std::span<const int> rows, int global_rows, float learning_rate) = 0;
  // The current parameters, on the host.
  virtual Result<std::vector<float>> parameters() = 0;
};

class CpuEngine final : public GradientEngine {
 public:
  CpuEngine(const MlpShape& shape, const Dataset& train, std::vector<float> params, Collective& collective);
  Status step(std::span<const int> rows, int global_rows, float learning_rate) override;
  Result<std::vector<float>> parameters() override { return params_; }

 private:
  MlpShape shape_;
  const Dataset& train_;
  std::vector<float> params_;
  std::vector<float> grad_;
  MlpScratch scratch_;
  Collective& collective_;
};

// Contiguous share [begin, end) of `count` items for `rank` of `world` (sizes differ by at most one).
struct Range {
  int begin = 0;
  int end = 0;
};
Range shard(int count, int rank, int world);

}  // namespace railyard::workloads
