// Scheduling core benchmarks on a 10,000-node (80,000-GPU) fat tree (issue 3).
//   BM_PlaceOne/G: one G-GPU job placed on a 50%-fragmented cluster (placer alone, usage built once);
//                  p50/p99 over all iterations are reported as counters (microseconds).
//   BM_PassOneJob/G: a whole schedule() pass with one pending job (includes building the usage arrays); a
//                    4096-GPU job waits for a compact placement, so its pass includes that search.
//   BM_FullPass: one pass with 100,000 pending jobs whose sizes and limits come from philly_gavel.csv,
//                with backfill reservations.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <malloc.h>
#include <memory>
#include <random>
#include <sstream>

#include "scheduler/core/cycle.hpp"
#include "scheduler/placement/placer.hpp"
#include "topology/generator.hpp"

namespace railyard::sched {
namespace {

const topology::Cluster& big_cluster() {
  static const topology::Cluster c =
      topology::generate_fat_tree({.nodes = 10'000, .leaf_size = 32, .spine_size = 16}).value();
  return c;
}

struct World {
  std::deque<jobs::JobSpec> specs;
  Snapshot snap;
};

// Half the GPUs busy: every node gets a random number of busy GPUs (0..8, mean 4), as 1-GPU jobs.
void fragment(World& w, uint32_t seed) {
  const auto& c = big_cluster();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> busy(0, 8), limit(600, 86400);
  w.snap.cluster = &c;
  w.snap.now = 100'000;
  jobs::JobId id = 1'000'000;
  for (NodeId n = 0; n < c.node_count(); ++n) {
    int k = busy(rng);
    for (int g = 0; g < k; ++g) {
      jobs::JobSpec s;
      s.user = "bg" + std::to_string(n % 50);
      s.project = s.user;
      s.gpus = 1;
      s.time_limit_s = limit(rng);
      w.specs.push_back(s);
      w.snap.running.push_back({id++, &w.specs.back(), {c.node(n).first_gpu + g}, {}, w.snap.now - 100});
    }
  }
}

jobs::JobSpec job_of(int gpus, int64_t limit, std::string user) {
  jobs::JobSpec s;
  s.user = user;
  s.project = std::move(user);
  s.gpus = gpus;
  s.time_limit_s = limit;
  return s;
}

void BM_PlaceOne(benchmark::State& state) {
  World w;
  fragment(w, 7);
  NodeClasses classes(big_cluster());
  ClusterUsage usage(big_cluster(), classes, {});
  for (size_t i = 0; i < w.snap.running.size(); ++i) usage.take(w.snap.running[i].gpus, static_cast<int32_t>(i));
  jobs::JobSpec spec = job_of(static_cast<int>(state.range(0)), 3600, "bench");
  Request req = make_request(spec, big_cluster(), classes).value();
  req.window = {w.snap.now, w.snap.now + 3600};
  std::vector<double> us;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto choice = place_topology(usage, req);
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(choice);
    if (!choice) state.SkipWithError("did not fit");
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
}
BENCHMARK(BM_PlaceOne)->Arg(1)->Arg(8)->Arg(64)->Arg(512)->Arg(4096)->Unit(benchmark::kMicrosecond);

void BM_PassOneJob(benchmark::State& state) {
  World w;
  fragment(w, 7);
  w.specs.push_back(job_of(static_cast<int>(state.range(0)), 3600, "bench"));
  w.snap.pending.push_back({1, &w.specs.back(), w.snap.now, false});
  size_t started = 0;
  for (auto _ : state) {
    Plan p = schedule(w.snap);
    // A multi-node job that fits now only across more leaf groups than its minimum waits for a compact
    // placement (the compact wait): that pass also searches its compact reservation.
    const bool waits = p.pending.size() == 1 && p.pending[0].reason == PendingReason::kCompact;
    if (p.starts.size() != 1 && !waits)
      state.SkipWithError("neither started nor waiting for a compact placement");
    started = p.starts.size();
    benchmark::DoNotOptimize(p);
  }
  state.counters["started"] = static_cast<double>(started);
}
BENCHMARK(BM_PassOneJob)->Arg(1)->Arg(4096)->Unit(benchmark::kMillisecond);

// (gpus, duration) rows of the Philly trace.
std::vector<std::pair<int, int64_t>> philly_rows() {
  std::vector<std::pair<int, int64_t>> rows;
  std::ifstream in(RAILYARD_TRACES_DIR "/philly_gavel.csv");
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string f[6];
    for (auto& x : f) std::getline(ss, x, ',');
    rows.push_back({std::stoi(f[3]), std::stoll(f[2])});
  }
  return rows;
}

void BM_FullPass(benchmark::State& state) {
  World w;
  fragment(w, 11);
  auto rows = philly_rows();
  if (rows.empty()) return state.SkipWithError("philly_gavel.csv not found");
  const int pending = static_cast<int>(state.range(0));
  for (int i = 0; i < pending; ++i) {
    const auto& [gpus, duration] = rows[i % rows.size()];
    w.specs.push_back(job_of(gpus, std::max<int64_t>(60, duration), "vc" + std::to_string(i % 15)));
    w.snap.pending.push_back({i + 1, &w.specs.back(), w.snap.now - (pending - i), false});
  }
  size_t started = 0, reserved = 0;
  for (auto _ : state) {
    Plan p = schedule(w.snap);
    started = p.starts.size();
    reserved = p.reservations.size();
    benchmark::DoNotOptimize(p);
  }
  state.counters["started"] = static_cast<double>(started);
  state.counters["reservations"] = static_cast<double>(reserved);
  state.counters["running"] = static_cast<double>(w.snap.running.size());
}
BENCHMARK(BM_FullPass)->Arg(100'000)->Unit(benchmark::kMillisecond)->Iterations(3);

// Memory, measured with mallinfo2 (heap bytes in use before and after): the usage arrays per node, and a
// pending job (its spec and queue entry) as the daemon and the simulator hold it.
void BM_Memory(benchmark::State& state) {
  const auto& c = big_cluster();
  NodeClasses classes(c);
  double per_node = 0, per_job = 0;
  for (auto _ : state) {
    size_t before = mallinfo2().uordblks;
    auto usage = std::make_unique<ClusterUsage>(c, classes, std::span<const NodeHealth>{});
    per_node = static_cast<double>(mallinfo2().uordblks - before) / c.node_count();
    before = mallinfo2().uordblks;
    {
      World w;
      for (int i = 0; i < 100'000; ++i) {
        w.specs.push_back(job_of(8, 3600, "user" + std::to_string(i % 1000)));
        w.specs.back().name = "resnet50-run-" + std::to_string(i);
        w.snap.pending.push_back({i, &w.specs.back(), 0, false});
      }
      per_job = static_cast<double>(mallinfo2().uordblks - before) / 100'000;
    }
    benchmark::DoNotOptimize(usage);
  }
  state.counters["bytes_per_node"] = per_node;
  state.counters["bytes_per_pending_job"] = per_job;
}
BENCHMARK(BM_Memory)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace railyard::sched

BENCHMARK_MAIN();
