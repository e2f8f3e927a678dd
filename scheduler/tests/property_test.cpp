// Property tests over random workloads; each failure prints its seed so it can be replayed.
#include <deque>
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>
#include <span>
#include <string>

#include "scheduler/tests/harness.hpp"

namespace railyard::sched {
namespace {

using testing::expect_same_plan;
using testing::Harness;
using testing::spec_gpus;

// A random cluster state: running jobs packed onto random free GPUs, and a random pending queue.
Harness random_workload(uint32_t seed, bool backfill) {
  std::mt19937 rng(seed);
  auto h = Harness::fat_tree(16, 4);
  h.snapshot().config.backfill = backfill;
  h.snapshot().now = 1000;
  std::vector<char> busy(h.cluster().gpu_count(), 0);
  const int sizes[] = {1, 1, 2, 4, 8, 8, 16, 32};
  std::uniform_int_distribution<int> pick(0, 7), limit(10, 2000), coin(0, 3);
  for (int i = 0; i < 12; ++i) {  // running jobs on single nodes with room
    int k = std::min(8, sizes[pick(rng)]);
    NodeId n = static_cast<NodeId>(rng() % h.cluster().node_count());
    std::vector<GpuId> gpus;
    for (int g = 0; g < 8 && static_cast<int>(gpus.size()) < k; ++g)
      if (!busy[h.cluster().node(n).first_gpu + g]) gpus.push_back(h.cluster().node(n).first_gpu + g);
    if (static_cast<int>(gpus.size()) < k) continue;
    for (GpuId g : gpus) busy[g] = 1;
    jobs::JobSpec s = spec_gpus(k, limit(rng), "r" + std::to_string(i % 3));
    if (coin(rng) == 0) s.qos = jobs::Qos::kScavenger;
    h.run(s, gpus, 1000 - static_cast<int64_t>(rng() % 500));
  }
  for (int i = 0; i < 40; ++i) {
    jobs::JobSpec s = spec_gpus(sizes[pick(rng)], limit(rng), "u" + std::to_string(rng() % 4));
    int q = coin(rng);
    s.qos = q == 0 ? jobs::Qos::kHigh : q == 1 ? jobs::Qos::kScavenger : jobs::Qos::kNormal;
    h.submit(s, static_cast<int64_t>(rng() % 1000));
  }
  return h;
}

void expect_no_gpu_twice_and_whole_gangs(Harness& h, const Plan& plan, uint32_t seed) {
  std::set<GpuId> held;
  std::set<JobId> preempted;
  for (const auto& st : plan.starts) preempted.insert(st.preempts.begin(), st.preempts.end());
  for (const auto& r : h.snapshot().running)
    if (!preempted.count(r.id)) held.insert(r.gpus.begin(), r.gpus.end());
  for (const auto& st : plan.starts) {
    auto it = std::find_if(h.snapshot().pending.begin(), h.snapshot().pending.end(),
                           [&](const PendingJob& p) { return p.id == st.job; });
    ASSERT_NE(it, h.snapshot().pending.end()) << "seed " << seed;
    EXPECT_EQ(static_cast<int>(st.gpus.size()), it->spec->total_gpus()) << "gang not whole, seed " << seed;
    for (GpuId g : st.gpus) EXPECT_TRUE(held.insert(g).second) << "GPU " << g << " allocated twice, seed " << seed;
  }
}

TEST(Property, NoGpuTwiceGangsWholeAndDeterministic) {
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    for (bool backfill : {true, false}) {
      auto h = random_workload(seed, backfill);
      Plan a = h.plan();
      expect_no_gpu_twice_and_whole_gangs(h, a, seed);
      Plan b = h.plan();
      ASSERT_EQ(a.starts.size(), b.starts.size()) << "seed " << seed;
      for (size_t i = 0; i < a.starts.size(); ++i) {
        EXPECT_EQ(a.starts[i].job, b.starts[i].job) << "seed " << seed;
        EXPECT_EQ(a.starts[i].gpus, b.starts[i].gpus) << "seed " << seed;
      }
      ASSERT_EQ(a.reservations.size(), b.reservations.size()) << "seed " << seed;
      // Every pending job is accounted for exactly once.
      EXPECT_EQ(a.starts.size() + a.pending.size() + a.rejected.size(), h.snapshot().pending.size()) << "seed " << seed;
    }
  }
}

// The persistent Scheduler (the simulator's path) reuses its usage buffers across passes; its plans must
// be exactly those of a fresh sched::schedule() on every snapshot of an evolving cluster: jobs start, end
// out of order (swap-and-pop, as the simulator does), MIG slices come and go, nodes drain and come back,
// the shell copies every job anew (as the daemon's snapshot does), a running job's time limit changes.
TEST(Property, PersistentSchedulerPlansEqualFreshPasses) {
  const int sizes[] = {1, 2, 4, 8, 8, 16, 24, 32};
  std::deque<jobs::JobSpec> changed_specs;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    auto h = random_workload(seed, seed % 3 != 0);
    h.snapshot().config.explain = seed % 2 == 0;
    Scheduler scheduler;
    for (int step = 0; step < 20; ++step) {
      const std::string where = "seed " + std::to_string(seed) + " step " + std::to_string(step);
      Plan fresh = schedule(h.snapshot());
      Plan kept = scheduler.schedule(h.snapshot());
      expect_same_plan(fresh, kept, where);
      h.apply(fresh);
      auto& snap = h.snapshot();
      for (int done = static_cast<int>(rng() % 4); done > 0 && !snap.running.empty(); --done) {
        const size_t pos = rng() % snap.running.size();
        snap.running[pos] = std::move(snap.running.back());
        snap.running.pop_back();
      }
      if (rng() % 4 == 0) {
        std::vector<RunningJob> copy;
        for (const RunningJob& r : snap.running)
          copy.push_back({r.id, r.spec, std::vector<GpuId>(r.gpus), r.slices, r.start_time});
        snap.running = std::move(copy);
      }
      if (!snap.running.empty() && rng() % 3 == 0) {  // a new spec and GPU buffer, as Scheduler's contract asks
        RunningJob& r = snap.running[rng() % snap.running.size()];
        changed_specs.push_back(*r.spec);
        changed_specs.back().time_limit_s += 1 + static_cast<int64_t>(rng() % 5000);
        r.spec = &changed_specs.back();
        r.gpus = std::vector<GpuId>(r.gpus);
      }
      for (int added = static_cast<int>(rng() % 5); added > 0; --added) {
        jobs::JobSpec s = spec_gpus(sizes[rng() % 8], 10 + static_cast<int64_t>(rng() % 2000), "u" + std::to_string(rng() % 4));
        if (rng() % 6 == 0) s.gpus = 1, s.mig = "1g.10gb";
        if (rng() % 5 == 0) s.qos = jobs::Qos::kHigh;
        h.submit(s, snap.now);
      }
      if (rng() % 5 == 0) {
        snap.health.assign(static_cast<size_t>(h.cluster().node_count()), NodeHealth::kUp);
        snap.health[rng() % snap.health.size()] = NodeHealth::kDrain;
      } else if (rng() % 5 == 0) {
        snap.health.clear();
      }
      snap.now += 1 + static_cast<int64_t>(rng() % 600);
    }
  }
}

// Thirty seeds of twelve steps on 16 nodes in 4 leaf groups (non-blocking on even seeds, 2:1 on odd ones),
// where multi-node jobs wait for compact placements: each step submits fewer than `max_added` jobs of
// `sizes`, takes the plan `step` returns (the place to compare two ways of planning the same snapshot),
// applies it and moves the clock on, ending the jobs due.
void compact_steps(std::span<const int> sizes, int max_added,
                   const std::function<Plan(Harness&, const std::string& where)>& step) {
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    std::mt19937 rng(seed);
    auto h = Harness::fat_tree(16, 4, "dgx-h100", seed % 2 == 0 ? 1.0 : 2.0);
    h.snapshot().config.compact_wait_share = 0.5 + static_cast<double>(rng() % 4);
    for (int i = 0; i < 12; ++i) {
      for (int added = static_cast<int>(rng() % static_cast<uint32_t>(max_added)); added > 0; --added)
        h.submit(spec_gpus(sizes[rng() % sizes.size()], 60 + static_cast<int64_t>(rng() % 3000),
                           "u" + std::to_string(rng() % 3)),
                 h.snapshot().now);
      h.apply(step(h, "seed " + std::to_string(seed) + " step " + std::to_string(i)));
      auto& snap = h.snapshot();
      snap.now += 30 + static_cast<int64_t>(rng() % 900);
      std::erase_if(snap.running, [&](const RunningJob& r) { return r.expected_end() <= snap.now; });
    }
  }
}

// Reason messages are optional (PolicyConfig::explain, off in the simulator), and so is asking the cost model
// whether a compact wait buys speed while its answer cannot change the job's fate: with explain off a plan
// has the same starts, reservations, reasons and estimated starts (only messages, whether "resources" is
// "reservation", and wake_at may differ),
// through compact waits begun in earlier steps, on a non-blocking and a 2:1 tree.
TEST(Property, ExplainChangesNoDecision) {
  const int sizes[] = {8, 16, 16, 24, 32, 40};
  int compact = 0;
  compact_steps(sizes, 4, [&](Harness& h, const std::string& where) {
    h.snapshot().config.explain = true;
    const Plan told = h.plan();
    h.snapshot().config.explain = false;
    Plan quiet = h.plan();
    Plan told_quiet = told;
    for (Plan* plan : {&quiet, &told_quiet}) {
      for (auto& p : plan->pending) {
        p.message.clear();
        // Telling "reservation" (would fit, but not before a reservation) from "resources" takes one more
        // placement, made only for the message.
        if (p.reason == PendingReason::kReservation) p.reason = PendingReason::kResources;
      }
    }
    expect_same_plan(told_quiet, quiet, where);
    for (const auto& p : told.pending) compact += p.reason == PendingReason::kCompact ? 1 : 0;
    return told;
  });
  EXPECT_GT(compact, 20) << "the workload must make jobs wait for compact placements";
}

// The search shortcuts (PolicyConfig::search_shortcuts: a count check before a compact reservation search,
// and a placement reused for the next job of the same shape while nothing changed) make the same plans as
// none: same starts on the same GPUs, reservations, reasons and estimated starts, through compact waits
// begun in earlier steps. Few sizes and many jobs, so shapes repeat within a pass, among reservations.
TEST(Property, SearchShortcutsChangeNoPlan) {
  const int sizes[] = {8, 16, 16, 24, 32, 64};
  int compact = 0, reserved = 0;
  compact_steps(sizes, 6, [&](Harness& h, const std::string& where) {
    h.snapshot().config.explain = false;
    h.snapshot().config.search_shortcuts = true;
    const Plan quick = h.plan();
    h.snapshot().config.search_shortcuts = false;
    expect_same_plan(quick, h.plan(), where);
    for (const auto& p : quick.pending) compact += p.reason == PendingReason::kCompact ? 1 : 0;
    reserved += static_cast<int>(quick.reservations.size());
    return quick;
  });
  EXPECT_GT(compact, 50) << "the workload must make jobs wait for compact placements";
  EXPECT_GT(reserved, 50) << "and hold reservations that later jobs' windows overlap or not";
}

TEST(Property, BackfillNeverDelaysTheHeadReservation) {
  int checked = 0;
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    auto h = random_workload(seed, true);
    h.snapshot().config.preemption = false;  // preemption may legitimately move the head; tested apart
    Plan plan = h.plan();
    if (plan.reservations.empty()) continue;
    const Reservation head = plan.reservations.front();
    // 1. No start overlaps the head reservation's GPUs before it begins.
    std::set<GpuId> reserved(head.gpus.begin(), head.gpus.end());
    for (const auto& st : plan.starts) {
      auto it = std::find_if(h.snapshot().pending.begin(), h.snapshot().pending.end(),
                             [&](const PendingJob& p) { return p.id == st.job; });
      const int64_t end = h.snapshot().now + it->spec->time_limit_s;
      for (GpuId g : st.gpus) {
        if (reserved.count(g)) {
          EXPECT_LE(end, head.start_time) << "seed " << seed;
        }
      }
    }
    // 2. With every start applied, the head job alone still gets a start no later than promised.
    h.apply(plan);
    auto& pending = h.snapshot().pending;
    auto keep = std::find_if(pending.begin(), pending.end(), [&](const PendingJob& p) { return p.id == head.job; });
    ASSERT_NE(keep, pending.end());
    PendingJob only = *keep;
    pending = {only};
    Plan again = h.plan();
    ASSERT_EQ(again.reservations.size(), 1u) << "seed " << seed;
    EXPECT_LE(again.reservations[0].start_time, head.start_time) << "seed " << seed;
    ++checked;
  }
  EXPECT_GT(checked, 50);  // the generator must actually produce blocked heads
}

}  // namespace
}  // namespace railyard::sched
