// The training engine of librailyard_nccl_backend.so. One step, on one stream, with no host round trip
// besides uploading the step's row indices:
//   hidden_kernel   h[r][j]       = relu(W1[j] . [x_row; 1])                n*hidden threads
//   output_kernel   delta2[r][:]  = (softmax(z) - onehot) * scale            n threads
//   delta_kernel    delta1[r][j]  = [h > 0] * W2[:, j] . delta2[r]           n*hidden threads
//   grad_kernel     grad[i]       = sum over rows, fixed order, no atomics    parameter_count threads
//   ncclAllReduce   grad          = sum over ranks (in place)
//   sgd_kernel      params       -= lr * grad
// The per-element formulas are mlp_math.hpp's, the ones the CPU engine runs in CI.
#include <string>

#include "workloads/nccl_backend.cuh"

struct RyNcclMlp {
  RyNcclComm* comm = nullptr;
  railyard::workloads::MlpShape shape;
  int rows = 0;
  float *x = nullptr, *params = nullptr, *grad = nullptr, *h = nullptr, *delta1 = nullptr, *delta2 = nullptr;
  int *y = nullptr, *batch = nullptr;
};

namespace railyard::workloads::gpu {
namespace {

__global__ void hidden_kernel(MlpShape s, const float* p, const float* x, const int* rows, int n, float* h) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n * s.hidden) return;
  const int r = i / s.hidden, j = i % s.hidden;
  h[i] = hidden_activation(s, p, x + rows[r] * s.inputs, j);
}

__global__ void output_kernel(MlpShape s, const float* p, const float* h, const int* y, const int* rows,
                              int n, float scale, float* delta2) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  output_delta(s, p, h + r * s.hidden, y[rows[r]], scale, delta2 + r * s.classes);
}

__global__ void delta_kernel(MlpShape s, const float* p, const float* h, const float* delta2, int n,
                             float* delta1) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n * s.hidden) return;
  const int r = i / s.hidden, j = i % s.hidden;
  delta1[i] = hidden_delta(s, p, h + r * s.hidden, delta2 + r * s.classes, j);
}

__global__ void grad_kernel(MlpShape s, const float* x, const int* rows, int n, const float* h,
                            const float* delta1, const float* delta2, float* grad) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= s.parameter_count()) return;
  if (i < s.w2_offset()) {
    grad[i] = w1_gradient(s, n, x, rows, delta1, i / s.w1_stride(), i % s.w1_stride());
  } else {
    const int k = i - s.w2_offset();
    grad[i] = w2_gradient(s, n, h, delta2, k / s.w2_stride(), k % s.w2_stride());
  }
}

__global__ void sgd_kernel(float* p, const float* g, int count, float lr) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) p[i] -= lr * g[i];
}

template <typename T>
int upload(T** device, const T* host, size_t count) {
  RY_CUDA(cudaMalloc(device, count * sizeof(T)));
  if (host != nullptr) RY_CUDA(cudaMemcpy(*device, host, count * sizeof(T), cudaMemcpyHostToDevice));
  return 0;
}

int allocate(RyNcclMlp* m, const RyMlpDesc* d) {
  const auto rows = static_cast<size_t>(d->rows);
  const auto params = static_cast<size_t>(m->shape.parameter_count());
  if (upload(&m->x, d->features, rows * d->inputs) || upload(&m->y, d->labels, rows) ||
      upload(&m->params, d->params, params) || upload<float>(&m->grad, nullptr, params) ||
      upload<float>(&m->h, nullptr, rows * d->hidden) ||
      upload<float>(&m->delta1, nullptr, rows * d->hidden) ||
      upload<float>(&m->delta2, nullptr, rows * d->classes) || upload<int>(&m->batch, nullptr, rows)) {
    return 1;
  }
  return 0;
}

}  // namespace

void mlp_destroy(RyNcclMlp* m) {
  if (m == nullptr) return;
  for (void* p : {static_cast<void*>(m->x), static_cast<void*>(m->params), static_cast<void*>(m->grad),
                  static_cast<void*>(m->h), static_cast<void*>(m->delta1), static_cast<void*>(m->delta2),
                  static_cast<void*>(m->y), static_cast<void*>(m->batch)}) {
    if (p != nullptr) cudaFree(p);
  }
  delete m;
}

RyNcclMlp* mlp_create(RyNcclComm* comm, const RyMlpDesc* desc) {
  if (desc->classes > kMaxOutputs || desc->classes < 1 || desc->rows < 1) {
    set_error("mlp_create: unsupported shape (classes must be 1.." + std::to_string(kMaxOutputs) + ")");
    return nullptr;
  }
  auto* m = new RyNcclMlp;
  m->comm = comm;
  m->shape = MlpShape{desc->inputs, desc->hidden, desc->classes};
  m->rows = desc->rows;
  const cudaError_t selected = cudaSetDevice(comm->device);
  if (selected != cudaSuccess) fail("cudaSetDevice", selected);
  if (selected != cudaSuccess || allocate(m, desc) != 0) {  // fail() has recorded why
    mlp_destroy(m);
    return nullptr;
  }
  return m;
}

int mlp_step(RyNcclMlp* m, const int* rows, int n, float scale, float lr) {
  if (n < 0 || n > m->rows) return fail("mlp_step: row count", cudaErrorInvalidValue);
  const MlpShape s = m->shape;
  cudaStream_t stream = m->comm->stream;
  if (n > 0) {
    RY_CUDA(cudaMemcpyAsync(m->batch, rows, n * sizeof(int), cudaMemcpyHostToDevice, stream));
    hidden_kernel<<<blocks_for(1LL * n * s.hidden), kThreads, 0, stream>>>(s, m->params, m->x, m->batch, n,
                                                                           m->h);
    output_kernel<<<blocks_for(n), kThreads, 0, stream>>>(s, m->params, m->h, m->y, m->batch, n, scale,
                                                          m->delta2);
    delta_kernel<<<blocks_for(1LL * n * s.hidden), kThreads, 0, stream>>>(s, m->params, m->h, m->delta2, n,
                                                                          m->delta1);
  }
  // With n == 0 the gradient kernel writes zeros: this rank still takes part in the allreduce.
  grad_kernel<<<blocks_for(s.parameter_count()), kThreads, 0, stream>>>(s, m->x, m->batch, n, m->h, m->delta1,
                                                                        m->delta2, m->grad);
  RY_CUDA(cudaGetLastError());
  RY_NCCL(ncclAllReduce(m->grad, m->grad, s.parameter_count(), ncclFloat, ncclSum, m->comm->comm, stream));
  sgd_kernel<<<blocks_for(s.parameter_count()), kThreads, 0, stream>>>(m->params, m->grad,
                                                                       s.parameter_count(), lr);
  RY_CUDA(cudaGetLastError());
  RY_CUDA(cudaStreamSynchronize(stream));  // the host's row buffer may be reused after return
  return 0;
}

int mlp_params(RyNcclMlp* m, float* out, size_t count) {
  if (count != static_cast<size_t>(m->shape.parameter_count()))
    return fail("mlp_params: count", cudaErrorInvalidValue);
  RY_CUDA(cudaMemcpy(out, m->params, count * sizeof(float), cudaMemcpyDeviceToHost));
  return 0;
}

}  // namespace railyard::workloads::gpu
