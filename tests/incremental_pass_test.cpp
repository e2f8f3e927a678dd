// Passes that examine only what can change (sched::Scheduler over a JobTable's journal, queue/pending_queue.hpp)
// against full passes (sched::schedule() on the same snapshot, every waiting job examined): on random
// workloads driven through the job lifecycle (VirtualCluster) past overload, with arrays, dependencies,
// holds, cancels, quotas and fair-share usage that moves every pass, each plan must start, reserve and
// reject exactly what the full pass does, and tell each job it examined what the full pass tells it.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "scheduler/core/cycle.hpp"
#include "scheduler/sim/virtual_cluster.hpp"
#include "tests/fat_tree.hpp"

namespace railyard::sim {
namespace {

using jobs::JobEvent;
using jobs::JobState;

using test_clusters::fat_tree;

// Counts what the comparisons covered, so the test can say its workloads reached the cases it is about.
struct Seen {
  int64_t passes = 0, skipped = 0, starts = 0, reservations = 0, rejections = 0, gated = 0, preemptions = 0;
};

// The incremental plan against the full one. Examined jobs: the incremental plan's pending list.
void expect_equal(const sched::Plan& full, const sched::Plan& inc, const std::string& where, Seen& seen) {
  ASSERT_EQ(full.starts.size(), inc.starts.size()) << where;
  for (size_t i = 0; i < full.starts.size(); ++i) {
    EXPECT_EQ(full.starts[i].job, inc.starts[i].job) << where;
    EXPECT_EQ(full.starts[i].gpus, inc.starts[i].gpus) << where;
    EXPECT_EQ(full.starts[i].preempts, inc.starts[i].preempts) << where;
    seen.preemptions += full.starts[i].preempts.empty() ? 0 : 1;
  }
  ASSERT_EQ(full.reservations.size(), inc.reservations.size()) << where;
  for (size_t i = 0; i < full.reservations.size(); ++i) {
    EXPECT_EQ(full.reservations[i].job, inc.reservations[i].job) << where;
    EXPECT_EQ(full.reservations[i].start_time, inc.reservations[i].start_time) << where;
    EXPECT_EQ(full.reservations[i].gpus, inc.reservations[i].gpus) << where;
  }
  ASSERT_EQ(full.rejected.size(), inc.rejected.size()) << where;
  for (size_t i = 0; i < full.rejected.size(); ++i) EXPECT_EQ(full.rejected[i].job, inc.rejected[i].job) << where;
  EXPECT_EQ(full.wake_at, inc.wake_at) << where;
  std::map<jobs::JobId, const sched::PendingInfo*> told;
  for (const auto& p : full.pending) told[p.job] = &p;
  for (const auto& p : inc.pending) {
    auto it = told.find(p.job);
    ASSERT_NE(it, told.end()) << where << ": job " << p.job << " pends in the incremental plan only";
    EXPECT_EQ(it->second->reason, p.reason) << where << ": job " << p.job;
    EXPECT_EQ(it->second->estimated_start, p.estimated_start) << where << ": job " << p.job;
    EXPECT_EQ(it->second->priority, p.priority) << where << ": job " << p.job;
    EXPECT_EQ(it->second->compact_since, p.compact_since) << where << ": job " << p.job;
    seen.gated += p.reason == sched::PendingReason::kHeld || p.reason == sched::PendingReason::kDependency;
  }
  seen.skipped += static_cast<int64_t>(full.pending.size() - inc.pending.size());
  seen.starts += static_cast<int64_t>(inc.starts.size());
  seen.reservations += static_cast<int64_t>(inc.reservations.size());
  seen.rejections += static_cast<int64_t>(inc.rejected.size());
  ++seen.passes;
}

// One seed: a cluster of 24 nodes (8 GPUs each, leaves of 4 or 8) driven for 60 steps.
void run_seed(uint32_t seed, Seen& seen) {
  std::mt19937 rng(seed);
  const auto c = fat_tree(24, seed % 2 == 0 ? 4 : 8);
  sched::PolicyConfig policy;
  policy.explain = seed % 3 != 0;
  policy.backfill = seed % 7 != 0;
  policy.reservation_depth = 1 + static_cast<int>(rng() % 6);
  policy.compact_wait_s = seed % 5 == 0 ? 0 : 300;
  policy.age_max_s = seed % 4 == 0 ? 0 : 600 + static_cast<int64_t>(rng() % 20000);  // some jobs reach age max
  policy.weight_size = seed % 6 == 0 ? 3000 : 0;
  VirtualCluster vc(c, policy);
  std::string where;
  vc.observe_plans([&](const sched::Snapshot& s, const sched::Plan& inc) {
    ASSERT_TRUE(s.pending_changes) << where;
    sched::Snapshot full = s;
    full.pending_changes.reset();
    expect_equal(sched::schedule(full), inc, where, seen);
  });
  const int sizes[] = {1, 1, 2, 4, 8, 8, 16, 24, 32, 64};
  const int per_step = 2 + static_cast<int>(seed % 6);  // offered load from under 1 to well over 2
  int64_t now = 1000;
  std::vector<jobs::JobId> ids;
  for (int step = 0; step < 60; ++step) {
    where = "seed " + std::to_string(seed) + " step " + std::to_string(step);
    for (int n = static_cast<int>(rng() % static_cast<uint32_t>(per_step + 1)); n > 0; --n) {
      jobs::JobSpec s;
      s.name = "j";
      s.user = "u" + std::to_string(rng() % 4);
      s.project = "p" + std::to_string(rng() % 2);
      s.gpus = sizes[rng() % 10];
      s.time_limit_s = rng() % 9 == 0 ? 0 : 60 + static_cast<int64_t>(rng() % 5000);
      const auto q = rng() % 6;
      s.qos = q == 0 ? jobs::Qos::kHigh : q == 1 ? jobs::Qos::kScavenger : jobs::Qos::kNormal;
      if (rng() % 8 == 0) s.priority = static_cast<int>(rng() % 200) - 100;
      if (!ids.empty() && rng() % 6 == 0) s.afterok.push_back(ids[rng() % ids.size()]);
      if (!ids.empty() && rng() % 12 == 0)
        s.after.push_back({jobs::Dependency::Type::kAfterAny, ids[rng() % ids.size()], -1});
      if (rng() % 10 == 0) {
        jobs::ArraySpec a;
        a.ranges.push_back({0, 2 + static_cast<int>(rng() % 10), 1});
        s.array = a;
        s.gpus = 1 + static_cast<int>(rng() % 8);
      }
      if (rng() % 40 == 0) s.gpus = 9, s.gpus_per_node = 9;  // never fits: rejected
      ids.push_back(vc.submit(s, now - static_cast<int64_t>(rng() % 50)));
    }
    // Holds, releases and cancels of random jobs (refused ones are fine).
    for (int n = static_cast<int>(rng() % 3); n > 0 && !ids.empty(); --n) {
      const auto id = ids[rng() % ids.size()];
      const auto e = rng() % 3;
      (void)vc.act(id, e == 0 ? JobEvent::kHeld : e == 1 ? JobEvent::kReleased : JobEvent::kCancelled, now);
    }
    // Jobs end: at their limit, and some early, some failed.
    std::vector<std::pair<jobs::JobId, bool>> ending;
    for (const auto& [id, r] : vc.table().jobs()) {
      if (r.state != JobState::kRunning) continue;
      const bool due = r.spec.time_limit_s > 0 && r.start_time && *r.start_time + r.spec.time_limit_s <= now;
      if (due || rng() % 10 == 0) ending.emplace_back(id, rng() % 5 == 0);
    }
    for (auto [id, failed] : ending)
      vc.finish(id, failed ? JobState::kFailed : JobState::kCompleted, failed ? 1 : 0, now);
    if (step % 15 == 7) {  // a quota, or shares, change
      lifecycle::QuotaRecord q;
      q.kind = rng() % 2 ? lifecycle::QuotaRecord::Kind::kUser : lifecycle::QuotaRecord::Kind::kProject;
      q.name = q.kind == lifecycle::QuotaRecord::Kind::kUser ? "u" + std::to_string(rng() % 4) : "p1";
      if (rng() % 2) q.gpus = 16 + static_cast<int64_t>(rng() % 64);
      q.shares = 1 + static_cast<double>(rng() % 4);
      vc.set_quota(q);
    }
    // Fair-share usage that moves every pass.
    std::unordered_map<std::string, double> users, projects;
    for (int u = 0; u < 4; ++u)
      if (rng() % 3) users["u" + std::to_string(u)] = static_cast<double>(rng() % 100000);
    projects["p0"] = static_cast<double>(rng() % 100000);
    if (rng() % 2) projects["p1"] = static_cast<double>(rng() % 100000);
    vc.pass(now, &users, &projects);
    if (::testing::Test::HasFailure()) return;
    now += 1 + static_cast<int64_t>(rng() % 700);
  }
}

// 40 seeds. The counts below say the workloads reached what the test is about: passes that skipped jobs,
// starts, reservations, rejections, held and dependent jobs, preemptions.
TEST(IncrementalPasses, EqualFullPassesOnRandomLifecycles) {
  Seen seen;
  for (uint32_t seed = 1; seed <= 40 && !HasFailure(); ++seed) run_seed(seed, seen);
  EXPECT_GT(seen.passes, 1500);
  EXPECT_GT(seen.skipped, seen.passes) << "few passes skipped any job: the workloads do not reach overload";
  EXPECT_GT(seen.starts, 1000);
  EXPECT_GT(seen.reservations, 500);
  EXPECT_GT(seen.rejections, 10);
  EXPECT_GT(seen.gated, 100);
  EXPECT_GT(seen.preemptions, 5);
  std::printf("passes %lld, jobs skipped %lld, starts %lld, reservations %lld, rejections %lld, gated %lld, "
              "preemptions %lld\n",
              static_cast<long long>(seen.passes), static_cast<long long>(seen.skipped),
              static_cast<long long>(seen.starts), static_cast<long long>(seen.reservations),
              static_cast<long long>(seen.rejections), static_cast<long long>(seen.gated),
              static_cast<long long>(seen.preemptions));
}

// Compact waits passed over (Pass::still_parked): a job whose last verdict was a compact wait without a
// reservation keeps it, without being examined, while the same verdict is certain. Jobs of 2 to 4 nodes on
// leaf groups of 4 nodes, small jobs scattering the groups, one compact reservation a pass and no reason
// messages (the case the shortcut covers). Each plan must equal the full pass's, and every compact wait the
// incremental pass left out must be what the job table already holds from the pass before: the same reason,
// estimated start (the wait's deadline) and compact_since.
TEST(IncrementalPasses, CompactWaitsPassedOverKeepTheVerdictAFullPassGives) {
  Seen seen;
  int64_t kept = 0;
  for (uint32_t seed = 1; seed <= 24 && !HasFailure(); ++seed) {
    std::mt19937 rng(seed);
    const auto c = fat_tree(48, 8);
    sched::PolicyConfig policy;
    policy.explain = false;
    policy.reservation_depth = 1;
    policy.compact_wait_share = 1 + static_cast<double>(rng() % 12);
    VirtualCluster vc(c, policy);
    std::string where;
    vc.observe_plans([&](const sched::Snapshot& s, const sched::Plan& inc) {
      sched::Snapshot full_snapshot = s;
      full_snapshot.pending_changes.reset();
      const sched::Plan full = sched::schedule(full_snapshot);
      expect_equal(full, inc, where, seen);
      std::map<jobs::JobId, const sched::PendingInfo*> examined;
      for (const auto& p : inc.pending) examined[p.job] = &p;
      for (const auto& p : full.pending) {
        if (p.reason != sched::PendingReason::kCompact || examined.count(p.job)) continue;
        const auto* r = vc.table().find(p.job);
        ASSERT_NE(r, nullptr) << where;
        if (r->reason != sched::to_string(p.reason)) continue;  // left out by the narrow phase: not this case
        EXPECT_EQ(r->estimated_start, p.estimated_start) << where << ": job " << p.job;
        EXPECT_EQ(r->compact_since, p.compact_since) << where << ": job " << p.job;
        ++kept;
      }
    });
    const int sizes[] = {1, 4, 8, 8, 24, 32, 48, 64};
    int64_t now = 1000;
    for (int step = 0; step < 150 && !HasFailure(); ++step) {
      where = "seed " + std::to_string(seed) + " step " + std::to_string(step);
      for (int n = static_cast<int>(rng() % 9); n > 0; --n) {
        jobs::JobSpec s;
        s.name = "j";
        s.user = "u" + std::to_string(rng() % 3);
        s.project = "p";
        s.gpus = sizes[rng() % 8];
        s.time_limit_s = rng() % 7 == 0 ? 0 : 600 * (1 + static_cast<int64_t>(rng() % 6));
        vc.submit(s, now);
      }
      std::vector<jobs::JobId> ending;
      for (const auto& [id, r] : vc.table().jobs()) {
        if (r.state != JobState::kRunning) continue;
        const bool due = r.spec.time_limit_s > 0 && r.start_time && *r.start_time + r.spec.time_limit_s <= now;
        if (due || rng() % 8 == 0) ending.push_back(id);
      }
      for (auto id : ending) vc.finish(id, JobState::kCompleted, 0, now);
      // Fair-share usage that moves every pass: which waiting job comes first, and so gets the one compact
      // reservation, changes.
      std::unordered_map<std::string, double> users;
      for (int u = 0; u < 3; ++u) users["u" + std::to_string(u)] = static_cast<double>(rng() % 100000);
      vc.pass(now, &users);
      now += 1 + static_cast<int64_t>(rng() % 400);
    }
  }
  EXPECT_GT(seen.passes, 500);
  EXPECT_GT(kept, 100) << "few compact waits were passed over: the workload does not reach the case";
  std::printf("passes %lld, compact waits passed over %lld\n", static_cast<long long>(seen.passes),
              static_cast<long long>(kept));
}

}  // namespace
}  // namespace railyard::sim
