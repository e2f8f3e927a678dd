// The host side of --backend nccl: finds and dlopens librailyard_nccl_backend.so, probes for a GPU, and
// wraps the module's C ABI (nccl_api.h) as a Collective and a GradientEngine.
//
//   NcclModule::open()  -- dlopen + entry point + ABI check     (fails: "nccl backend unavailable: ...")
//   module.probe()      -- cudaGetDeviceCount                    (fails: "no CUDA device: ...", exit 3)
//   NcclCollective      -- ncclCommInitRank with an id rank 0 made and shared (MPI_Bcast or TCP, see
//                          bootstrap.hpp); allreduce of host buffers through the GPU
//   NcclEngine          -- data, parameters and gradients on the GPU; ncclAllReduce every step
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "workloads/collective.hpp"
#include "workloads/nccl_api.h"

namespace railyard::workloads {

inline constexpr int kExitNoGpu = 3;  // --backend nccl where no GPU or no CUDA can be used

using NcclUniqueId = std::array<unsigned char, RY_NCCL_UNIQUE_ID_BYTES>;

class NcclModule {
 public:
  // Search order: $RAILYARD_NCCL_BACKEND, next to the executable, <exe>/../lib/railyard/, then the
  // dynamic loader's own search (LD_LIBRARY_PATH, ...).
  static Result<std::shared_ptr<NcclModule>> open();
  ~NcclModule();
  NcclModule(const NcclModule&) = delete;
  NcclModule& operator=(const NcclModule&) = delete;

  // Number of CUDA devices, or an error whose message reads "no CUDA device: ..." (code kNotFound).
  Result<int> probe() const;
  Result<NcclUniqueId> unique_id() const;
  const RyNcclApi& api() const { return *api_; }
  std::string last_error() const;

 private:
  NcclModule(void* handle, const RyNcclApi* api) : handle_(handle), api_(api) {}
  void* handle_;
  const RyNcclApi* api_;
};

class NcclCollective final : public Collective {
 public:
  static Result<std::unique_ptr<NcclCollective>> create(std::shared_ptr<NcclModule> module, int rank,
                                                        int world, int device, const NcclUniqueId& id);
  ~NcclCollective() override;
  int rank() const override { return rank_; }
  int size() const override { return world_; }
  Status allreduce_sum(std::span<float> data) override;
  Status allreduce_sum(std::span<double> data) override;

  RyNcclComm* comm() const { return comm_; }
  const std::shared_ptr<NcclModule>& module() const { return module_; }

 private:
  NcclCollective(std::shared_ptr<NcclModule> module, RyNcclComm* comm, int rank, int world)
      : module_(std::move(module)), comm_(comm), rank_(rank), world_(world) {}
  std::shared_ptr<NcclModule> module_;
  RyNcclComm* comm_;
  int rank_, world_;
};

class NcclEngine final : public GradientEngine {
 public:
  static Result<std::unique_ptr<NcclEngine>> create(NcclCollective& collective, const MlpShape& shape,
                                                    const Dataset& train, const std::vector<float>& params);
  ~NcclEngine() override;
  Status step(std::span<const int> rows, int global_rows, float learning_rate) override;
  Result<std::vector<float>> parameters() override;

 private:
  NcclEngine(std::shared_ptr<NcclModule> module, RyNcclMlp* mlp, size_t count)
      : module_(std::move(module)), mlp_(mlp), count_(count) {}
  std::shared_ptr<NcclModule> module_;
  RyNcclMlp* mlp_;
  size_t count_;
};

// Which GPU a rank uses: its local rank (OMPI_COMM_WORLD_LOCAL_RANK or LOCAL_RANK) modulo the count.
int local_device(int device_count);

}  // namespace railyard::workloads
