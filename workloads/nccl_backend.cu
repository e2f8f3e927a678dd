// librailyard_nccl_backend.so: every CUDA and NCCL call of railyard-train and railyard-allreduce, behind
// the C ABI of nccl_api.h. Loaded with dlopen only for --backend nccl. This file: device probe,
// communicators, host-buffer allreduce, the bandwidth benchmark and the ABI table; nccl_mlp.cu: training.
#include <cstdio>
#include <cstring>
#include <string>

#include "workloads/nccl_backend.cuh"

namespace railyard::workloads::gpu {

thread_local std::string g_error;

void set_error(std::string text) { g_error = std::move(text); }

int fail(const char* what, cudaError_t e) {
  g_error = std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  return 1;
}

int fail(const char* what, ncclResult_t r) {
  g_error = std::string(what) + ": " + ncclGetErrorString(r);
  return 1;
}

}  // namespace railyard::workloads::gpu

namespace {

using namespace railyard::workloads::gpu;

__global__ void fill_kernel(float* data, size_t count, float value) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    data[i] = value;
}

__global__ void check_kernel(const float* data, size_t count, float expected, unsigned long long* wrong) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    if (data[i] != expected) atomicAdd(wrong, 1ULL);
  }
}

const char* last_error() { return g_error.c_str(); }

int probe(int* device_count) {
  int count = 0;  // cudaGetDeviceCount leaves it untouched on failure
  const cudaError_t e = cudaGetDeviceCount(&count);
  char text[256];
  if (e != cudaSuccess) {
    const char* why = e == cudaErrorInsufficientDriver ? "insufficient driver"
                      : e == cudaErrorNoDevice         ? "no device"
                                                       : cudaGetErrorString(e);
    std::snprintf(text, sizeof text, "no CUDA device: cudaGetDeviceCount returned %d (%s)",
                  static_cast<int>(e), why);
    g_error = text;
    return RY_NCCL_NO_DEVICE;
  }
  if (count <= 0) {
    g_error = "no CUDA device: cudaGetDeviceCount found 0 devices";
    return RY_NCCL_NO_DEVICE;
  }
  *device_count = count;
  return 0;
}

int unique_id(unsigned char* out, size_t len) {
  static_assert(sizeof(ncclUniqueId) == RY_NCCL_UNIQUE_ID_BYTES, "ncclUniqueId size changed");
  if (len < sizeof(ncclUniqueId)) return fail("unique_id", ncclInvalidArgument);
  ncclUniqueId id;
  RY_NCCL(ncclGetUniqueId(&id));
  std::memcpy(out, &id, sizeof id);
  return 0;
}

int init_comm(RyNcclComm* c, const unsigned char* id_bytes) {
  ncclUniqueId id;
  std::memcpy(&id, id_bytes, sizeof id);
  RY_CUDA(cudaSetDevice(c->device));
  RY_CUDA(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  RY_NCCL(ncclCommInitRank(&c->comm, c->world, id, c->rank));
  return 0;
}

void comm_destroy(RyNcclComm* c) {
  if (c == nullptr) return;
  if (c->comm != nullptr) ncclCommDestroy(c->comm);
  if (c->scratch != nullptr) cudaFree(c->scratch);
  if (c->stream != nullptr) cudaStreamDestroy(c->stream);
  delete c;
}

RyNcclComm* comm_create(int rank, int world, int device, const unsigned char* id, size_t len) {
  if (len < sizeof(ncclUniqueId)) {
    g_error = "comm_create: unique id too short";
    return nullptr;
  }
  auto* c = new RyNcclComm;
  c->rank = rank;
  c->world = world;
  c->device = device;
  if (init_comm(c, id) != 0) {
    comm_destroy(c);
    return nullptr;
  }
  return c;
}

int allreduce_host(RyNcclComm* c, void* data, size_t count, int is_double) {
  const size_t bytes = count * (is_double ? sizeof(double) : sizeof(float));
  if (bytes == 0) return 0;
  if (bytes > c->scratch_bytes) {
    if (c->scratch != nullptr) RY_CUDA(cudaFree(c->scratch));
    c->scratch = nullptr;
    c->scratch_bytes = 0;
    RY_CUDA(cudaMalloc(&c->scratch, bytes));
    c->scratch_bytes = bytes;
  }
  RY_CUDA(cudaMemcpyAsync(c->scratch, data, bytes, cudaMemcpyHostToDevice, c->stream));
  RY_NCCL(ncclAllReduce(c->scratch, c->scratch, count, is_double ? ncclDouble : ncclFloat, ncclSum, c->comm,
                        c->stream));
  RY_CUDA(cudaMemcpyAsync(data, c->scratch, bytes, cudaMemcpyDeviceToHost, c->stream));
  RY_CUDA(cudaStreamSynchronize(c->stream));
  return 0;
}

int timed_allreduces(RyNcclComm* c, float* send, float* recv, size_t count, int iters, int warmup,
                     double* seconds) {
  for (int i = 0; i < warmup; ++i)
    RY_NCCL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, c->comm, c->stream));
  RY_CUDA(cudaStreamSynchronize(c->stream));
  cudaEvent_t start, stop;
  RY_CUDA(cudaEventCreate(&start));
  RY_CUDA(cudaEventCreate(&stop));
  RY_CUDA(cudaEventRecord(start, c->stream));
  for (int i = 0; i < iters; ++i)
    RY_NCCL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, c->comm, c->stream));
  RY_CUDA(cudaEventRecord(stop, c->stream));
  RY_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  RY_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  *seconds = iters > 0 ? ms / 1000.0 / iters : 0.0;
  return 0;
}

int bench_buffers(RyNcclComm* c, float* send, float* recv, unsigned long long* wrong, size_t count, int iters,
                  int warmup, double* seconds, long long* wrong_out) {
  fill_kernel<<<1024, kThreads, 0, c->stream>>>(send, count, static_cast<float>(c->rank + 1));
  RY_CUDA(cudaGetLastError());
  if (timed_allreduces(c, send, recv, count, iters, warmup, seconds) != 0) return 1;
  const float expected = static_cast<float>(c->world) * static_cast<float>(c->world + 1) / 2.0f;
  RY_CUDA(cudaMemsetAsync(wrong, 0, sizeof *wrong, c->stream));
  check_kernel<<<1024, kThreads, 0, c->stream>>>(recv, count, expected, wrong);
  RY_CUDA(cudaGetLastError());
  unsigned long long host_wrong = 0;
  RY_CUDA(cudaMemcpyAsync(&host_wrong, wrong, sizeof host_wrong, cudaMemcpyDeviceToHost, c->stream));
  RY_CUDA(cudaStreamSynchronize(c->stream));
  *wrong_out = static_cast<long long>(host_wrong);
  return 0;
}

int bench(RyNcclComm* c, size_t bytes, int iters, int warmup, double* seconds, long long* wrong_out) {
  const size_t count = bytes / sizeof(float) > 0 ? bytes / sizeof(float) : 1;
  float *send = nullptr, *recv = nullptr;
  unsigned long long* wrong = nullptr;
  int rc = 1;
  if (cudaMalloc(&send, count * sizeof(float)) == cudaSuccess &&
      cudaMalloc(&recv, count * sizeof(float)) == cudaSuccess &&
      cudaMalloc(&wrong, sizeof *wrong) == cudaSuccess) {
    rc = bench_buffers(c, send, recv, wrong, count, iters, warmup, seconds, wrong_out);
  } else {
    g_error = "bench: cudaMalloc of " + std::to_string(2 * count * sizeof(float)) + " bytes failed";
  }
  cudaFree(send);
  cudaFree(recv);
  cudaFree(wrong);
  return rc;
}

const RyNcclApi kApi = {RY_NCCL_ABI_VERSION, last_error, probe,      unique_id, comm_create, comm_destroy,
                        allreduce_host,      bench,      mlp_create, mlp_step,  mlp_params,  mlp_destroy};

}  // namespace

extern "C" __attribute__((visibility("default"))) const RyNcclApi* railyard_nccl_api(void) { return &kApi; }
