// railyard-train: synchronous data-parallel SGD of a one-hidden-layer MLP on the 8x8 digits, over MPI
// (CPU) or NCCL (GPU, through the dlopen'd module), printing MLPerf logging lines from rank 0.
//
// Exit codes: 0 target reached (or stopped by --max-epochs-this-run), 1 runtime error, 2 bad arguments,
// data or checkpoint, 3 --backend nccl without a usable GPU / CUDA / NCCL, 4 epochs exhausted before the
// target (run_stop status "aborted").
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "jobs/mllog.hpp"
#include "workloads/bootstrap.hpp"
#include "workloads/mpi_collective.hpp"
#include "workloads/nccl_loader.hpp"
#include "workloads/trainer.hpp"

namespace railyard::workloads {
namespace {

constexpr int kExitRuntime = 1, kExitUsage = 2, kExitNotReached = 4;
constexpr auto kIdTimeout = std::chrono::seconds(120);

struct Options {
  std::string backend = "mpi";
  std::string data;
  int hidden = 32;
  TrainConfig train;
};

struct Backend {
  std::unique_ptr<MpiCollective> mpi;
  std::unique_ptr<NcclCollective> nccl;
  Collective* collective = nullptr;
  std::string name;
};

struct Failure {
  int exit_code;
  std::string message;
};

Failure failure_from(const Error& error) {
  const bool usage = error.code == ErrorCode::kInvalidArgument || error.code == ErrorCode::kNotFound;
  return {usage ? kExitUsage : kExitRuntime, error.message};
}

Result<Backend> open_mpi(const LaunchInfo& launch, int* argc, char*** argv) {
  if (launch.kind == LaunchInfo::Kind::kEnv && launch.world > 1) {
    return invalid(
        "--backend mpi needs mpirun (launcher \"mpi\"); under the env launcher use --backend nccl");
  }
  auto mpi = MpiCollective::init(argc, argv);
  if (!mpi) return mpi.error();
  Backend backend;
  backend.mpi = std::move(mpi).value();
  backend.collective = backend.mpi.get();
  backend.name = "mpi";
  return backend;
}

// Rank 0 makes the id; MPI_Bcast under mpirun, TCP on MASTER_ADDR:MASTER_PORT under the env launcher.
Result<NcclUniqueId> share_unique_id(const LaunchInfo& launch, const NcclModule& module, MpiCollective* mpi) {
  const int rank = mpi ? mpi->rank() : launch.rank;
  NcclUniqueId id{};
  if (rank == 0) {
    auto made = module.unique_id();
    if (!made) return made.error();
    id = *made;
  }
  if (mpi != nullptr) {
    if (auto sent = mpi->broadcast(id, 0); !sent) return sent.error();
    return id;
  }
  if (launch.world == 1) return id;
  if (rank == 0) {
    auto server = BlobServer::listen(launch.master_port);
    if (!server) return server.error();
    if (auto served = server->serve(id, launch.world - 1, kIdTimeout); !served) return served.error();
    return id;
  }
  auto blob = fetch_blob(launch.master_addr, launch.master_port, kIdTimeout);
  if (!blob) return blob.error();
  if (blob->size() != id.size()) return internal_error("NCCL id of the wrong size from rank 0");
  std::copy(blob->begin(), blob->end(), id.begin());
  return id;
}

Result<Backend> open_nccl(const LaunchInfo& launch, int* argc, char*** argv, Failure& gpu_failure) {
  auto module = NcclModule::open();
  auto devices = module ? module->get()->probe() : Result<int>(module.error());
  if (!devices) {
    gpu_failure = {kExitNoGpu, devices.error().message};
    return devices.error();
  }
  Backend backend;
  if (launch.kind == LaunchInfo::Kind::kMpirun) {
    auto mpi = MpiCollective::init(argc, argv);
    if (!mpi) return mpi.error();
    backend.mpi = std::move(mpi).value();
  }
  auto id = share_unique_id(launch, **module, backend.mpi.get());
  if (!id) return id.error();
  const int rank = backend.mpi ? backend.mpi->rank() : launch.rank;
  const int world = backend.mpi ? backend.mpi->size() : launch.world;
  auto nccl = NcclCollective::create(*module, rank, world, local_device(*devices), *id);
  if (!nccl) return nccl.error();
  backend.nccl = std::move(nccl).value();
  backend.collective = backend.nccl.get();
  backend.name = "nccl";
  return backend;
}

Result<Dataset> load_data(const Options& options) {
  if (!options.data.empty()) return load_csv_dataset(options.data);
  return load_default_dataset();
}

void announce(MllogWriter& log, const Options& options, const Split& split, const Backend& backend,
              std::int64_t start_ms) {
  log.at(start_ms, MllogEventType::kIntervalStart, mllog_key::kInitStart, nullptr, nlohmann::json::object());
  log.point(mllog_key::kSubmissionBenchmark, "railyard_digits_mlp",
            {{"dataset", split.train.name}, {"data_source", split.train.source}});
  log.point(mllog_key::kSubmissionOrg, "railyard");
  log.point(mllog_key::kSubmissionDivision, "open");
  log.point(mllog_key::kSubmissionStatus, "research");
  log.point(mllog_key::kSubmissionPlatform, backend.name + " x" + std::to_string(backend.collective->size()),
            {{"backend", backend.name}, {"world_size", backend.collective->size()}});
  log.point(mllog_key::kGlobalBatchSize, options.train.batch_size);
  log.point(mllog_key::kLearningRate, options.train.learning_rate);
  log.point(mllog_key::kSeed, options.train.seed);
  log.point(mllog_key::kTrainSamples, split.train.rows());
  log.point(mllog_key::kEvalSamples, split.eval.rows());
  log.end(mllog_key::kInitStop);
  std::cout << "railyard-train: dataset " << split.train.name << " ("
            << split.train.rows() + split.eval.rows() << " samples: " << split.train.rows() << " train, "
            << split.eval.rows() << " eval) from " << split.train.source << "; backend " << backend.name
            << ", " << backend.collective->size() << (backend.collective->size() == 1 ? " rank" : " ranks")
            << std::endl;
}

Result<std::unique_ptr<GradientEngine>> make_engine(Backend& backend, const MlpShape& shape,
                                                    const Dataset& train, std::vector<float> params) {
  if (backend.nccl) {
    auto engine = NcclEngine::create(*backend.nccl, shape, train, params);
    if (!engine) return engine.error();
    return std::unique_ptr<GradientEngine>(std::move(engine).value());
  }
  return std::unique_ptr<GradientEngine>(new CpuEngine(shape, train, std::move(params), *backend.collective));
}

int report(const TrainOutcome& outcome, const Options& options, const Collective& collective) {
  const std::string checksum = checksum_hex(model_checksum(outcome.params));
  std::fprintf(stderr, "railyard-train: rank %d of %d model_checksum=%s epoch=%d\n", collective.rank(),
               collective.size(), checksum.c_str(), outcome.last_epoch);
  std::fflush(stderr);
  if (collective.rank() == 0) {
    const char* what = outcome.status == RunStatus::kSuccess   ? "success"
                       : outcome.status == RunStatus::kAborted ? "aborted (target not reached)"
                                                               : "stopped (--max-epochs-this-run), resumable";
    std::printf(
        "railyard-train: %s: epoch %d eval_accuracy %.4f (target %.4f); wall since run_start %.3f s, "
        "training %.3f s; model_checksum=%s\n",
        what, outcome.last_epoch, outcome.accuracy, options.train.target_accuracy,
        static_cast<double>(outcome.run_stop_ms - outcome.run_start_ms) / 1000.0, outcome.elapsed_s,
        checksum.c_str());
    std::fflush(stdout);
  }
  return outcome.status == RunStatus::kAborted ? kExitNotReached : 0;
}

Result<int> train_on(Backend& backend, const Options& options, std::int64_t start_ms) {
  auto data = load_data(options);
  if (!data) return data.error();
  const Split split = split_dataset(*data, 0.2, 0x5eed);
  std::unique_ptr<MllogWriter> log;
  if (backend.collective->rank() == 0) {
    log = std::make_unique<MllogWriter>(std::cout);
    announce(*log, options, split, backend, start_ms);
  }
  TrainSetup setup{&split, shape_for(split.train, options.hidden), backend.collective, nullptr, log.get(), {},
                   {}};
  setup.identity = Checkpoint{0, 0, 0, options.train.seed, split.train.name, setup.shape, {}};
  if (!options.train.checkpoint_dir.empty()) {
    auto resumed =
        load_and_share_checkpoint(*backend.collective, options.train.checkpoint_dir, setup.identity);
    if (!resumed) return resumed.error();
    setup.resumed = std::move(resumed).value();
  }
  auto params = setup.resumed ? setup.resumed->params : init_parameters(setup.shape, options.train.seed);
  auto engine = make_engine(backend, setup.shape, split.train, std::move(params));
  if (!engine) return engine.error();
  setup.engine = engine->get();
  auto outcome = train(options.train, setup);
  if (!outcome) return outcome.error();
  return report(*outcome, options, *backend.collective);
}

int parse_options(int argc, char** argv, Options& o) {
  CLI::App app{"railyard-train: data-parallel MLP training on the 8x8 digits, with MLPerf logging"};
  app.add_option("--backend", o.backend, "mpi (CPU, MPI_Allreduce) or nccl (GPU, ncclAllReduce)")
      ->check(CLI::IsMember({"mpi", "nccl"}));
  app.add_option("--target-accuracy", o.train.target_accuracy,
                 "stop with status success at this eval accuracy");
  app.add_option("--epochs", o.train.epochs, "stop with status aborted after this many epochs")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.train.batch_size, "global batch size")->check(CLI::PositiveNumber);
  app.add_option("--lr", o.train.learning_rate, "SGD learning rate")->check(CLI::PositiveNumber);
  app.add_option("--hidden", o.hidden, "hidden units")->check(CLI::Range(1, 4096));
  app.add_option("--checkpoint-dir", o.train.checkpoint_dir,
                 "save here, and resume from here when a checkpoint exists");
  app.add_option("--checkpoint-every", o.train.checkpoint_every, "epochs between checkpoints")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.train.seed, "seed of initialisation and shuffling");
  app.add_option("--data", o.data, "CSV (or .csv.gz): features..., integer label last");
  app.add_option("--max-epochs-this-run", o.train.max_epochs_this_run,
                 "stop after this many epochs without run_stop (emulates preemption; for tests)")
      ->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0
                            : kExitUsage;  // --help is 0; CLI11's own codes (105, ...) become "bad arguments"
  }
  return -1;
}

int run(int argc, char** argv) {
  const std::int64_t start_ms = MllogWriter::system_clock_ms();
  Options options;
  if (const int code = parse_options(argc, argv, options); code >= 0) return code;
  auto launch = detect_launch();
  Failure failure{kExitRuntime, ""};
  auto backend = !launch                     ? Result<Backend>(launch.error())
                 : options.backend == "nccl" ? open_nccl(*launch, &argc, &argv, failure)
                                             : open_mpi(*launch, &argc, &argv);
  if (!backend) {
    if (failure.message.empty()) failure = failure_from(backend.error());
    std::fprintf(stderr, "railyard-train: %s\n", failure.message.c_str());
    return failure.exit_code;
  }
  auto code = train_on(*backend, options, start_ms);
  if (!code) {
    const Failure f = failure_from(code.error());
    std::fprintf(stderr, "railyard-train: rank %d: %s\n", backend->collective->rank(), f.message.c_str());
    return f.exit_code;
  }
  return *code;
}

}  // namespace
}  // namespace railyard::workloads

int main(int argc, char** argv) { return railyard::workloads::run(argc, argv); }
