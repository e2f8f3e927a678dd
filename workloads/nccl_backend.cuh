// Shared by the two translation units of librailyard_nccl_backend.so (nccl_backend.cu, nccl_mlp.cu);
// not part of any interface outside the module.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "workloads/mlp_math.hpp"
#include "workloads/nccl_api.h"

struct RyNcclComm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int rank = 0, world = 1, device = 0;
  void* scratch = nullptr;  // staging buffer for allreduce_host
  size_t scratch_bytes = 0;
};

namespace railyard::workloads::gpu {

inline constexpr int kThreads = 256;
inline unsigned blocks_for(long long n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// The thread's last error, which RyNcclApi::last_error returns. fail() records and returns 1.
void set_error(std::string text);
int fail(const char* what, cudaError_t e);
int fail(const char* what, ncclResult_t r);

RyNcclMlp* mlp_create(RyNcclComm* comm, const RyMlpDesc* desc);
int mlp_step(RyNcclMlp* mlp, const int* rows, int n_rows, float scale, float lr);
int mlp_params(RyNcclMlp* mlp, float* out, size_t count);
void mlp_destroy(RyNcclMlp* mlp);

}  // namespace railyard::workloads::gpu

#define RY_CUDA(call)                                                              \
  do {                                                                             \
    const cudaError_t ry_e = (call);                                               \
    if (ry_e != cudaSuccess) return ::railyard::workloads::gpu::fail(#call, ry_e); \
  } while (0)
#define RY_NCCL(call)                                                              \
  do {                                                                             \
    const ncclResult_t ry_r = (call);                                              \
    if (ry_r != ncclSuccess) return ::railyard::workloads::gpu::fail(#call, ry_r); \
  } while (0)
