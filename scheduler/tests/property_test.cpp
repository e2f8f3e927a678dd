// Property tests over random workloads; each failure prints its seed so it can be replayed.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "scheduler/tests/harness.hpp"

namespace railyard::sched {
namespace {

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
