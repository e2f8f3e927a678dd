// Checkpoints of railyard-train: <dir>/checkpoint.json, written by rank 0 (temp file + fsync + rename, so a
// reader sees the old or the new checkpoint, never half of one), read by rank 0 and broadcast to the others
// (so ranks on nodes without a shared file system resume from the same state).
//
// The checkpoint keeps the ORIGINAL run_start time and the training time spent so far: a resumed run emits
// run_start with that original time, so time-to-train covers the interruption too (see README.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "workloads/collective.hpp"
#include "workloads/mlp_math.hpp"

namespace railyard::workloads {

inline constexpr int kCheckpointVersion = 1;

struct Checkpoint {
  int epoch = 0;                  // last completed epoch (epochs count from 1)
  std::int64_t run_start_ms = 0;  // run_start of the first attempt, ms since the Unix epoch
  double elapsed_s = 0;           // wall time inside training (run_start/resume .. checkpoint), all attempts
  std::uint64_t seed = 0;
  std::string dataset;  // Dataset::name, to refuse a checkpoint of another data set
  MlpShape shape;
  std::vector<float> params;
};

std::filesystem::path checkpoint_file(const std::filesystem::path& dir);

// Creates dir if needed. Errors carry the path and errno text.
Status save_checkpoint(const std::filesystem::path& dir, const Checkpoint& checkpoint);

// No checkpoint file: an empty optional. A file that is unreadable, corrupt (checksum) or of another
// version: an error (the caller stops rather than silently start over).
Result<std::optional<Checkpoint>> load_checkpoint(const std::filesystem::path& dir);

// Rank 0 loads and checks the checkpoint against what this run trains; every rank receives the result.
// `expected` supplies seed, dataset and shape (its params are ignored). Collective: all ranks call it.
Result<std::optional<Checkpoint>> load_and_share_checkpoint(Collective& collective,
                                                            const std::filesystem::path& dir,
                                                            const Checkpoint& expected);

}  // namespace railyard::workloads
