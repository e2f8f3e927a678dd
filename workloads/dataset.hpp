// Training data for railyard-train: the UCI/scikit-learn 8x8 handwritten digits (vendored under
// workloads/data/, see its README), any CSV of the same shape given with --data, or, when no file
// can be found, a deterministic synthetic stand-in. Every rank loads the whole (small) set and takes
// its shard by index, so no data moves between ranks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace railyard::workloads {

inline constexpr int kMaxClasses = 16;  // the GPU kernels keep one row's logits in registers

struct Dataset {
  std::string name;    // "sklearn-digits", "csv", "synthetic-digits"
  std::string source;  // the file read, or a description of the generator
  int features = 0;
  int classes = 0;
  std::vector<float> x;  // rows x features, row-major, scaled to [0, 1]
  std::vector<int> y;    // rows labels in [0, classes)

  int rows() const { return static_cast<int>(y.size()); }
  const float* row(int r) const { return x.data() + static_cast<size_t>(r) * features; }
};

struct Split {
  Dataset train;
  Dataset eval;
};

// Reads "f1,f2,...,fD,label" lines (gzip-compressed or plain; zlib reads both). Features are divided
// by the largest feature value so they lie in [0, 1]; labels must be integers in [0, kMaxClasses).
Result<Dataset> load_csv_dataset(const std::filesystem::path& path);

// 1,797 samples of 64 features in 10 classes (the digits' shape): noisy copies of random prototypes.
// Same seed, same data, on every machine (own PRNG, no <random> distributions).
Dataset synthetic_digits(std::uint64_t seed = 1797);

// Where the digits file is looked for when --data is not given, in order: $RAILYARD_DATA,
// <dir of the executable>/data/digits.csv.gz, <dir>/../share/railyard/digits.csv.gz, the source tree's
// workloads/data/digits.csv.gz (compiled in), Debian's python3-sklearn copy.
std::vector<std::filesystem::path> default_data_candidates();

// The first candidate that loads, or the synthetic set when none does.
Dataset load_default_dataset();

// Deterministic split: a seeded shuffle, then the first eval_fraction of rows go to eval.
Split split_dataset(const Dataset& all, double eval_fraction, std::uint64_t seed);

// SplitMix64: tiny, fast and identical everywhere, so shuffles agree across ranks and machines.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::uint64_t below(std::uint64_t bound);  // uniform in [0, bound), bound > 0

 private:
  std::uint64_t state_;
};

// Fisher-Yates permutation of 0..n-1 for (seed, stream); stream separates epochs.
std::vector<int> permutation(int n, std::uint64_t seed, std::uint64_t stream);

}  // namespace railyard::workloads
