#include "workloads/mlp.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace railyard::workloads {

MlpShape shape_for(const Dataset& data, int hidden) { return MlpShape{data.features, hidden, data.classes}; }

std::vector<float> init_parameters(const MlpShape& shape, std::uint64_t seed) {
  std::vector<float> params(static_cast<size_t>(shape.parameter_count()), 0.0f);
  SplitMix64 rng(seed ^ 0x9a11e7ULL);
  const auto fill = [&](int offset, int rows, int fan_in, int fan_out) {
    const double limit = std::sqrt(6.0 / (fan_in + fan_out));
    for (int r = 0; r < rows; ++r) {
      for (int k = 0; k < fan_in; ++k) {  // column fan_in (the bias) stays 0
        params[static_cast<size_t>(offset + r * (fan_in + 1) + k)] =
            static_cast<float>((2 * rng.uniform01() - 1) * limit);
      }
    }
  };
  fill(0, shape.hidden, shape.inputs, shape.hidden);
  fill(shape.w2_offset(), shape.classes, shape.hidden, shape.classes);
  return params;
}

float compute_gradients(const MlpShape& shape, std::span<const float> params, const Dataset& data,
                        std::span<const int> rows, float scale, std::span<float> grad, MlpScratch& scratch) {
  const int n = static_cast<int>(rows.size());
  const float* p = params.data();
  scratch.h.assign(static_cast<size_t>(n) * shape.hidden, 0.0f);
  scratch.delta1.assign(static_cast<size_t>(n) * shape.hidden, 0.0f);
  scratch.delta2.assign(static_cast<size_t>(n) * shape.classes, 0.0f);
  float loss = 0.0f;
  for (int r = 0; r < n; ++r) {
    const int row = rows[static_cast<size_t>(r)];
    float* h = scratch.h.data() + r * shape.hidden;
    float* d2 = scratch.delta2.data() + r * shape.classes;
    for (int j = 0; j < shape.hidden; ++j) h[j] = hidden_activation(shape, p, data.row(row), j);
    loss += output_delta(shape, p, h, data.y[static_cast<size_t>(row)], scale, d2) * scale;
    for (int j = 0; j < shape.hidden; ++j)
      scratch.delta1[static_cast<size_t>(r * shape.hidden + j)] = hidden_delta(shape, p, h, d2, j);
  }
  for (int j = 0; j < shape.hidden; ++j) {
    for (int k = 0; k <= shape.inputs; ++k) {
      grad[static_cast<size_t>(j * shape.w1_stride() + k)] =
          w1_gradient(shape, n, data.x.data(), rows.data(), scratch.delta1.data(), j, k);
    }
  }
  for (int c = 0; c < shape.classes; ++c) {
    for (int j = 0; j <= shape.hidden; ++j) {
      grad[static_cast<size_t>(shape.w2_offset() + c * shape.w2_stride() + j)] =
          w2_gradient(shape, n, scratch.h.data(), scratch.delta2.data(), c, j);
    }
  }
  return loss;
}

int predict(const MlpShape& shape, std::span<const float> params, const float* x) {
  float h[256];
  std::vector<float> wide;
  float* hidden = h;
  if (shape.hidden > 256) {
    wide.resize(static_cast<size_t>(shape.hidden));
    hidden = wide.data();
  }
  for (int j = 0; j < shape.hidden; ++j) hidden[j] = hidden_activation(shape, params.data(), x, j);
  int best = 0;
  float best_z = output_logit(shape, params.data(), hidden, 0);
  for (int c = 1; c < shape.classes; ++c) {
    const float z = output_logit(shape, params.data(), hidden, c);
    if (z > best_z) {
      best_z = z;
      best = c;
    }
  }
  return best;
}

int count_correct(const MlpShape& shape, std::span<const float> params, const Dataset& data, int begin,
                  int end) {
  int correct = 0;
  for (int r = begin; r < end; ++r)
    correct += predict(shape, params, data.row(r)) == data.y[static_cast<size_t>(r)];
  return correct;
}

std::uint64_t model_checksum(std::span<const float> params) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (float value : params) {
    unsigned char bytes[sizeof(float)];
    std::memcpy(bytes, &value, sizeof value);
    for (unsigned char b : bytes) hash = (hash ^ b) * 0x100000001b3ULL;
  }
  return hash;
}

std::string checksum_hex(std::uint64_t checksum) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(checksum));
  return text;
}

}  // namespace railyard::workloads
