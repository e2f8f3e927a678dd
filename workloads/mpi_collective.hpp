// Open MPI as a Collective (MPI_COMM_WORLD, CPU buffers), plus the pieces railyard-allreduce and the
// NCCL bootstrap need. Constructing it calls MPI_Init (a singleton world of one without mpirun);
// destroying it calls MPI_Finalize. One per process.
#pragma once

#include <memory>
#include <span>

#include "common/result.hpp"
#include "workloads/collective.hpp"

namespace railyard::workloads {

struct AllreduceTiming {
  double seconds = 0;   // per allreduce, averaged over ranks
  long long wrong = 0;  // result elements that differ from the expected sum, over all ranks
};

class MpiCollective final : public Collective {
 public:
  static Result<std::unique_ptr<MpiCollective>> init(int* argc, char*** argv);
  ~MpiCollective() override;
  MpiCollective(const MpiCollective&) = delete;
  MpiCollective& operator=(const MpiCollective&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status allreduce_sum(std::span<float> data) override;
  Status allreduce_sum(std::span<double> data) override;
  Status broadcast(std::span<unsigned char> data, int root);

  // Out-of-place float sum-allreduce of `bytes` per rank: `warmup` untimed, then `iters` timed.
  Result<AllreduceTiming> time_allreduce(size_t bytes, int iters, int warmup);

 private:
  MpiCollective(int rank, int size) : rank_(rank), size_(size) {}
  int rank_;
  int size_;
};

}  // namespace railyard::workloads
