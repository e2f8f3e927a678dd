#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <set>

#include "scheduler/queue/fairshare.hpp"
#include "scheduler/queue/priority.hpp"
#include "scheduler/tests/harness.hpp"

namespace railyard::sched {
namespace {

using testing::Harness;
using testing::spec_gpus;

TEST(Queue, StrictOrderWithoutBackfillBlocksSmallJobsBehindTheHead) {
  auto h = Harness::fat_tree(2, 2);
  h.run(spec_gpus(8, 100), h.gpus_of(0, 0, 8));
  h.snapshot().config.backfill = false;
  JobId big = h.submit(spec_gpus(16), 0);
  JobId small = h.submit(spec_gpus(1, 10), 1);
  auto plan = h.plan();
  EXPECT_TRUE(plan.starts.empty());
  EXPECT_EQ(Harness::find_pending(plan, small)->reason, PendingReason::kPriority);
  EXPECT_EQ(Harness::find_pending(plan, big)->estimated_start, 100);
}

TEST(Queue, BackfillStartsAShortJobThatEndsBeforeTheReservation) {
  auto h = Harness::fat_tree(2, 2);
  h.run(spec_gpus(8, 100), h.gpus_of(0, 0, 8));    // node 0 busy until t=100
  JobId big = h.submit(spec_gpus(16, 1000), 0);     // needs both nodes: reserved at t=100
  JobId short_job = h.submit(spec_gpus(8, 50), 1);  // node 1, ends at 50 < 100: backfills
  auto plan = h.plan();
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].job, big);
  EXPECT_EQ(plan.reservations[0].start_time, 100);
  EXPECT_EQ(Harness::find_pending(plan, big)->estimated_start, 100);
  ASSERT_NE(Harness::find_start(plan, short_job), nullptr);
}

TEST(Queue, BackfillRefusesAJobThatWouldDelayTheReservation) {
  auto h = Harness::fat_tree(2, 2);
  h.run(spec_gpus(8, 100), h.gpus_of(0, 0, 8));
  JobId big = h.submit(spec_gpus(16, 1000), 0);
  JobId long_job = h.submit(spec_gpus(8, 500), 1);  // node 1 is free now, but would hold it until t=500
  auto plan = h.plan();
  EXPECT_TRUE(plan.starts.empty());
  const PendingInfo* info = Harness::find_pending(plan, long_job);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->reason, PendingReason::kReservation);
  EXPECT_EQ(info->estimated_start, 1100);  // after the big job's reservation ends
  ASSERT_EQ(plan.reservations.size(), 2u);
  EXPECT_EQ(plan.reservations[0].job, big);
  EXPECT_EQ(plan.reservations[1].job, long_job);
}

TEST(Queue, HigherQosGoesFirst) {
  auto h = Harness::fat_tree(1, 1);
  jobs::JobSpec low = spec_gpus(8);
  low.qos = jobs::Qos::kScavenger;
  jobs::JobSpec high = spec_gpus(8);
  high.qos = jobs::Qos::kHigh;
  JobId a = h.submit(low, 0);
  JobId b = h.submit(high, 10);
  auto plan = h.plan();
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job, b);
  EXPECT_NE(Harness::find_pending(plan, a), nullptr);
}

TEST(Queue, FairShareFavoursTheUserWhoUsedLess) {
  auto h = Harness::fat_tree(1, 1);
  h.snapshot().user_usage = {{"alice", 1e6}, {"bob", 1e3}};
  h.snapshot().project_usage = {{"alice-proj", 1e6}, {"bob-proj", 1e3}};
  JobId a = h.submit(spec_gpus(8, 3600, "alice"), 0);
  JobId b = h.submit(spec_gpus(8, 3600, "bob"), 5);
  auto plan = h.plan();
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job, b);
  EXPECT_LT(Harness::find_pending(plan, a)->priority, 10000);
}

TEST(Queue, UserAndProjectQuotasHold) {
  auto h = Harness::fat_tree(4, 4);
  h.snapshot().user_quota = {{"alice", 12}};
  h.snapshot().project_quota = {{"bob-proj", 8}};
  h.run(spec_gpus(8, 3600, "alice"), h.gpus_of(0, 0, 8));
  JobId a1 = h.submit(spec_gpus(4, 3600, "alice"), 0);  // 8 + 4 = 12: fits the quota
  JobId a2 = h.submit(spec_gpus(1, 3600, "alice"), 1);  // 13 > 12
  JobId b1 = h.submit(spec_gpus(8, 3600, "bob"), 2);
  JobId b2 = h.submit(spec_gpus(1, 3600, "bob"), 3);    // project at 8 of 8
  auto plan = h.plan();
  EXPECT_NE(Harness::find_start(plan, a1), nullptr);
  EXPECT_NE(Harness::find_start(plan, b1), nullptr);
  EXPECT_EQ(Harness::find_pending(plan, a2)->reason, PendingReason::kQuotaUser);
  EXPECT_NE(Harness::find_pending(plan, a2)->message.find("quota of user alice reached"), std::string::npos);
  EXPECT_EQ(Harness::find_pending(plan, b2)->reason, PendingReason::kQuotaProject);
}

TEST(Queue, DependenciesWaitThenStartOrFail) {
  auto h = Harness::fat_tree(2, 2);
  jobs::JobSpec s = spec_gpus(1);
  s.afterok = {812};
  JobId waits = h.submit(s);
  jobs::JobSpec t = spec_gpus(1);
  t.afterok = {813};
  JobId fails = h.submit(t);
  jobs::JobSpec u = spec_gpus(1);
  u.afterok = {814};
  JobId ok = h.submit(u);
  h.snapshot().dependencies = {{{jobs::Dependency::Type::kAfterOk, 813}, DependencyState::kNeverSatisfied},
                               {{jobs::Dependency::Type::kAfterOk, 814}, DependencyState::kSatisfied}};
  auto plan = h.plan();
  EXPECT_EQ(Harness::find_pending(plan, waits)->message, "waits for job 812");
  ASSERT_EQ(plan.rejected.size(), 1u);
  EXPECT_EQ(plan.rejected[0].job, fails);
  EXPECT_NE(Harness::find_start(plan, ok), nullptr);
}

TEST(Queue, HeldJobsStayPending) {
  auto h = Harness::fat_tree(1, 1);
  JobId id = h.submit(spec_gpus(1));
  h.snapshot().pending.back().held = true;
  auto plan = h.plan();
  EXPECT_TRUE(plan.starts.empty());
  EXPECT_EQ(Harness::find_pending(plan, id)->reason, PendingReason::kHeld);
}

TEST(Preemption, HighJobPreemptsExactlyEnoughScavengerWork) {
  auto h = Harness::fat_tree(2, 2);
  jobs::JobSpec scav = spec_gpus(4, 3600, "carol");
  scav.qos = jobs::Qos::kScavenger;
  std::vector<JobId> victims;
  for (NodeId n = 0; n < 2; ++n)
    for (int half = 0; half < 2; ++half) victims.push_back(h.run(scav, h.gpus_of(n, half * 4, 4)));
  jobs::JobSpec high = spec_gpus(4);
  high.qos = jobs::Qos::kHigh;
  JobId id = h.submit(high);
  auto plan = h.plan();
  const Placement* p = Harness::find_start(plan, id);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->preempts.size(), 1u);  // one 4-GPU victim, not more
  EXPECT_EQ(p->gpus.size(), 4u);
}

TEST(Preemption, EightGpusTakeBothVictimsOfOneNode) {
  auto h = Harness::fat_tree(2, 2);
  jobs::JobSpec scav = spec_gpus(4, 3600, "carol");
  scav.qos = jobs::Qos::kScavenger;
  h.run(scav, h.gpus_of(0, 0, 4));
  h.run(scav, h.gpus_of(0, 4, 4));
  h.run(scav, h.gpus_of(1, 0, 4));
  h.run(spec_gpus(4, 3600, "dave"), h.gpus_of(1, 4, 4));  // normal QoS: never a victim
  jobs::JobSpec high = spec_gpus(8);
  high.qos = jobs::Qos::kHigh;
  JobId id = h.submit(high);
  auto plan = h.plan();
  const Placement* p = Harness::find_start(plan, id);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->preempts, (std::vector<JobId>{1, 2}));
  EXPECT_EQ(p->nodes, std::vector<NodeId>{0});
}

TEST(Preemption, NormalJobsNeverPreempt) {
  auto h = Harness::fat_tree(1, 1);
  jobs::JobSpec scav = spec_gpus(8, 3600, "carol");
  scav.qos = jobs::Qos::kScavenger;
  h.run(scav, h.gpus_of(0, 0, 8));
  h.submit(spec_gpus(8));
  auto plan = h.plan();
  EXPECT_TRUE(plan.starts.empty());
}

TEST(FairShareLedger, DecaysByHalfEveryHalfLife) {
  FairShareLedger l(100);
  l.add("u", "p", 1000, 0);
  l.decay_to(100);
  EXPECT_NEAR(l.users().at("u"), 500, 1e-9);
  l.add("u", "p", 10, 200);
  EXPECT_NEAR(l.users().at("u"), 260, 1e-9);
  l.decay_to(150);  // backwards: ignored
  EXPECT_NEAR(l.projects().at("p"), 260, 1e-9);
  l.add("v", "p", 100, 100);  // used a half-life before the ledger's time: half of it counts
  EXPECT_NEAR(l.users().at("v"), 50, 1e-9);
  EXPECT_NEAR(l.projects().at("p"), 310, 1e-9);
  EXPECT_EQ(l.as_of(), 200);
}

// The parties are those with usage and those with a pending job; each one's share is its shares over all of
// theirs; the factor is 2^(-usage share / share).
TEST(FairShares, PartiesSharesAndFactors) {
  auto h = Harness::fat_tree(4, 2);
  h.submit(spec_gpus(8, 3600, "bob"));
  const std::unordered_map<std::string, double> usage = {{"ada", 300}, {"carol", 100}};
  const auto equal = fair_shares(usage, {}, h.snapshot().pending, true);
  ASSERT_EQ(equal.size(), 3u);
  EXPECT_DOUBLE_EQ(equal.at("ada").share, 1.0 / 3);
  EXPECT_DOUBLE_EQ(equal.at("ada").usage_share, 0.75);
  EXPECT_DOUBLE_EQ(equal.at("ada").factor, std::exp2(-0.75 * 3));
  EXPECT_DOUBLE_EQ(equal.at("bob").factor, 1.0) << "no usage: factor 1";
  EXPECT_EQ(equal.at("bob").pending_jobs, 1);
  EXPECT_EQ(equal.at("ada").pending_jobs, 0);
  const auto weighted = fair_shares(usage, {{"ada", 6}, {"dave", 50}}, h.snapshot().pending, true);
  EXPECT_EQ(weighted.count("dave"), 0u) << "shares alone do not make a party";
  EXPECT_DOUBLE_EQ(weighted.at("ada").share, 0.75);
  EXPECT_DOUBLE_EQ(weighted.at("ada").factor, 0.5) << "used exactly its share";
  EXPECT_DOUBLE_EQ(weighted.at("carol").share, 0.125);
  EXPECT_DOUBLE_EQ(weighted.at("carol").factor, std::exp2(-0.25 / 0.125));
  const auto nobody = fair_shares({}, {}, h.snapshot().pending, true);
  EXPECT_DOUBLE_EQ(nobody.at("bob").factor, 1.0);
}

TEST(FairShareLedger, DecayedUseIsTheIntegralOfDecayedSeconds) {
  FairShareLedger l(100);
  // A GPU for a whole half-life: each second decayed to the end, 100/ln2 * (1 - 1/2).
  EXPECT_NEAR(l.decayed_use(1, 0, 100), 100 / std::numbers::ln2 / 2, 1e-9);
  // Short runs count almost undecayed; eight GPUs count eight times one.
  EXPECT_NEAR(l.decayed_use(1, 0, 1), 1, 0.01);
  EXPECT_NEAR(l.decayed_use(8, 50, 150), 8 * l.decayed_use(1, 0, 100), 1e-9);
  // Split at any point and decayed to the end, the parts make the whole.
  EXPECT_NEAR(l.decayed_use(4, 0, 60) * std::exp2(-40.0 / 100) + l.decayed_use(4, 60, 100), l.decayed_use(4, 0, 100),
              1e-9);
  EXPECT_EQ(l.decayed_use(4, 10, 10), 0);
}

// Removed nodes (NodeHealth::kRemoved) are out of the capacity a job can ever get while they stay removed:
// a job beyond the rest waits with that reason (not "resources", not rejected: an admin may resume them).
TEST(Queue, AJobBeyondTheNodesNotRemovedWaitsSayingSo) {
  auto h = Harness::fat_tree(4, 2);  // 4 nodes x 8 GPUs
  h.snapshot().config.explain = true;
  const JobId whole = h.submit(spec_gpus(32));
  h.snapshot().health.assign(4, NodeHealth::kUp);
  h.snapshot().health[3] = NodeHealth::kRemoved;
  Plan p = h.plan();
  EXPECT_TRUE(p.rejected.empty());
  EXPECT_EQ(Harness::find_start(p, whole), nullptr);
  const PendingInfo* why = Harness::find_pending(p, whole);
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->reason, PendingReason::kResources);
  EXPECT_EQ(why->message, "needs 32 GPUs and 1 node is removed: the others have 24");
  // Nodes-with-k-GPUs too: four whole nodes of 8 on three.
  jobs::JobSpec four = spec_gpus(16);
  four.nodes = 4;
  const JobId spread = h.submit(four);
  p = h.plan();
  ASSERT_NE(Harness::find_pending(p, spread), nullptr);
  EXPECT_EQ(Harness::find_pending(p, spread)->message,
            "needs 4 nodes with 4 GPUs each and 1 node is removed: the others are 3");
  // A drained node still counts (it comes back by itself once drained), and a resumed one again.
  h.snapshot().health[3] = NodeHealth::kDrain;
  p = h.plan();
  EXPECT_EQ(Harness::find_pending(p, whole)->message.find("removed"), std::string::npos)
      << Harness::find_pending(p, whole)->message;
  h.snapshot().health[3] = NodeHealth::kUp;
  p = h.plan();
  EXPECT_NE(Harness::find_start(p, whole), nullptr);
}

// A pass out of time (Snapshot::out_of_time) stops between jobs, asking once per kBudgetStride of them; it
// decides for the jobs it reached what a full pass decides, and lists the others in priority order.
TEST(Queue, APassOutOfTimeStopsBetweenJobsAndListsTheRestInPriorityOrder) {
  auto h = Harness::fat_tree(8, 4);
  h.run(spec_gpus(8, 500), h.gpus_of(0, 0, 8));
  h.run(spec_gpus(4, 900), h.gpus_of(5, 0, 4));
  const int sizes[] = {1, 2, 4, 8, 16, 32, 3};
  for (int i = 0; i < 200; ++i) h.submit(spec_gpus(sizes[i % 7], 100 + 37 * (i % 11), "user" + std::to_string(i % 5)), i % 13);
  const Plan full = h.plan();
  ASSERT_TRUE(full.unexamined.empty());
  ASSERT_FALSE(full.reservations.empty());

  int asked = 0;
  h.snapshot().out_of_time = [&] { return ++asked == 2; };
  const Plan cut = h.plan();
  EXPECT_EQ(asked, 2);
  const size_t reached = 2 * kBudgetStride;
  ASSERT_EQ(cut.unexamined.size(), 200 - reached);
  const auto order = priority_order(h.snapshot(), compute_priorities(h.snapshot()));
  std::set<JobId> first;
  for (size_t i = 0; i < reached; ++i) first.insert(h.snapshot().pending[order[i]].id);
  for (size_t i = reached; i < order.size(); ++i)
    EXPECT_EQ(cut.unexamined[i - reached], h.snapshot().pending[order[i]].id) << i;

  // The decisions for the jobs reached are the full pass's, in the same order.
  Plan reached_only = full;
  auto not_reached = [&](const auto& x) { return !first.count(x.job); };
  std::erase_if(reached_only.starts, not_reached);
  std::erase_if(reached_only.reservations, not_reached);
  std::erase_if(reached_only.pending, not_reached);
  std::erase_if(reached_only.rejected, not_reached);
  testing::expect_same_plan(reached_only, cut, "cut after " + std::to_string(reached));
  EXPECT_EQ(cut.starts.size() + cut.pending.size() + cut.rejected.size(), reached);

  asked = 0;
  h.snapshot().out_of_time = [&] { return ++asked > 100; };  // never out of time in this pass
  EXPECT_TRUE(h.plan().unexamined.empty());
  EXPECT_EQ(asked, static_cast<int>((200 - 1) / kBudgetStride));
}

}  // namespace
}  // namespace railyard::sched
