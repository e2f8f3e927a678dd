// Topology queries on a 10,000-node (80,000-GPU) fat tree: 32 nodes per leaf, 16 leaves per spine group, a
// core over the 20 spine groups. Targets (issue 2): every query under 10 us, building the tree under 200 ms.
//
// Sets are whole nodes (8 GPUs each) either "compact" (consecutive nodes) or "spread" evenly over the whole
// cluster, the worst case: the set crosses the core and touches as many leaves as it has nodes.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "topology/cost.hpp"
#include "topology/generator.hpp"

namespace railyard::topology {
namespace {

const FatTreeSpec kSpec{.nodes = 10'000, .leaf_size = 32, .spine_size = 16};

const Cluster& tree() {
  static const Cluster cluster = [] {
    auto c = generate_fat_tree(kSpec);
    if (!c) {
      std::cerr << c.error().message << "\n";
      std::abort();
    }
    return std::move(c).value();
  }();
  return cluster;
}

std::vector<NodeId> node_set(const Cluster& c, int gpus, bool spread) {
  int nodes = std::max(1, gpus / c.max_gpus_per_node());
  int stride = spread ? c.node_count() / nodes : 1;
  std::vector<NodeId> out;
  for (int i = 0; i < nodes; ++i) out.push_back(i * stride);
  return out;
}

std::vector<GpuId> gpu_set(const Cluster& c, int gpus, bool spread) {
  auto ids = gpus_of_nodes(c, node_set(c, gpus, spread));
  ids.resize(std::min<size_t>(ids.size(), gpus));
  return ids;
}

void label(benchmark::State& state) {
  state.SetLabel(std::to_string(state.range(0)) + " GPUs, " + (state.range(1) ? "spread" : "compact"));
}

void BM_BuildFatTree10k(benchmark::State& state) {
  for (auto _ : state) {
    auto c = generate_fat_tree(kSpec);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_BuildFatTree10k)->Unit(benchmark::kMillisecond);

void BM_SmallestDomain(benchmark::State& state) {
  auto gpus = gpu_set(tree(), static_cast<int>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(tree().smallest_domain(gpus));
  label(state);
}
BENCHMARK(BM_SmallestDomain)->ArgsProduct({{8, 64, 512}, {0, 1}});

void BM_LeavesSpanned(benchmark::State& state) {
  auto nodes = node_set(tree(), static_cast<int>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(tree().leaves_spanned(nodes));
  label(state);
}
BENCHMARK(BM_LeavesSpanned)->ArgsProduct({{8, 64, 512, 4096}, {0, 1}});

void BM_EstimateAllreduce(benchmark::State& state) {
  auto gpus = gpu_set(tree(), static_cast<int>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(estimate_allreduce(tree(), gpus, 1e9));
  label(state);
}
BENCHMARK(BM_EstimateAllreduce)->ArgsProduct({{8, 64, 512, 4096}, {0, 1}});

}  // namespace
}  // namespace railyard::topology

BENCHMARK_MAIN();
