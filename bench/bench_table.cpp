// What a restart's JobTable::load costs, with and without fair-share usage rebuilt from the runs
// (JobTable::track_usage): N finished jobs of 1,000 users in 100 projects, one 8-GPU run each, on a 313-SU
// SuperPOD (10,016 nodes); and what a pass snapshot's usage costs with 10,000 jobs running, one per node
// (JobTable::usage_at). Figures in bench/RESULTS.md ("Fair-share usage").
#include <benchmark/benchmark.h>

#include <string>

#include "scheduler/lifecycle/job_table.hpp"
#include "topology/generator.hpp"

namespace railyard::lifecycle {
namespace {

constexpr double kHalfLife = 7 * 86400.0;

const topology::Cluster& cluster() {
  static const topology::Cluster c = topology::generate_superpod("dgx-h100-superpod", 313).value();
  return c;
}

std::string name(char prefix, int i) {
  std::string s(1, prefix);
  return s.append(std::to_string(i));
}

// `finished` jobs that ran for an hour each, then `running` ones still on their GPUs (one job per node, in node
// order, so the running ones never share a GPU while there are no more of them than nodes).
State history(int finished, int running) {
  State s;
  for (int i = 0; i < finished + running; ++i) {
    JobRecord r;
    r.id = i + 1;
    r.spec.user = name('u', i % 1000);
    r.spec.project = name('p', i % 100);
    r.spec.gpus = 8;
    r.submit_time = 1000 + i;
    r.start_time = 1000 + i;
    r.attempt = 1;
    const int node = i % cluster().node_count();
    for (int g = 0; g < 8; ++g) r.gpus.push_back(cluster().node(node).first_gpu + g);
    RunRecord run{r.id, 1, {}, r.gpus, {}, *r.start_time, std::nullopt, ""};
    if (i < finished) {
      r.state = jobs::JobState::kCompleted;
      r.end_time = run.end = *r.start_time + 3600;
      run.outcome = "COMPLETED";
    } else {
      r.state = jobs::JobState::kRunning;
    }
    s.jobs.push_back(std::move(r));
    s.runs.push_back(std::move(run));
  }
  return s;
}

void BM_Load(benchmark::State& state) {
  const State full = history(static_cast<int>(state.range(0)), 0);
  for (auto _ : state) {
    state.PauseTiming();
    State copy = full;
    JobTable table(cluster());
    if (state.range(1)) table.track_usage(kHalfLife);
    state.ResumeTiming();
    table.load(std::move(copy));
    benchmark::DoNotOptimize(table.usage_at(10'000'000).users.size());
  }
}
BENCHMARK(BM_Load)->ArgsProduct({{100'000}, {0, 1}})->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_UsageAt(benchmark::State& state) {
  JobTable table(cluster());
  table.track_usage(kHalfLife);
  table.load(history(10'000, static_cast<int>(state.range(0))));
  for (auto _ : state) benchmark::DoNotOptimize(table.usage_at(10'000'000).users.size());
}
BENCHMARK(BM_UsageAt)->Arg(10'000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace railyard::lifecycle

BENCHMARK_MAIN();
