#include "workloads/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>

namespace railyard::workloads {
namespace {

using SteadyClock = std::chrono::steady_clock;

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

Status run_epoch(const TrainConfig& config, const TrainSetup& setup, int epoch) {
  const Dataset& train = setup.data->train;
  const auto order = permutation(train.rows(), config.seed, static_cast<std::uint64_t>(epoch));
  const int rank = setup.collective->rank();
  const int world = setup.collective->size();
  std::vector<int> rows;
  for (int begin = 0; begin < train.rows(); begin += config.batch_size) {
    const int batch = std::min(config.batch_size, train.rows() - begin);
    const Range mine = shard(batch, rank, world);
    rows.assign(order.begin() + begin + mine.begin, order.begin() + begin + mine.end);
    const auto lr = static_cast<float>(config.learning_rate);
    if (auto stepped = setup.engine->step(rows, batch, lr); !stepped) return stepped;
  }
  return ok();
}

// Rank 0's view of where the run stands, for the events it prints.
struct RunClock {
  std::int64_t run_start_ms = 0;
  double prior_elapsed_s = 0;  // from earlier attempts, per the checkpoint
  SteadyClock::time_point attempt_start = SteadyClock::now();

  double elapsed_s() const { return prior_elapsed_s + seconds_since(attempt_start); }
};

void announce_start(const TrainSetup& setup, const RunClock& clock, int first_epoch) {
  MllogWriter* log = setup.log;
  if (log == nullptr) return;
  log->at(clock.run_start_ms, MllogEventType::kIntervalStart, mllog_key::kRunStart, nullptr,
          nlohmann::json::object());
  if (!setup.resumed) return;
  // run_start above carries the original time; the interruption is what the wall clock lost outside training.
  const double since_start_s = static_cast<double>(log->now_ms() - clock.run_start_ms) / 1000.0;
  log->point(mllog_key::kResume, first_epoch,
             {{"epoch_num", first_epoch},
              {"checkpoint_epoch", setup.resumed->epoch},
              {"previous_elapsed_s", clock.prior_elapsed_s},
              {"interruption_s", std::max(0.0, since_start_s - clock.prior_elapsed_s)}});
}

void save_if_due(const TrainConfig& config, const TrainSetup& setup, const RunClock& clock, int epoch) {
  if (config.checkpoint_dir.empty() || config.checkpoint_every <= 0 || epoch % config.checkpoint_every != 0)
    return;
  if (setup.collective->rank() != 0) return;
  auto params = setup.engine->parameters();
  if (!params) {
    std::cerr << "railyard-train: checkpoint skipped: " << params.error().message << "\n";
    return;
  }
  Checkpoint checkpoint = setup.identity;
  checkpoint.epoch = epoch;
  checkpoint.run_start_ms = clock.run_start_ms;
  checkpoint.elapsed_s = clock.elapsed_s();
  checkpoint.params = std::move(params).value();
  // A failed save costs the ability to resume, not the run: warn and go on.
  if (auto saved = save_checkpoint(config.checkpoint_dir, checkpoint); !saved) {
    std::cerr << "railyard-train: warning: " << saved.error().message << "\n";
  }
}

// Trains and evaluates one epoch, printing its events; returns the eval accuracy.
Result<double> epoch_with_events(const TrainConfig& config, const TrainSetup& setup, int epoch) {
  const nlohmann::json meta = {{"epoch_num", epoch}};
  if (setup.log) setup.log->start(mllog_key::kEpochStart, nullptr, meta);
  const auto start = SteadyClock::now();
  if (auto trained = run_epoch(config, setup, epoch); !trained) return trained.error();
  const double seconds = seconds_since(start);
  if (setup.log) {
    setup.log->end(mllog_key::kEpochStop, nullptr, meta);
    const double throughput = seconds > 0 ? setup.data->train.rows() / seconds : 0.0;
    setup.log->point(mllog_key::kTrackedStats, {{"throughput", throughput}},
                     {{"step", epoch}, {"epoch_num", epoch}});
  }
  auto params = setup.engine->parameters();
  if (!params) return params.error();
  auto accuracy = evaluate(setup, *params);
  if (accuracy && setup.log) setup.log->point(mllog_key::kEvalAccuracy, *accuracy, meta);
  return accuracy;
}

}  // namespace

Result<double> evaluate(const TrainSetup& setup, const std::vector<float>& params) {
  const Dataset& eval = setup.data->eval;
  const Range mine = shard(eval.rows(), setup.collective->rank(), setup.collective->size());
  std::vector<double> tally = {
      static_cast<double>(count_correct(setup.shape, params, eval, mine.begin, mine.end)),
      static_cast<double>(mine.end - mine.begin)};
  if (auto reduced = setup.collective->allreduce_sum(std::span<double>(tally)); !reduced)
    return reduced.error();
  return tally[1] > 0 ? tally[0] / tally[1] : 0.0;
}

Result<TrainOutcome> train(const TrainConfig& config, const TrainSetup& setup) {
  RunClock clock;
  const std::int64_t now_ms = setup.log ? setup.log->now_ms() : MllogWriter::system_clock_ms();
  clock.run_start_ms = setup.resumed ? setup.resumed->run_start_ms : now_ms;
  clock.prior_elapsed_s = setup.resumed ? setup.resumed->elapsed_s : 0.0;
  const int first_epoch = setup.resumed ? setup.resumed->epoch + 1 : 1;
  announce_start(setup, clock, first_epoch);

  TrainOutcome outcome;
  outcome.run_start_ms = clock.run_start_ms;
  for (int epoch = first_epoch; epoch <= config.epochs; ++epoch) {
    auto accuracy = epoch_with_events(config, setup, epoch);
    if (!accuracy) return accuracy.error();
    outcome.last_epoch = epoch;
    outcome.accuracy = *accuracy;
    if (*accuracy >= config.target_accuracy) {
      outcome.status = RunStatus::kSuccess;
      break;
    }
    save_if_due(config, setup, clock, epoch);
    if (config.max_epochs_this_run > 0 && epoch - first_epoch + 1 >= config.max_epochs_this_run &&
        epoch < config.epochs) {
      outcome.status = RunStatus::kPreempted;
      break;
    }
  }
  outcome.elapsed_s = clock.elapsed_s();
  auto params = setup.engine->parameters();
  if (!params) return params.error();
  outcome.params = std::move(params).value();
  outcome.run_stop_ms = setup.log ? setup.log->now_ms() : MllogWriter::system_clock_ms();
  if (setup.log && outcome.status != RunStatus::kPreempted) {
    const bool success = outcome.status == RunStatus::kSuccess;
    setup.log->at(outcome.run_stop_ms, MllogEventType::kIntervalEnd, mllog_key::kRunStop, nullptr,
                  {{"status", success ? jobs::kStatusSuccess : jobs::kStatusAborted},
                   {"epoch_num", outcome.last_epoch},
                   {"model_checksum", checksum_hex(model_checksum(outcome.params))}});
  }
  return outcome;
}

}  // namespace railyard::workloads
