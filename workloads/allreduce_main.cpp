// railyard-allreduce: an all_reduce_perf-style bandwidth sweep (nccl-tests) over MPI or NCCL.
//   railyard-allreduce [--backend mpi|nccl] [-b 8] [-e 1M] [-f 2] [-n 20] [-w 5] [--json]
// For each size: time per allreduce (averaged over ranks), algbw = S/t, busbw = algbw * 2(n-1)/n.
// Exit codes: 0 ok, 1 runtime error or wrong results, 2 bad arguments, 3 --backend nccl without a GPU.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>

#include "workloads/allreduce_bench.hpp"
#include "workloads/bootstrap.hpp"
#include "workloads/mpi_collective.hpp"
#include "workloads/nccl_loader.hpp"

namespace railyard::workloads {
namespace {

struct Options {
  std::string backend = "mpi";
  std::string min_size = "8";
  std::string max_size;  // default depends on the backend
  double factor = 2.0;
  int iters = 20;
  int warmup = 5;
  bool json = false;
};

using Timer = std::function<Result<AllreduceTiming>(size_t bytes)>;

int fail(int exit_code, const std::string& message) {
  std::fprintf(stderr, "railyard-allreduce: %s\n", message.c_str());
  return exit_code;
}

int parse_options(int argc, char** argv, Options& o) {
  CLI::App app{"railyard-allreduce: allreduce bus bandwidth sweep (like nccl-tests' all_reduce_perf)"};
  app.add_option("--backend", o.backend, "mpi or nccl")->check(CLI::IsMember({"mpi", "nccl"}));
  app.add_option("-b,--minbytes", o.min_size, "smallest size (8, 64K, 1M, 1G)");
  app.add_option("-e,--maxbytes", o.max_size, "largest size (default 1M for mpi, 1G for nccl)");
  app.add_option("-f,--stepfactor", o.factor, "size multiplier between steps");
  app.add_option("-n,--iters", o.iters, "timed iterations per size")->check(CLI::PositiveNumber);
  app.add_option("-w,--warmup_iters", o.warmup, "untimed iterations per size")->check(CLI::NonNegativeNumber);
  app.add_flag("--json", o.json, "print a JSON list instead of a table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; CLI11's own codes (105, ...) become "bad arguments"
  }
  if (o.max_size.empty()) o.max_size = o.backend == "nccl" ? "1G" : "1M";
  return -1;
}

// Runs the sweep on every rank; rank 0 prints. Returns the exit code.
int sweep(const Options& options, const std::vector<size_t>& sizes, int rank, int world, const Timer& timer) {
  std::vector<BenchPoint> points;
  if (rank == 0 && !options.json)
    std::printf("# railyard-allreduce: %s, %d ranks\n%s\n", options.backend.c_str(), world,
                table_header().c_str());
  for (size_t bytes : sizes) {
    auto timing = timer(bytes);
    if (!timing) {
      std::fprintf(stderr, "railyard-allreduce: rank %d: %s\n", rank, timing.error().message.c_str());
      return 1;
    }
    if (timing->wrong != 0) {
      std::fprintf(stderr, "railyard-allreduce: %lld wrong elements at %zu bytes\n", timing->wrong, bytes);
      return 1;
    }
    points.push_back(make_point(bytes, timing->seconds, world));
    if (rank == 0 && !options.json) std::printf("%s\n", table_row(points.back()).c_str());
  }
  if (rank == 0 && options.json) std::cout << to_json(points).dump(2) << std::endl;
  return 0;
}

int run_mpi(const Options& options, const std::vector<size_t>& sizes, int* argc, char*** argv) {
  auto mpi = MpiCollective::init(argc, argv);
  if (!mpi) return fail(1, mpi.error().message);
  MpiCollective& c = **mpi;
  return sweep(options, sizes, c.rank(), c.size(),
               [&](size_t bytes) { return c.time_allreduce(bytes, options.iters, options.warmup); });
}

int run_nccl(const Options& options, const std::vector<size_t>& sizes, int* argc, char*** argv);

int run(int argc, char** argv) {
  Options options;
  if (const int code = parse_options(argc, argv, options); code >= 0) return code;
  auto min_bytes = parse_size(options.min_size);
  auto max_bytes = parse_size(options.max_size);
  auto sizes = min_bytes && max_bytes
                   ? bench_sizes(*min_bytes, *max_bytes, options.factor)
                   : Result<std::vector<size_t>>(min_bytes ? max_bytes.error() : min_bytes.error());
  if (!sizes) return fail(2, sizes.error().message);
  return options.backend == "nccl" ? run_nccl(options, *sizes, &argc, &argv)
                                   : run_mpi(options, *sizes, &argc, &argv);
}

// The NCCL path: the module times on the GPU; ranks average through the same communicator.
int run_nccl(const Options& options, const std::vector<size_t>& sizes, int* argc, char*** argv) {
  auto module = NcclModule::open();
  auto devices = module ? module->get()->probe() : Result<int>(module.error());
  if (!devices) return fail(kExitNoGpu, devices.error().message);
  auto launch = detect_launch();
  if (!launch) return fail(2, launch.error().message);
  std::unique_ptr<MpiCollective> mpi;
  if (launch->kind == LaunchInfo::Kind::kMpirun) {
    auto started = MpiCollective::init(argc, argv);
    if (!started) return fail(1, started.error().message);
    mpi = std::move(started).value();
  }
  const int rank = mpi ? mpi->rank() : 0;
  const int world = mpi ? mpi->size() : 1;
  NcclUniqueId id{};
  if (rank == 0) {
    auto made = (*module)->unique_id();
    if (!made) return fail(1, made.error().message);
    id = *made;
  }
  if (mpi) {
    if (auto sent = mpi->broadcast(id, 0); !sent) return fail(1, sent.error().message);
  }
  auto nccl = NcclCollective::create(*module, rank, world, local_device(*devices), id);
  if (!nccl) return fail(1, nccl.error().message);
  NcclCollective& c = **nccl;
  return sweep(options, sizes, rank, world, [&](size_t bytes) -> Result<AllreduceTiming> {
    double seconds = 0;
    long long wrong = 0;
    if (c.module()->api().bench(c.comm(), bytes, options.iters, options.warmup, &seconds, &wrong) != 0) {
      return internal_error(c.module()->last_error());
    }
    std::vector<double> tally = {seconds, static_cast<double>(wrong)};
    if (auto reduced = c.allreduce_sum(std::span<double>(tally)); !reduced) return reduced.error();
    return AllreduceTiming{tally[0] / world, static_cast<long long>(tally[1])};
  });
}

}  // namespace
}  // namespace railyard::workloads

int main(int argc, char** argv) { return railyard::workloads::run(argc, argv); }
