// Host-side model code: initialisation, the CPU gradient computation, evaluation and the checksum that
// ranks compare to prove they hold the same model. The formulas are in mlp_math.hpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "workloads/dataset.hpp"
#include "workloads/mlp_math.hpp"

namespace railyard::workloads {

MlpShape shape_for(const Dataset& data, int hidden);

// Glorot-uniform weights, zero biases, from the project's own PRNG (same on every rank).
std::vector<float> init_parameters(const MlpShape& shape, std::uint64_t seed);

// Work buffers reused across steps (h, delta1, delta2 for the rows of one step).
struct MlpScratch {
  std::vector<float> h, delta1, delta2;
};

// grad = scale * sum over `rows` of dloss/dparams (grad is overwritten). Returns scale * sum of losses.
// With scale = 1 / global batch size, summing every rank's grad gives the batch-mean gradient.
float compute_gradients(const MlpShape& shape, std::span<const float> params, const Dataset& data,
                        std::span<const int> rows, float scale, std::span<float> grad, MlpScratch& scratch);

// Class with the largest logit for one input row.
int predict(const MlpShape& shape, std::span<const float> params, const float* x);

// Correct predictions over rows [begin, end) of data.
int count_correct(const MlpShape& shape, std::span<const float> params, const Dataset& data, int begin,
                  int end);

// FNV-1a over the parameters' bytes: equal only for bit-identical models.
std::uint64_t model_checksum(std::span<const float> params);
std::string checksum_hex(std::uint64_t checksum);

}  // namespace railyard::workloads
