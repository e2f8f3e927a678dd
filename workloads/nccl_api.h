/* The C ABI between railyard-train / railyard-allreduce and librailyard_nccl_backend.so, the MODULE that
 * holds every CUDA and NCCL call. The programs dlopen it only for --backend nccl, so they start (and the
 * mpi backend runs) on machines without CUDA; see TOOLCHAIN.md.
 *
 * Conventions: functions return 0 on success, kRyNcclNoDevice (3) when there is no usable GPU, any other
 * non-zero value on failure; last_error() then explains (thread-local, valid until the next call).
 * Bump RY_NCCL_ABI_VERSION on any change to this struct.
 */
#ifndef RAILYARD_JOBS_WORKLOADS_NCCL_API_H_
#define RAILYARD_JOBS_WORKLOADS_NCCL_API_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RY_NCCL_ABI_VERSION 1
#define RY_NCCL_UNIQUE_ID_BYTES 128
#define RY_NCCL_NO_DEVICE 3
#define RY_NCCL_ENTRY_POINT "railyard_nccl_api"

typedef struct RyNcclComm RyNcclComm;
typedef struct RyNcclMlp RyNcclMlp;

typedef struct RyMlpDesc {
  int inputs, hidden, classes; /* MlpShape */
  int rows;                    /* training rows, uploaded once */
  const float* features;       /* rows x inputs */
  const int* labels;           /* rows */
  const float* params;         /* initial parameters, MlpShape::parameter_count() floats */
} RyMlpDesc;

typedef struct RyNcclApi {
  int abi_version;
  const char* (*last_error)(void);
  /* Counts devices; RY_NCCL_NO_DEVICE when CUDA reports none (driver missing, no GPU). */
  int (*probe)(int* device_count);
  int (*unique_id)(unsigned char* out, size_t len);
  /* Selects `device`, then ncclCommInitRank with the id shared by rank 0. */
  RyNcclComm* (*comm_create)(int rank, int world, int device, const unsigned char* id, size_t len);
  void (*comm_destroy)(RyNcclComm* comm);
  /* Sum-allreduce of a host buffer through the GPU (is_double: 0 float, 1 double). */
  int (*allreduce_host)(RyNcclComm* comm, void* data, size_t count, int is_double);
  /* Out-of-place float allreduce of `bytes`, `warmup` untimed then `iters` timed; seconds per
   * iteration; `wrong` counts result elements that differ from the expected sum. */
  int (*bench)(RyNcclComm* comm, size_t bytes, int iters, int warmup, double* seconds, long long* wrong);
  /* The training engine: data and parameters live on the GPU; step computes the gradient of the given
   * rows scaled by `scale`, ncclAllReduce-sums it, and applies params -= lr * grad. */
  RyNcclMlp* (*mlp_create)(RyNcclComm* comm, const RyMlpDesc* desc);
  int (*mlp_step)(RyNcclMlp* mlp, const int* rows, int n_rows, float scale, float lr);
  int (*mlp_params)(RyNcclMlp* mlp, float* out, size_t count);
  void (*mlp_destroy)(RyNcclMlp* mlp);
} RyNcclApi;

typedef const RyNcclApi* (*RyNcclApiEntry)(void);

#ifdef __cplusplus
}
#endif

#endif /* RAILYARD_JOBS_WORKLOADS_NCCL_API_H_ */
