// The model's arithmetic, one output element per function, shared verbatim by the CPU engine (mlp.cpp)
// and the CUDA kernels (nccl_backend.cu). Keeping one copy means the CPU path, which CI runs, tests the
// same formulas the GPU runs, and both sum in the same order.
//
// Model: one hidden layer, ReLU, softmax cross-entropy.
//   h = relu(W1 [x; 1]),  z = W2 [h; 1],  loss = -log softmax(z)[label]
// Backward (delta2 = dloss/dz, delta1 = dloss/dpre-activation of h):
//   delta2 = softmax(z) - onehot(label);  delta1_j = [h_j > 0] * sum_c W2[c][j] delta2_c
//   dW2[c][j] = sum_rows delta2_c [h; 1]_j;  dW1[j][k] = sum_rows delta1_j [x; 1]_k
// Must stay valid C++20 *and* CUDA device code: no library calls besides <cmath>'s expf/logf.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define RY_HD __host__ __device__
#else
#define RY_HD
#endif

namespace railyard::workloads {

inline constexpr int kMaxOutputs = 16;  // == kMaxClasses (dataset.hpp); logits live in a local array

// Layout of the flat parameter vector; gradients use the same layout, so one allreduce moves them all.
//   [ W1: hidden rows of (inputs + 1), bias last | W2: classes rows of (hidden + 1), bias last ]
struct MlpShape {
  int inputs = 64;
  int hidden = 32;
  int classes = 10;

  RY_HD constexpr int w1_stride() const { return inputs + 1; }
  RY_HD constexpr int w2_offset() const { return hidden * (inputs + 1); }
  RY_HD constexpr int w2_stride() const { return hidden + 1; }
  RY_HD constexpr int parameter_count() const { return w2_offset() + classes * (hidden + 1); }
};

// h_j for one input row x.
RY_HD inline float hidden_activation(const MlpShape& s, const float* p, const float* x, int j) {
  const float* w = p + j * s.w1_stride();
  float a = w[s.inputs];
  for (int k = 0; k < s.inputs; ++k) a += w[k] * x[k];
  return a > 0.0f ? a : 0.0f;
}

// z_c for one hidden vector h.
RY_HD inline float output_logit(const MlpShape& s, const float* p, const float* h, int c) {
  const float* w = p + s.w2_offset() + c * s.w2_stride();
  float z = w[s.hidden];
  for (int j = 0; j < s.hidden; ++j) z += w[j] * h[j];
  return z;
}

// Writes delta2 = (softmax(z) - onehot(label)) * scale for one row; returns that row's loss.
RY_HD inline float output_delta(const MlpShape& s, const float* p, const float* h, int label, float scale,
                                float* delta) {
  float z[kMaxOutputs];
  float top = -3.0e38f;
  for (int c = 0; c < s.classes; ++c) {
    z[c] = output_logit(s, p, h, c);
    top = z[c] > top ? z[c] : top;
  }
  float total = 0.0f;
  for (int c = 0; c < s.classes; ++c) total += expf(z[c] - top);
  for (int c = 0; c < s.classes; ++c) {
    const float prob = expf(z[c] - top) / total;
    delta[c] = (prob - (c == label ? 1.0f : 0.0f)) * scale;
  }
  return logf(total) - (z[label] - top);
}

// delta1_j for one row, given its h and delta2.
RY_HD inline float hidden_delta(const MlpShape& s, const float* p, const float* h, const float* delta2,
                                int j) {
  if (h[j] <= 0.0f) return 0.0f;
  float d = 0.0f;
  for (int c = 0; c < s.classes; ++c) d += p[s.w2_offset() + c * s.w2_stride() + j] * delta2[c];
  return d;
}

// dW2[c][j] (j == hidden is the bias) summed over n rows of h (n x hidden) and delta2 (n x classes).
RY_HD inline float w2_gradient(const MlpShape& s, int n, const float* h, const float* delta2, int c, int j) {
  float g = 0.0f;
  for (int r = 0; r < n; ++r) g += delta2[r * s.classes + c] * (j < s.hidden ? h[r * s.hidden + j] : 1.0f);
  return g;
}

// dW1[j][k] (k == inputs is the bias) summed over n rows; x holds the dataset, rows picks from it.
RY_HD inline float w1_gradient(const MlpShape& s, int n, const float* x, const int* rows, const float* delta1,
                               int j, int k) {
  float g = 0.0f;
  for (int r = 0; r < n; ++r) {
    g += delta1[r * s.hidden + j] * (k < s.inputs ? x[rows[r] * s.inputs + k] : 1.0f);
  }
  return g;
}

}  // namespace railyard::workloads
