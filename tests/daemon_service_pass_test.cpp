// Unit tests of the daemon's Service: passes whose table changes while they run (cancel, hold, drain, GPUs
// taken), on a fake pass executor.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <stdexcept>

#include "scheduler/daemon/service.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "tests/daemon_client.hpp"
#include "tests/service_harness.hpp"
#include "topology/generator.hpp"
#include "topology/io_json.hpp"

namespace railyard {
namespace {

using namespace service_test;  // NOLINT(google-build-using-namespace): the shared harness

// A service whose passes run on a fake executor: a pass's snapshot is taken on the loop, and its plan is
// computed only when the test says so, so the test can change the table while the pass is in flight.
class InFlight {
 public:
  InFlight(const testing::TempDir& dir, std::unique_ptr<topology::Cluster> cluster)
      : cluster_(std::move(cluster)) {
    auto st = SqliteStateStore::open(dir.file("s.db"));
    if (!st) throw std::runtime_error(st.error().message);
    daemon::Loop fake{
        [this](std::function<void()> fn) { loop_.work.push_back(std::move(fn)); },
        [this](std::chrono::milliseconds, std::function<void()> fn) { loop_.work.push_back(std::move(fn)); }};
    svc = std::make_unique<daemon::Service>(*cluster_, std::move(*st), std::move(fake),
                                            [] { return int64_t{5000}; });
    svc->set_pass_executor([this](std::function<void()> fn) { worker.push_back(std::move(fn)); });
    if (!svc->open()) throw std::runtime_error("open failed");
    loop_.run();
  }
  // Submits whole-node jobs and runs the loop: committed, and a pass is in flight.
  std::vector<jobs::JobId> submit(const std::vector<int>& gpus) {
    std::vector<jobs::JobSpec> specs;
    for (int g : gpus) {
      jobs::JobSpec spec;
      spec.gpus = g;
      EXPECT_TRUE(svc->prepare(spec, kAdmin));
      specs.push_back(spec);
    }
    std::vector<jobs::JobId> ids;
    svc->submit(specs, kAdmin, [&](Result<std::vector<jobs::JobId>> r) { ids = *r; });
    loop_.run();
    return ids;
  }
  // Runs the loop's work one item at a time: false when it held none.
  bool step() {
    if (loop_.work.empty()) return false;
    auto fn = std::move(loop_.work.front());
    loop_.work.pop_front();
    fn();
    return true;
  }
  // Computes the pass in flight, leaving its apply on the loop.
  void compute_pass() {
    ASSERT_EQ(worker.size(), 1u) << "one pass in flight";
    auto fn = std::move(worker.front());
    worker.pop_front();
    fn();
  }
  // Runs what the loop holds, then computes the pass in flight and applies its plan.
  void finish_pass() {
    loop_.run();
    ASSERT_EQ(worker.size(), 1u) << "one pass in flight";
    auto fn = std::move(worker.front());
    worker.pop_front();
    fn();
    loop_.run();
  }
  const JobRecord& job(jobs::JobId id) const { return *svc->table().find(id); }
  topology::NodeId node_of(jobs::JobId id) const { return cluster_->find_node(job(id).nodes.at(0)); }

  static inline const daemon::Caller kAdmin{"root", store::Role::kAdmin};
  std::unique_ptr<daemon::Service> svc;
  std::deque<std::function<void()>> worker;

 private:
  std::unique_ptr<topology::Cluster> cluster_;
  FakeLoop loop_;
};

std::unique_ptr<topology::Cluster> two_nodes() {
  auto c =
      topology::read_cluster_json(R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}],
    "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n1"}, {"name": "leaf2", "level": "leaf", "nodes": "n2"},
                 {"name": "spine", "level": "spine", "children": ["leaf1", "leaf2"]}]})");
  if (!c) throw std::runtime_error(c.error().message);
  return std::make_unique<topology::Cluster>(std::move(*c));
}

TEST(ServicePass, StartsOfJobsCancelledOrHeldDuringThePassAreNotCommitted) {
  testing::TempDir dir;
  auto cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  ASSERT_TRUE(cluster);
  InFlight f(dir, std::make_unique<topology::Cluster>(std::move(*cluster)));
  const auto ids = f.submit({8, 8, 8});
  ASSERT_EQ(ids.size(), 3u);
  ASSERT_EQ(f.worker.size(), 1u);  // snapshot taken with all three pending
  ASSERT_TRUE(f.svc->act(ids[0], jobs::JobEvent::kCancelled, InFlight::kAdmin));
  ASSERT_TRUE(f.svc->act(ids[1], jobs::JobEvent::kHeld, InFlight::kAdmin));
  f.finish_pass();
  EXPECT_EQ(f.job(ids[0]).state, JobState::kCancelled);
  EXPECT_TRUE(f.job(ids[0]).nodes.empty());
  EXPECT_EQ(f.job(ids[0]).attempt, 0);
  EXPECT_EQ(f.job(ids[1]).state, JobState::kHeld);
  EXPECT_TRUE(f.job(ids[1]).nodes.empty());
  EXPECT_EQ(f.job(ids[2]).state, JobState::kStarting);  // still valid: committed
  EXPECT_EQ(f.svc->stats().stale_starts_total, 2);
  EXPECT_EQ(f.svc->stats().passes_total, 1);
  // The cancel and hold asked for a pass while this one ran: it follows, and finds nothing to start.
  f.finish_pass();
  EXPECT_EQ(f.job(ids[1]).state, JobState::kHeld);
  EXPECT_TRUE(f.worker.empty());
}

TEST(ServicePass, StartsOnNodesDrainedOrGpusTakenDuringThePassAreRetriedInTheNextPass) {
  testing::TempDir dir;
  InFlight f(dir, two_nodes());
  const auto ids = f.submit({8, 8});
  ASSERT_EQ(f.worker.size(), 1u);
  // While the pass runs: n1 is drained, and n2's first GPU is held by an allocation being killed.
  ASSERT_TRUE(f.svc->set_node_health("n1", sched::NodeHealth::kDrain, "maintenance", InFlight::kAdmin));
  f.svc->table().hold_gpus({"99.1", ids[0], {8}, {"n2"}});
  f.finish_pass();
  for (auto id : ids) {
    EXPECT_EQ(f.job(id).state, JobState::kPending) << id;
    EXPECT_TRUE(f.job(id).nodes.empty()) << id;
  }
  EXPECT_EQ(f.svc->stats().stale_starts_total, 2);
  // The next pass sees n1 drained and GPU 8 held: nothing fits, and each job says why (in memory).
  f.finish_pass();
  EXPECT_EQ(f.job(ids[0]).state, JobState::kPending);
  EXPECT_EQ(f.job(ids[0]).reason.rfind("resources", 0), 0u) << f.job(ids[0]).reason;
  EXPECT_EQ(f.job(ids[1]).state, JobState::kPending);
  EXPECT_TRUE(f.worker.empty());
  // GPU 8 freed and n1 resumed: both start, one per node.
  f.svc->table().release_gpus("99.1");
  ASSERT_TRUE(f.svc->set_node_health("n1", sched::NodeHealth::kUp, "", InFlight::kAdmin));
  f.finish_pass();
  EXPECT_EQ(f.job(ids[0]).state, JobState::kStarting);
  EXPECT_EQ(f.job(ids[1]).state, JobState::kStarting);
  EXPECT_NE(f.node_of(ids[0]), f.node_of(ids[1]));
  EXPECT_EQ(f.svc->stats().stale_starts_total, 2);
}

TEST(ServicePass, AStartIsKeptWhenOnlyOtherNodesChanged) {
  testing::TempDir dir;
  InFlight f(dir, two_nodes());
  const auto ids = f.submit({8});
  ASSERT_EQ(f.worker.size(), 1u);
  f.finish_pass();  // learn where the job goes, then replay the same situation with the other node drained
  const std::string used = f.job(ids[0]).nodes.at(0);
  ASSERT_TRUE(f.svc->act(ids[0], jobs::JobEvent::kCancelled, InFlight::kAdmin));
  const auto next = f.submit({8});  // freed GPUs come back in this pass's snapshot
  ASSERT_EQ(f.worker.size(), 1u);
  const std::string other = used == "n1" ? "n2" : "n1";
  ASSERT_TRUE(f.svc->set_node_health(other, sched::NodeHealth::kDrain, "", InFlight::kAdmin));
  f.finish_pass();
  EXPECT_EQ(f.job(next[0]).state, JobState::kStarting);
  EXPECT_EQ(f.job(next[0]).nodes.at(0), used);
  EXPECT_EQ(f.svc->stats().stale_starts_total, 0);
}

// A pass budget: the pass stops between jobs when the budget is spent, the jobs it did not reach say so
// (or keep the reason they had), and another pass follows; without a budget one pass reaches them all.
TEST(ServicePass, APassStopsAtItsBudgetAndTheJobsItDidNotReachSaySo) {
  testing::TempDir dir;
  auto cluster = topology::generate_superpod("dgx-h100-superpod", 1);  // 32 nodes
  ASSERT_TRUE(cluster);
  InFlight f(dir, std::make_unique<topology::Cluster>(std::move(*cluster)));
  auto ticks = std::make_shared<int64_t>(0);  // each reading of the clock is 1 ms later
  f.svc->set_monotonic_clock([ticks] { return std::chrono::steady_clock::time_point(std::chrono::milliseconds(++*ticks)); });
  f.svc->set_pass_budget(std::chrono::milliseconds(1));  // spent at the first question, after kBudgetStride jobs
  const auto ids = f.submit(std::vector<int>(200, 8));
  ASSERT_EQ(ids.size(), 200u);
  f.finish_pass();
  const std::string not_reached(lifecycle::JobTable::kNotReached);
  auto count = [&](auto pred) { return std::count_if(ids.begin(), ids.end(), [&](auto id) { return pred(f.job(id)); }); };
  auto starting = [](const JobRecord& r) { return r.state == JobState::kStarting; };
  auto unreached = [&](const JobRecord& r) { return r.reason == not_reached; };
  auto waiting_for_gpus = [](const JobRecord& r) { return r.reason.rfind("resources", 0) == 0; };
  EXPECT_EQ(count(starting), 32);
  EXPECT_EQ(count(waiting_for_gpus), static_cast<long>(sched::kBudgetStride) - 32);
  EXPECT_EQ(count(unreached), 200 - static_cast<long>(sched::kBudgetStride));
  EXPECT_EQ(f.svc->stats().cut_passes_total, 1);
  EXPECT_EQ(f.svc->stats().last_unexamined, 200 - static_cast<long>(sched::kBudgetStride));
  ASSERT_EQ(f.worker.size(), 1u) << "a cut pass asks for the next one";

  // The same budget: the head of the 168 still pending until the reservations are given (reservation_depth
  // jobs, all reached before), then only jobs that no pass reached yet (the others cannot start: no GPU is
  // free), the rest keeping their reason.
  f.finish_pass();
  EXPECT_EQ(count(starting), 32);
  const long depth = sched::PolicyConfig{}.reservation_depth;
  EXPECT_EQ(count(unreached), 200 - 2 * static_cast<long>(sched::kBudgetStride) + depth);
  EXPECT_EQ(f.svc->stats().cut_passes_total, 2);

  f.svc->set_pass_budget(std::chrono::milliseconds(0));  // no bound: the next pass reaches every job
  ASSERT_EQ(f.worker.size(), 1u);
  f.finish_pass();
  EXPECT_EQ(count(unreached), 0);
  EXPECT_EQ(count(waiting_for_gpus), 200 - 32);
  EXPECT_EQ(f.svc->stats().last_unexamined, 0);
  EXPECT_EQ(f.svc->stats().cut_passes_total, 2);
  EXPECT_TRUE(f.worker.empty()) << "a pass that reached every job asks for no other";
}

// A plan with more starts than daemon::kApplySlice is applied a slice at a time, each its own loop task:
// what comes in meanwhile (here a cancel of a job the plan starts in a later slice) is served between
// slices, the later slice drops the cancelled job's start, and the pass counts once.
TEST(ServicePass, ABigPlanIsAppliedInSlicesWithTheLoopServingBetween) {
  testing::TempDir dir;
  auto cluster = topology::generate_superpod("dgx-h100-superpod", 10);  // 320 nodes, 2,560 GPUs
  ASSERT_TRUE(cluster);
  InFlight f(dir, std::make_unique<topology::Cluster>(std::move(*cluster)));
  const size_t n = 2 * daemon::kApplySlice + 500;
  const auto ids = f.submit(std::vector<int>(n, 1));
  ASSERT_EQ(ids.size(), n);
  f.compute_pass();
  auto started = [&] {
    return std::count_if(ids.begin(), ids.end(), [&](auto id) { return f.job(id).state == JobState::kStarting; });
  };
  ASSERT_TRUE(f.step());  // the first slice
  EXPECT_EQ(started(), static_cast<long>(daemon::kApplySlice));
  EXPECT_EQ(f.svc->stats().passes_total, 0) << "the pass is still being applied";
  ASSERT_TRUE(f.svc->act(ids.back(), jobs::JobEvent::kCancelled, InFlight::kAdmin));
  while (started() == static_cast<long>(daemon::kApplySlice) && f.step()) {
  }
  EXPECT_EQ(started(), 2 * static_cast<long>(daemon::kApplySlice)) << "the second slice";
  EXPECT_EQ(f.svc->stats().passes_total, 0);
  while (f.step()) {
  }
  EXPECT_EQ(started(), static_cast<long>(n) - 1);
  EXPECT_EQ(f.job(ids.back()).state, JobState::kCancelled);
  EXPECT_EQ(f.svc->stats().passes_total, 1);
  EXPECT_EQ(f.svc->stats().stale_starts_total, 1) << "the cancelled job's start was dropped";
}

}  // namespace
}  // namespace railyard
