// The synchronous data-parallel training loop of railyard-train, independent of the backend.
//
//   for epoch = first .. epochs:                     (first = 1, or checkpoint epoch + 1 on resume)
//     perm = permutation(train rows, seed, epoch)     identical on every rank, no data moves
//     for each global batch of perm:                   rank r takes its contiguous share of the batch
//       engine.step(share, batch size, lr)             local grads * 1/batch, sum-allreduce, SGD update
//     accuracy = allreduce(correct, count) over eval shards
//     target reached -> run_stop success;  every N epochs -> checkpoint (rank 0)
//   epochs exhausted -> run_stop aborted
//
// Every rank runs the same sequence of collectives; only rank 0 is given an MllogWriter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "jobs/mllog.hpp"
#include "workloads/checkpoint.hpp"
#include "workloads/collective.hpp"
#include "workloads/dataset.hpp"

namespace railyard::workloads {

// The MLLOG writer and keys the trainer logs with (jobs/mllog.hpp).
using jobs::MllogEventType;
using jobs::MllogWriter;
namespace mllog_key = jobs::mllog_key;

struct TrainConfig {
  int epochs = 40;
  int batch_size = 32;  // global: summed over ranks
  double learning_rate = 0.3;
  double target_accuracy = 0.95;
  std::uint64_t seed = 1;
  std::string checkpoint_dir;  // empty: no checkpoints
  int checkpoint_every = 1;
  int max_epochs_this_run = 0;  // > 0: stop after that many epochs without run_stop (emulates preemption)
};

enum class RunStatus { kSuccess, kAborted, kPreempted };

struct TrainOutcome {
  RunStatus status = RunStatus::kAborted;
  int last_epoch = 0;
  double accuracy = 0;
  double elapsed_s = 0;  // training wall time over all attempts (excludes interruptions)
  std::int64_t run_start_ms = 0;
  std::int64_t run_stop_ms = 0;
  std::vector<float> params;
};

struct TrainSetup {
  const Split* data = nullptr;
  MlpShape shape;
  Collective* collective = nullptr;
  GradientEngine* engine = nullptr;   // built with the initial (or resumed) parameters
  MllogWriter* log = nullptr;         // rank 0 only
  std::optional<Checkpoint> resumed;  // what the engine was built from, when resuming
  Checkpoint identity;                // seed, dataset and shape stamped on new checkpoints
};

Result<TrainOutcome> train(const TrainConfig& config, const TrainSetup& setup);

// The eval accuracy of params over all ranks' eval shards (a collective).
Result<double> evaluate(const TrainSetup& setup, const std::vector<float>& params);

}  // namespace railyard::workloads
