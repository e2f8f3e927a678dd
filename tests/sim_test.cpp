// The simulator driving the real core on small hand-made traces with exactly known outcomes.
// Cluster: a 4-node DGX H100 fat tree, 2 nodes per leaf (32 GPUs, 2 leaves). Unless a test is about the
// communication model, its shares are 0 so run time == trace duration.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "scheduler/sim/report.hpp"
#include "scheduler/sim/simulator.hpp"
#include "topology/cost.hpp"
#include "tests/fat_tree.hpp"

namespace railyard::sim {
namespace {

topology::Cluster small_cluster() { return test_clusters::fat_tree(4, 2); }

TraceJob job(std::string id, double submit, double duration, int gpus, std::string user = "u") {
  TraceJob j;
  j.job_id = std::move(id);
  j.submit_s = submit;
  j.duration_s = duration;
  j.gpus = gpus;
  j.user = std::move(user);
  return j;
}

SimOptions no_comm() {
  SimOptions o;
  o.comm.share_in_node = 0;
  o.comm.share_multi_node = 0;
  return o;
}

PolicySpec policy(const std::string& name) {
  auto p = policy_by_name(name);
  EXPECT_TRUE(p);
  return std::move(p).value();
}

struct Times {
  int64_t start, end;
  bool operator==(const Times&) const = default;
};
std::ostream& operator<<(std::ostream& o, const Times& t) {
  return o << "[" << t.start << ", " << t.end << ")";
}

std::map<std::string, Times> times(const SimResult& r, const std::vector<TraceJob>& trace) {
  std::map<std::string, Times> out;
  for (size_t i = 0; i < trace.size(); ++i) out[trace[i].job_id] = {r.jobs[i].first_start, r.jobs[i].end};
  return out;
}

TEST(Simulator, EqualJobsRunInArrivalOrder) {
  const auto cluster = small_cluster();
  const std::vector<TraceJob> trace = {job("a", 0, 100, 32), job("b", 1, 100, 32), job("c", 2, 100, 32)};
  for (const std::string name : {"fifo", "railyard", "first-fit"}) {
    auto t = times(simulate(cluster, trace, policy(name), no_comm()), trace);
    EXPECT_EQ(t["a"], (Times{0, 100})) << name;
    EXPECT_EQ(t["b"], (Times{100, 200})) << name;
    EXPECT_EQ(t["c"], (Times{200, 300})) << name;
  }
}

TEST(Simulator, ShortSmallJobBackfillsWithoutDelayingTheBlockedBigOne) {
  const auto cluster = small_cluster();
  // a holds 24 GPUs until 100; b needs all 32 and is reserved for 100; c (8 GPUs, ends at 52) fits in the
  // hole before the reservation; d (8 GPUs, 200 s) would delay b, so it waits for b to finish.
  const std::vector<TraceJob> trace = {job("a", 0, 100, 24), job("b", 1, 100, 32), job("c", 2, 50, 8),
                                       job("d", 3, 200, 8)};
  auto t = times(simulate(cluster, trace, policy("railyard"), no_comm()), trace);
  EXPECT_EQ(t["a"], (Times{0, 100}));
  EXPECT_EQ(t["c"], (Times{2, 52}));
  EXPECT_EQ(t["b"], (Times{100, 200}));
  EXPECT_EQ(t["d"], (Times{200, 400}));
  // Without backfill c waits behind b.
  auto f = times(simulate(cluster, trace, policy("fifo"), no_comm()), trace);
  EXPECT_EQ(f["b"], (Times{100, 200}));
  EXPECT_EQ(f["c"], (Times{200, 250}));
  EXPECT_EQ(f["d"], (Times{200, 400}));
}

TEST(Simulator, JobWaitsUntilEnoughGpusAreFree) {
  const auto cluster = small_cluster();
  const std::vector<TraceJob> trace = {job("big", 0, 100, 32), job("small", 5, 10, 8)};
  const SimResult r = simulate(cluster, trace, policy("railyard"), no_comm());
  auto t = times(r, trace);
  EXPECT_EQ(t["small"], (Times{100, 110}));
  const PolicyReport p = summarize(r, 0);
  EXPECT_DOUBLE_EQ(p.mean_wait_s, 47.5);  // (0 + 95) / 2
  EXPECT_DOUBLE_EQ(p.makespan_s, 110);
  EXPECT_DOUBLE_EQ(p.utilization, (32.0 * 100 + 8 * 10) / (32.0 * 110));
  // From 5 to 100 the 8-GPU job waits with 0 free GPUs: no fragmentation; free GPUs otherwise have no
  // waiting job.
  EXPECT_DOUBLE_EQ(p.fragmentation, 0);
}

// A high-QoS job that arrives while scavenger jobs hold every GPU preempts them at once (a pass runs though
// nothing fits by count), and each victim later finishes the work it had left.
TEST(Simulator, AHighJobPreemptsScavengersOnAFullClusterAndTheyFinishTheirWork) {
  const auto cluster = small_cluster();
  std::vector<TraceJob> trace = {job("s1", 0, 100, 16), job("s2", 0, 100, 16), job("high", 10, 50, 16)};
  trace[0].qos = trace[1].qos = jobs::Qos::kScavenger;
  trace[2].qos = jobs::Qos::kHigh;
  const SimResult r = simulate(cluster, trace, policy("railyard"), no_comm());
  auto t = times(r, trace);
  EXPECT_EQ(t["high"], (Times{10, 60}));
  EXPECT_EQ(r.preemptions, 1);
  const JobResult& victim = r.jobs[0].preemptions == 1 ? r.jobs[0] : r.jobs[1];
  EXPECT_EQ(victim.preemptions, 1);
  EXPECT_EQ(victim.first_start, 0);
  EXPECT_EQ(victim.run_s, 100);  // 10 s before, the 90 s left after
  EXPECT_EQ(victim.end, 150);    // back at 60, when the high job ends
  EXPECT_EQ(victim.qos, jobs::Qos::kScavenger);
  auto off = policy("railyard");
  off.config.preemption = false;
  auto waited = times(simulate(cluster, trace, off, no_comm()), trace);
  EXPECT_EQ(waited["high"], (Times{100, 150}));
}

TEST(Simulator, PassIntervalBatchesArrivals) {
  const auto cluster = small_cluster();
  const std::vector<TraceJob> trace = {job("a", 1, 100, 8), job("b", 3, 100, 8)};
  SimOptions o = no_comm();
  o.pass_interval_s = 10;
  const SimResult r = simulate(cluster, trace, policy("railyard"), o);
  auto t = times(r, trace);
  EXPECT_EQ(t["a"], (Times{1, 101}));
  EXPECT_EQ(t["b"], (Times{11, 111}));
  EXPECT_EQ(r.passes, 2);  // 1 and 11; at 101 and 111 nothing waits, so no pass runs
}

// The compactness wait needs a pass when it ends even if nothing else happens then (Plan::wake_at). Nodes
// 0,1 (leaf 0) and 2,3 (leaf 1); a, b, c, d take one node each (0, 1, 2, 3); c ends at 10, a at 100, so
// from 100 the 2-node job e fits only on nodes 0 and 2 (two leaf groups); the next end is at 1000.
TEST(Simulator, CompactWaitEndsWithAPassAtItsDeadline) {
  const auto cluster = small_cluster();
  const std::vector<TraceJob> trace = {job("a", 0, 100, 8), job("b", 0, 1000, 8), job("c", 0, 10, 8),
                                       job("d", 0, 1000, 8), job("e", 5, 50, 16)};
  for (const int64_t wait : {0, 20}) {
    PolicySpec p = policy("railyard");
    p.config.compact_wait_s = wait;
    p.config.compact_wait_max_s = wait;  // the compact set frees at 1000, after the wait
    const SimResult r = simulate(cluster, trace, p, no_comm());
    EXPECT_EQ(times(r, trace)["e"], (Times{100 + wait, 150 + wait})) << "wait " << wait;
    EXPECT_EQ(r.jobs[4].leaves_spanned, 2);
  }
}

TEST(Simulator, CompactPlacementHasNoSlowdownAndModelStretchesBadOnes) {
  const auto cluster = small_cluster();
  const std::vector<TraceJob> trace = {job("two-nodes", 0, 1000, 16)};
  const SimResult r = simulate(cluster, trace, policy("railyard"), SimOptions{});
  EXPECT_DOUBLE_EQ(r.jobs[0].comm_slowdown, 1.0);
  EXPECT_EQ(r.jobs[0].run_s, 1000);
  EXPECT_EQ(r.jobs[0].nodes, 2);
  EXPECT_EQ(r.jobs[0].leaves_spanned, 1);
  EXPECT_EQ(r.jobs[0].min_leaves, 1);

  CommModel m(cluster, CommParams{});
  const double ideal = m.ideal_seconds(16);
  EXPECT_GT(ideal, 0);
  EXPECT_DOUBLE_EQ(m.stretch(16, ideal), 1.0);
  EXPECT_DOUBLE_EQ(m.stretch(16, 2 * ideal), 0.7 + 0.3 * 2);
  EXPECT_DOUBLE_EQ(m.stretch(16, 100 * ideal), 0.7 + 0.3 * 4);  // clamped at max_ratio
  EXPECT_DOUBLE_EQ(m.stretch(16, 0.5 * ideal), 1.0);            // never faster than ideal
  EXPECT_DOUBLE_EQ(m.stretch(1, 123), 1.0);
  EXPECT_DOUBLE_EQ(m.allowance(4), 0.9 + 0.1 * 4);
  // Two nodes on two leaves cost more than two nodes under one leaf.
  const std::vector<topology::GpuId> split =
      topology::gpus_of_nodes(cluster, std::vector<topology::NodeId>{1, 2});
  EXPECT_GT(m.stretch(16, topology::estimate_allreduce(cluster, split, 1e9).seconds), 1.0);
}

std::vector<TraceJob> random_trace(int n, unsigned seed) {
  std::mt19937 rng(seed);
  const int sizes[] = {1, 1, 1, 2, 4, 8, 8, 16, 24, 32};
  std::vector<TraceJob> out;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += static_cast<double>(rng() % 60);
    out.push_back(job("j" + std::to_string(i), t, 1 + static_cast<double>(rng() % 500), sizes[rng() % 10],
                      "vc" + std::to_string(rng() % 3)));
  }
  return out;
}

TEST(Simulator, ConservationOnARandomTrace) {
  const unsigned seed = 20240601;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto cluster = small_cluster();
  const auto trace = random_trace(300, seed);
  for (const std::string& name : policy_names()) {
    const SimResult r = simulate(cluster, trace, policy(name), SimOptions{});
    EXPECT_EQ(r.plan_conflicts, 0) << name;
    EXPECT_EQ(r.unfinished + r.rejected, 0) << name;
    double gpu_s = 0;
    std::vector<std::pair<int64_t, int>> deltas;  // GPUs in use over time never exceed the cluster
    for (size_t i = 0; i < trace.size(); ++i) {
      const JobResult& j = r.jobs[i];
      ASSERT_GE(j.first_start, j.submit) << name << " " << trace[i].job_id;
      ASSERT_GT(j.end, j.first_start);
      EXPECT_EQ(j.preemptions, 0);
      // One start, one end: the run is exactly the stretched duration.
      EXPECT_EQ(j.run_s, j.end - j.first_start);
      EXPECT_EQ(j.run_s, static_cast<int64_t>(std::ceil(trace[i].duration_s * j.comm_slowdown - 1e-9)));
      gpu_s += static_cast<double>(j.run_s) * j.gpus;
      deltas.push_back({j.first_start, j.gpus});
      deltas.push_back({j.end, -j.gpus});
    }
    EXPECT_DOUBLE_EQ(r.busy_gpu_s, gpu_s) << name;
    std::sort(deltas.begin(), deltas.end());  // ends (negative) before starts at one time
    int in_use = 0;
    for (auto [time, d] : deltas) {
      in_use += d;
      ASSERT_LE(in_use, cluster.gpu_count()) << name << " at " << time;
    }
  }
}

TEST(Simulator, TwoRunsGiveIdenticalResults) {
  const auto cluster = small_cluster();
  const auto trace = random_trace(200, 7);
  for (const std::string& name : policy_names()) {
    const SimResult a = simulate(cluster, trace, policy(name), SimOptions{});
    const SimResult b = simulate(cluster, trace, policy(name), SimOptions{});
    ASSERT_EQ(a.jobs.size(), b.jobs.size());
    for (size_t i = 0; i < a.jobs.size(); ++i) {
      EXPECT_EQ(a.jobs[i].first_start, b.jobs[i].first_start) << name << " " << i;
      EXPECT_EQ(a.jobs[i].end, b.jobs[i].end);
      EXPECT_EQ(a.jobs[i].nodes, b.jobs[i].nodes);
      EXPECT_EQ(a.jobs[i].leaves_spanned, b.jobs[i].leaves_spanned);
      EXPECT_EQ(a.jobs[i].comm_slowdown, b.jobs[i].comm_slowdown);
    }
    EXPECT_EQ(a.passes, b.passes);
    EXPECT_EQ(a.busy_gpu_s, b.busy_gpu_s);
  }
}

TEST(Simulator, UnknownPolicyIsAnError) { EXPECT_FALSE(policy_by_name("lottery")); }

// Dependencies and arrays go through the lifecycle the daemon uses (VirtualCluster): a row waits for what
// it names, a dependency that can never be met rejects it, and an array's tasks run within its limit.
std::map<std::string, Times> by_name(const SimResult& r) {
  std::map<std::string, Times> out;
  for (const JobResult& j : r.jobs) out[j.name] = {j.first_start, j.end};
  return out;
}

TraceJob after(TraceJob j, jobs::Dependency::Type type, size_t row, int task = -1) {
  j.after.push_back({type, row, task});
  return j;
}

TEST(Simulator, ARowWaitsForItsDependencyAndOneThatCannotBeMetIsRejected) {
  using T = jobs::Dependency::Type;
  const auto cluster = small_cluster();
  TraceJob failing = job("f", 0, 50, 8);
  failing.fails = true;
  const std::vector<TraceJob> trace = {
      job("a", 0, 100, 8), failing,
      after(job("b", 0, 30, 8), T::kAfterOk, 0),       // starts when a completes
      after(job("c", 0, 30, 8), T::kAfterNotOk, 0),    // a completes: never
      after(job("d", 0, 30, 8), T::kAfterNotOk, 1),    // f fails: runs then
      after(job("e", 0, 30, 8), T::kAfterOk, 1),       // f fails: never
      after(job("g", 0, 30, 8), T::kAfterAny, 1)};     // any end
  const SimResult r = simulate(cluster, trace, policy("railyard"), no_comm());
  const auto t = by_name(r);
  EXPECT_EQ(t.at("a"), (Times{0, 100}));
  EXPECT_EQ(t.at("f"), (Times{0, 50}));
  EXPECT_EQ(t.at("b"), (Times{100, 130})) << "room at 0, but its dependency had not completed";
  EXPECT_EQ(t.at("d"), (Times{50, 80}));
  EXPECT_EQ(t.at("g"), (Times{50, 80}));
  EXPECT_EQ(t.at("c"), (Times{-1, -1}));
  EXPECT_EQ(t.at("e"), (Times{-1, -1}));
  EXPECT_EQ(r.rejected, 2);
  EXPECT_EQ(r.unfinished, 0);
  EXPECT_EQ(r.plan_conflicts, 0);
}

TEST(SimulatorArrays, EachTaskIsAJobAndTheLimitCapsHowManyRun) {
  const auto cluster = small_cluster();  // 32 GPUs: room for all four tasks at once
  TraceJob sweep = job("sweep", 0, 100, 8);
  sweep.array = *jobs::parse_array_spec("0-3%2");
  const std::vector<TraceJob> trace = {
      sweep, after(job("next", 0, 10, 8), jobs::Dependency::Type::kAfterOk, 0, 3)};  // task 3 of sweep
  const SimResult r = simulate(cluster, trace, policy("railyard"), no_comm());
  const auto t = by_name(r);
  ASSERT_EQ(r.jobs.size(), 5u) << "four tasks and the dependent row; the array itself has no result";
  EXPECT_EQ(t.at("sweep_0"), (Times{0, 100}));
  EXPECT_EQ(t.at("sweep_1"), (Times{0, 100}));
  EXPECT_EQ(t.at("sweep_2"), (Times{100, 200}));
  EXPECT_EQ(t.at("sweep_3"), (Times{100, 200}));
  EXPECT_EQ(t.at("next"), (Times{200, 210}));
}

}  // namespace
}  // namespace railyard::sim

