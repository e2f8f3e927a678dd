// The compactness wait (PolicyConfig::compact_wait_*): a multi-node job that fits now only across more leaf
// groups than its minimum waits, holding a reservation on a compact node set, until that set frees (at most
// compact_wait_max_s) where the cost model makes it faster there or where it fills its leaf groups; where the
// fabric makes the scattered set as fast, or without a reservation, compact_wait_share × its limit, at least
// compact_wait_s.
#include <gtest/gtest.h>

#include <set>

#include "scheduler/tests/harness.hpp"

namespace railyard::sched {
namespace {

using testing::Harness;
using testing::spec_gpus;

// 4 leaf groups of 4 nodes (8 GPUs each). Busy: nodes 0,1 until t=100; 4,5 until t=200; 8-10 and 12-14
// until t=1000. Free now: 2,3 | 6,7 | 11 | 15, so a 4-node job fits now only on 2 leaf groups, and on one
// (nodes 0-3) from t=100. Leaf uplinks 2:1 unless `oversubscription` says otherwise: across leaf groups a
// job's allreduce is slower, so the wait buys it speed.
// The jobs on the nodes of `scavenger` have QoS scavenger.
Harness fragmented(int64_t compact_wait_s, int64_t compact_wait_max_s = 7 * 86400, double share = 0,
                   double oversubscription = 2, const std::set<NodeId>& scavenger = {}) {
  auto h = Harness::fat_tree(16, 4, "dgx-h100", oversubscription);
  h.snapshot().config.compact_wait_s = compact_wait_s;
  h.snapshot().config.compact_wait_max_s = compact_wait_max_s;
  h.snapshot().config.compact_wait_share = share;
  const std::pair<NodeId, int64_t> busy[] = {{0, 100},  {1, 100},   {4, 200},   {5, 200},   {8, 1000},
                                             {9, 1000}, {10, 1000}, {12, 1000}, {13, 1000}, {14, 1000}};
  for (auto [n, end] : busy) {
    jobs::JobSpec spec = spec_gpus(8, end);
    if (scavenger.contains(n)) spec.qos = jobs::Qos::kScavenger;
    h.run(spec, h.gpus_of(n, 0, 8), 0);
  }
  h.snapshot().now = 10;
  return h;
}

// Ends the running jobs whose time limit is reached at `now`, then moves the clock there.
void advance(Harness& h, int64_t now) {
  auto& running = h.snapshot().running;
  std::erase_if(running, [&](const RunningJob& r) { return r.expected_end() <= now; });
  h.snapshot().now = now;
}

// Applies `last`, moves the clock to `now` (ending the jobs due) and plans again: the shell's next pass.
Plan next_pass(Harness& h, const Plan& last, int64_t now) {
  h.apply(last);
  advance(h, now);
  return h.plan();
}

// Whether `id` pends in `plan` waiting for compactness (a job that started or pends for another reason fails
// the assertion with what it does instead, rather than ending the test binary on a null pointer).
::testing::AssertionResult waits_compact(const Plan& plan, JobId id) {
  const PendingInfo* info = Harness::find_pending(plan, id);
  if (!info) return ::testing::AssertionFailure() << "job " << id << " is not pending";
  if (info->reason != PendingReason::kCompact)
    return ::testing::AssertionFailure() << "job " << id << " pends for another reason: " << info->message;
  return ::testing::AssertionSuccess();
}

// Whether `id` starts in `plan` on `leaves` leaf groups.
::testing::AssertionResult starts_spanning(const Plan& plan, JobId id, int leaves) {
  const Placement* p = Harness::find_start(plan, id);
  if (!p) return ::testing::AssertionFailure() << "job " << id << " does not start";
  if (p->leaves_spanned != leaves)
    return ::testing::AssertionFailure() << "job " << id << " spans " << p->leaves_spanned << " leaf groups, not "
                                         << leaves;
  return ::testing::AssertionSuccess();
}

std::set<NodeId> nodes_of(const Harness& h, const std::vector<GpuId>& gpus) {
  std::set<NodeId> out;
  for (GpuId g : gpus) out.insert(h.cluster().node_of(g));
  return out;
}

TEST(CompactWait, WaitsThenStartsOnItsMinimumWhenACompactSetFrees) {
  auto h = fragmented(300);
  const JobId big = h.submit(spec_gpus(32, 3600), 10);
  Plan plan = h.plan();
  EXPECT_EQ(Harness::find_start(plan, big), nullptr);
  const PendingInfo* info = Harness::find_pending(plan, big);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->reason, PendingReason::kCompact);
  EXPECT_NE(info->message.find("waiting 90 s for 4 nodes in 1 leaf group (leaf001), reserved from t=100"),
            std::string::npos)
      << info->message;
  EXPECT_NE(info->message.find("now: 2 leaf groups, allreduce "), std::string::npos) << info->message;
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].start_time, 100);
  EXPECT_EQ(nodes_of(h, plan.reservations[0].gpus), (std::set<NodeId>{0, 1, 2, 3}));
  EXPECT_EQ(info->estimated_start, 100);
  EXPECT_EQ(plan.wake_at, 10 + 7 * 86400);
  h.apply(plan);
  EXPECT_EQ(h.snapshot().pending[0].compact_wait_since, 10);

  advance(h, 50);  // still fragmented: still waiting, on the clock started at t=10
  plan = h.plan();
  ASSERT_TRUE(waits_compact(plan, big));
  EXPECT_EQ(plan.wake_at, 10 + 7 * 86400);
  h.apply(plan);

  advance(h, 100);  // nodes 0 and 1 come back
  plan = h.plan();
  const Placement* p = Harness::find_start(plan, big);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->leaves_spanned, 1);
  EXPECT_EQ(p->min_leaves, 1);
  EXPECT_EQ(std::set<NodeId>(p->nodes.begin(), p->nodes.end()), (std::set<NodeId>{0, 1, 2, 3}));
}

TEST(CompactWait, WithAReservationItWaitsPastCompactWaitUntilTheSetFrees) {
  auto h = fragmented(60);  // the floor ends at t=70; the compact set frees at t=100
  const JobId big = h.submit(spec_gpus(32, 3600), 10);
  h.apply(h.plan());
  advance(h, 70);
  Plan plan = h.plan();
  ASSERT_EQ(Harness::find_start(plan, big), nullptr);
  ASSERT_TRUE(waits_compact(plan, big));
  h.apply(plan);
  advance(h, 100);
  plan = h.plan();
  EXPECT_TRUE(starts_spanning(plan, big, 1));
}

TEST(CompactWait, AfterItsLongestWaitStartsOnTheBestPlacementThereIs) {
  auto h = fragmented(60, 60);  // the compact set frees at t=100, after the wait ends at t=70
  const JobId big = h.submit(spec_gpus(32, 3600), 0);  // submitted earlier: the wait counts from t=10
  Plan plan = h.plan();
  ASSERT_TRUE(waits_compact(plan, big));
  EXPECT_EQ(plan.wake_at, 70);
  plan = next_pass(h, plan, 69);
  EXPECT_EQ(Harness::find_start(plan, big), nullptr);
  plan = next_pass(h, plan, 70);
  const Placement* p = Harness::find_start(plan, big);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->leaves_spanned, 2);
  EXPECT_EQ(p->min_leaves, 1);
  EXPECT_FALSE(plan.wake_at.has_value());
}

// Non-blocking leaf uplinks: on 2 leaf groups the job's allreduce is as fast, so the reservation of a job
// with a node to spare in its leaf group (3 of 4 nodes) is held for compact_wait_share × its limit, not
// until the set frees.
TEST(CompactWait, WhereTheFabricMakesTheScatteredSetAsFastTheShareOfItsLimitBoundsTheWait) {
  auto h = fragmented(60, 7 * 86400, 0.02, 1);  // 2 % of a 3,600 s limit: until t=10+72; the set frees at t=100
  const JobId big = h.submit(spec_gpus(24, 3600), 10);
  Plan plan = h.plan();
  const PendingInfo* info = Harness::find_pending(plan, big);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->reason, PendingReason::kCompact);
  EXPECT_NE(info->message.find("now: 2 leaf groups, as fast by the cost model"), std::string::npos) << info->message;
  EXPECT_NE(info->message.find("starts anyway at t=82"), std::string::npos) << info->message;
  EXPECT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(info->estimated_start, 82);
  EXPECT_EQ(plan.wake_at, 82);
  plan = next_pass(h, plan, 81);
  EXPECT_EQ(Harness::find_start(plan, big), nullptr);
  plan = next_pass(h, plan, 82);
  EXPECT_TRUE(starts_spanning(plan, big, 2));
  EXPECT_TRUE(plan.reservations.empty());
}

// A job that fills its leaf group waits for its reservation however little the share: a whole group drains
// only while kept free, and a scattered start would keep two groups from holding such a job.
TEST(CompactWait, WhereTheFabricMakesTheScatteredSetAsFastAJobFillingItsLeafGroupWaitsForItsReservation) {
  auto h = fragmented(60, 7 * 86400, 0.02, 1);  // the share alone would end the wait at t=82
  const JobId whole = h.submit(spec_gpus(32, 3600), 10);  // 4 nodes: a whole leaf group
  Plan plan = h.plan();
  const PendingInfo* info = Harness::find_pending(plan, whole);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->reason, PendingReason::kCompact);
  EXPECT_NE(info->message.find("as fast by the cost model (the job fills whole leaf groups"), std::string::npos)
      << info->message;
  EXPECT_EQ(info->estimated_start, 100);
  EXPECT_EQ(plan.wake_at, 10 + 7 * 86400);
  plan = next_pass(h, plan, 90);
  ASSERT_TRUE(waits_compact(plan, whole)) << "before its compact set frees";
  plan = next_pass(h, plan, 100);
  EXPECT_TRUE(starts_spanning(plan, whole, 1));
}

// A job filling its leaf group does not wait for a compact set freeing only after the longest wait would end
// (t=100 against 10 + 80): the share of its limit bounds the wait. Where the cost model makes the set
// faster (the 2:1 tree) it waits the longest wait for it: running jobs often end before their limits.
TEST(CompactWait, AJobFillingItsLeafGroupDoesNotWaitForASetFreeingAfterTheLongestWait) {
  for (double oversubscription : {1.0, 2.0}) {
    auto h = fragmented(20, 80, 0.01, oversubscription);  // the share: 1 % of 3,600 s, until t=10+36
    const JobId whole = h.submit(spec_gpus(32, 3600), 10);
    Plan plan = h.plan();
    const PendingInfo* info = Harness::find_pending(plan, whole);
    ASSERT_NE(info, nullptr) << oversubscription;
    EXPECT_EQ(info->reason, PendingReason::kCompact) << oversubscription;
    const int64_t end = oversubscription == 1 ? 46 : 90;
    EXPECT_EQ(info->estimated_start, end) << oversubscription;
    EXPECT_EQ(plan.wake_at, end) << oversubscription;
    EXPECT_EQ(info->message.find("waits for them to drain"), std::string::npos) << info->message;
    plan = next_pass(h, plan, end);
    EXPECT_TRUE(starts_spanning(plan, whole, 2)) << oversubscription;
  }
}

TEST(CompactWait, WhereTheFabricMakesTheScatteredSetAsFastASetFreeingWithinTheShareIsTaken) {
  auto h = fragmented(60, 7 * 86400, 1, 1);  // one limit (3,600 s) of wait; the set frees at t=100
  const JobId big = h.submit(spec_gpus(24, 3600), 10);
  Plan plan = next_pass(h, h.plan(), 90);
  ASSERT_TRUE(waits_compact(plan, big));
  plan = next_pass(h, plan, 100);
  EXPECT_TRUE(starts_spanning(plan, big, 1));
}

TEST(CompactWait, ShareOfTheLimitIsCappedByTheLongestWait) {
  for (double share : {1e6, 1e300}) {
    auto h = fragmented(60, 7 * 86400, share, 1);
    h.submit(spec_gpus(24, 3600), 10);
    EXPECT_EQ(h.plan().wake_at, 10 + 7 * 86400) << share;
  }
}

TEST(CompactWait, WhereTheFabricMakesTheScatteredSetAsFastAJobWithoutALimitWaitsForItsReservation) {
  auto h = fragmented(60, 7 * 86400, 0.02, 1);
  const JobId big = h.submit(spec_gpus(24, 0), 10);  // no limit: no share of it to bound the wait
  Plan plan = h.plan();
  ASSERT_TRUE(waits_compact(plan, big));
  EXPECT_EQ(plan.wake_at, 10 + 7 * 86400);
  plan = next_pass(h, plan, 90);  // past compact_wait_s (t=70): a job without a limit waits on
  ASSERT_TRUE(waits_compact(plan, big));
  plan = next_pass(h, plan, 100);
  EXPECT_TRUE(starts_spanning(plan, big, 1));
}

TEST(CompactWait, ZeroTurnsItOff) {
  auto h = fragmented(0);
  const JobId big = h.submit(spec_gpus(32, 3600), 10);
  Plan plan = h.plan();
  EXPECT_TRUE(starts_spanning(plan, big, 2));
  EXPECT_TRUE(plan.reservations.empty());
  EXPECT_FALSE(plan.wake_at.has_value());
}

TEST(CompactWait, TheReservationKeepsSmallJobsOffTheCompactSetButBackfillRunsAroundIt) {
  auto h = fragmented(300);
  const JobId big = h.submit(spec_gpus(32, 3600), 10);  // largest: first by the size factor
  std::vector<JobId> small;
  for (int i = 0; i < 5; ++i) small.push_back(h.submit(spec_gpus(8, 3600), 10));  // end after t=100
  const JobId quick = h.submit(spec_gpus(8, 60), 10);  // ends at t=70, before the reservation starts
  Plan plan = h.plan();
  ASSERT_TRUE(waits_compact(plan, big));
  ASSERT_FALSE(plan.reservations.empty());
  const std::set<NodeId> reserved = nodes_of(h, plan.reservations[0].gpus);
  int started = 0;
  for (JobId id : small) {
    if (const Placement* p = Harness::find_start(plan, id)) {
      ++started;
      EXPECT_FALSE(reserved.count(p->nodes[0])) << "job " << id << " on reserved node " << p->nodes[0];
    }
  }
  EXPECT_EQ(started, 4);  // nodes 6, 7, 11, 15; the fifth would need a reserved node
  const Placement* q = Harness::find_start(plan, quick);
  ASSERT_NE(q, nullptr);  // backfill: it ends before the reservation starts
  EXPECT_TRUE(reserved.count(q->nodes[0]));
}

TEST(CompactWait, SingleNodeJobsAndCompactFitsNeverWait) {
  auto h = fragmented(300);
  const JobId one = h.submit(spec_gpus(8, 3600), 10);
  const JobId two = h.submit(spec_gpus(16, 3600), 10);  // 2 nodes: one leaf group has room
  Plan plan = h.plan();
  const Placement* p1 = Harness::find_start(plan, one);
  const Placement* p2 = Harness::find_start(plan, two);
  ASSERT_NE(p1, nullptr);
  ASSERT_NE(p2, nullptr);
  EXPECT_EQ(p2->leaves_spanned, 1);
  EXPECT_TRUE(plan.reservations.empty());
  EXPECT_FALSE(plan.wake_at.has_value());
}

TEST(CompactWait, PastItsReservationBudgetAJobWaitsWithoutOne) {
  auto h = fragmented(300);
  h.snapshot().config.reservation_depth = 1;  // compact waits get this many reservations of their own
  const JobId first = h.submit(spec_gpus(32, 3600), 5);
  const JobId second = h.submit(spec_gpus(32, 3600), 10);
  Plan plan = h.plan();
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].job, first);
  const PendingInfo* info = Harness::find_pending(plan, second);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->reason, PendingReason::kCompact);  // 3 leaf groups now (6,7 | 11 | 15): it waits
  EXPECT_NE(info->message.find("no reservation"), std::string::npos) << info->message;
  EXPECT_EQ(info->estimated_start, 10 + 300);
  EXPECT_EQ(plan.wake_at, 10 + 300);
}

TEST(CompactWait, WithoutAReservationTheShareOfItsLimitBoundsTheWait) {
  auto h = fragmented(300, 7 * 86400, 0.5);
  h.snapshot().config.reservation_depth = 1;
  h.submit(spec_gpus(32, 3600), 5);
  const JobId second = h.submit(spec_gpus(32, 3600), 10);
  Plan plan = h.plan();
  const PendingInfo* info = Harness::find_pending(plan, second);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->reason, PendingReason::kCompact);
  EXPECT_EQ(info->estimated_start, 10 + 1800);  // half its 3,600 s limit, above the 300 s floor
}

TEST(CompactWait, NoReachableCompactSetMeansNoWait) {
  // 7 nodes need 2 leaf groups of 4 on an empty cluster; with a node drained in every group no 2 groups
  // ever hold 7, so no compact reservation exists and the job starts at once on 3.
  auto h = Harness::fat_tree(16, 4);
  h.snapshot().health.assign(16, NodeHealth::kUp);
  for (NodeId n : {0, 4, 8, 12}) h.snapshot().health[static_cast<size_t>(n)] = NodeHealth::kDrain;
  const JobId seven = h.submit(spec_gpus(56, 3600), 0);
  Plan plan = h.plan();
  const Placement* p = Harness::find_start(plan, seven);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->min_leaves, 2);
  EXPECT_EQ(p->leaves_spanned, 3);
}

// A high-QoS job does not wait for compactness while scavenger work stands on a compact set: it preempts
// that work (requeued by the shell) and starts on its minimum now.
TEST(CompactPreemption, AHighJobPreemptsScavengerWorkForASetOnItsMinimum) {
  auto h = fragmented(300, 7 * 86400, 0, 2, {0, 1, 8});
  jobs::JobSpec spec = spec_gpus(32, 3600);
  spec.qos = jobs::Qos::kHigh;
  const JobId high = h.submit(spec, 10);
  const Plan plan = h.plan();
  const Placement* p = Harness::find_start(plan, high);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->leaves_spanned, 1);
  EXPECT_EQ(std::set<NodeId>(p->nodes.begin(), p->nodes.end()), (std::set<NodeId>{0, 1, 2, 3}));
  // The jobs on nodes 0 and 1 (ids 1 and 2), not the one on node 8 that the set does not need.
  EXPECT_EQ(p->preempts, (std::vector<JobId>{1, 2}));
}

TEST(CompactPreemption, ANormalJobWaitsForTheSetInstead) {
  auto h = fragmented(300, 7 * 86400, 0, 2, {0, 1});
  const JobId normal = h.submit(spec_gpus(32, 3600), 10);
  const Plan plan = h.plan();
  EXPECT_TRUE(plan.starts.empty());
  ASSERT_NE(Harness::find_pending(plan, normal), nullptr);
  ASSERT_TRUE(waits_compact(plan, normal));
}

TEST(CompactPreemption, NoVictimsWhenPreemptingCannotMakeTheJobCompact) {
  // Only node 8's job is scavenger: without it leaf group 2 still holds nodes 9 and 10 busy, so no set on
  // one leaf group comes of preempting, and the high job waits for the reservation like any other.
  auto h = fragmented(300, 7 * 86400, 0, 2, {8});
  jobs::JobSpec spec = spec_gpus(32, 3600);
  spec.qos = jobs::Qos::kHigh;
  const JobId high = h.submit(spec, 10);
  const Plan plan = h.plan();
  EXPECT_TRUE(plan.starts.empty());
  ASSERT_NE(Harness::find_pending(plan, high), nullptr);
  ASSERT_TRUE(waits_compact(plan, high));
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(nodes_of(h, plan.reservations[0].gpus), (std::set<NodeId>{0, 1, 2, 3}));
}

// A high-QoS job that does not fit without preemption, and whose preemption set is scattered, waits for
// compactness as any job does, rather than preempting for the scattered set at once: 8 nodes, 6 free (two per
// leaf group but group 2's and 3's), scavenger work on nodes 8 and 12; on 2 leaf groups from t=200.
TEST(CompactPreemption, AHighJobWhosePreemptionSetIsScatteredWaitsForCompactness) {
  auto h = fragmented(300, 7 * 86400, 0, 2, {8, 12});
  jobs::JobSpec spec = spec_gpus(64, 3600);
  spec.qos = jobs::Qos::kHigh;
  const JobId high = h.submit(spec, 10);
  const Plan plan = h.plan();
  EXPECT_TRUE(plan.starts.empty());
  ASSERT_TRUE(waits_compact(plan, high));
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].start_time, 200);
  EXPECT_EQ(nodes_of(h, plan.reservations[0].gpus), (std::set<NodeId>{0, 1, 2, 3, 4, 5, 6, 7}));
  const std::string& why = Harness::find_pending(plan, high)->message;
  EXPECT_NE(why.find("now: 4 leaf groups by preempting scavenger jobs"), std::string::npos) << why;
  EXPECT_NE(why.find("; preempts them at t="), std::string::npos) << why;
}

// When that wait ends it preempts for the best placement there is.
TEST(CompactPreemption, AfterItsWaitAHighJobPreemptsForTheScatteredSet) {
  auto h = fragmented(30, 50, 0, 2, {8, 12});
  jobs::JobSpec spec = spec_gpus(64, 3600);
  spec.qos = jobs::Qos::kHigh;
  const JobId high = h.submit(spec, 10);
  const Plan first = h.plan();
  ASSERT_TRUE(waits_compact(first, high));
  const Plan later = next_pass(h, first, 60);
  ASSERT_TRUE(starts_spanning(later, high, 4));
  const Placement* p = Harness::find_start(later, high);
  EXPECT_EQ(p->preempts.size(), 2u);
}

TEST(CompactPreemption, WithPreemptionOffTheHighJobWaits) {
  auto h = fragmented(300, 7 * 86400, 0, 2, {0, 1});
  h.snapshot().config.preemption = false;
  jobs::JobSpec spec = spec_gpus(32, 3600);
  spec.qos = jobs::Qos::kHigh;
  h.submit(spec, 10);
  EXPECT_TRUE(h.plan().starts.empty());
}

}  // namespace
}  // namespace railyard::sched
