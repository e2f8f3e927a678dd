// The daemon's side of the compactness wait (scheduler/README.md, "Compactness wait"): the Service keeps
// when each job began waiting across passes, shows the reason, and posts a pass for the end of the wait.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "scheduler/daemon/service.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "tests/daemon_client.hpp"
#include "topology/io_json.hpp"

namespace railyard::daemon {
namespace {

using jobs::JobState;

// 4 nodes, 2 leaf groups of 2; a loop whose delayed work waits until the test fires it.
class CompactDaemon {
 public:
  explicit CompactDaemon(const testing::TempDir& dir) {
    auto c =
        topology::read_cluster_json(R"({"name": "four", "nodes": [{"names": "n[1-4]", "profile": "dgx-h100"}],
      "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n[1-2]"},
                   {"name": "leaf2", "level": "leaf", "nodes": "n[3-4]"},
                   {"name": "spine", "level": "spine", "children": ["leaf1", "leaf2"]}]})");
    if (!c) throw std::runtime_error(c.error().message);
    cluster_ = std::make_unique<topology::Cluster>(std::move(*c));
    db_ = dir.file("s.db");
    reopen();
  }
  // A new service on the same database, as after a restart (posted work and timers of the old one dropped).
  void reopen(std::optional<sched::PolicyConfig> policy = std::nullopt) {
    svc.reset();
    work_.clear();
    timers.clear();
    auto st = store::SqliteStateStore::open(db_);
    if (!st) throw std::runtime_error(st.error().message);
    Loop loop{[this](std::function<void()> fn) { work_.push_back(std::move(fn)); },
              [this](std::chrono::milliseconds delay, std::function<void()> fn) {
                timers.push_back({delay, std::move(fn)});
              }};
    svc = std::make_unique<Service>(*cluster_, std::move(*st), std::move(loop), [this] { return now; });
    if (policy) svc->set_policy(*policy);
    if (!svc->open()) throw std::runtime_error("open failed");
    run();
  }
  // Runs posted work, and delayed work under a second (the pass pacing) as if its time had come.
  void run() {
    for (;;) {
      while (!work_.empty()) {
        auto fn = std::move(work_.front());
        work_.pop_front();
        fn();
      }
      auto it = std::find_if(timers.begin(), timers.end(),
                             [](const auto& t) { return t.first < std::chrono::seconds(1); });
      if (it == timers.end()) return;
      work_.push_back(std::move(it->second));
      timers.erase(it);
    }
  }
  jobs::JobId submit(int gpus, jobs::Qos qos = jobs::Qos::kNormal) {
    jobs::JobSpec spec;
    spec.gpus = gpus;
    spec.qos = qos;
    spec.time_limit_s = 3600;
    EXPECT_TRUE(svc->prepare(spec, kAdmin));
    jobs::JobId id = 0;
    svc->submit({spec}, kAdmin, [&](Result<std::vector<jobs::JobId>> r) { id = r->front(); });
    run();
    return id;
  }
  // Fires every timer posted so far, then runs the loop.
  void fire_timers() {
    auto due = std::move(timers);
    timers.clear();
    for (auto& t : due) t.second();
    run();
  }
  const JobRecord& job(jobs::JobId id) const { return *svc->table().find(id); }

  static inline const Caller kAdmin{"root", store::Role::kAdmin};
  int64_t now = 1000;
  std::unique_ptr<Service> svc;
  std::vector<std::pair<std::chrono::milliseconds, std::function<void()>>> timers;

 private:
  std::unique_ptr<topology::Cluster> cluster_;
  std::string db_;
  std::deque<std::function<void()>> work_;
};

TEST(DaemonCompactWait, WaitsWithAReasonKeepsItsClockAndStartsWhenTheWaitEnds) {
  testing::TempDir dir;
  CompactDaemon d(dir);
  sched::PolicyConfig policy;
  policy.compact_wait_s = 300;
  policy.compact_wait_max_s = 300;  // the compact set frees at t=4600, after the longest wait
  d.svc->set_policy(policy);
  const jobs::JobId one = d.submit(8);  // n1
  ASSERT_EQ(d.job(one).state, JobState::kStarting);
  ASSERT_TRUE(d.svc->set_node_health("n4", sched::NodeHealth::kDrain, "test", CompactDaemon::kAdmin));
  d.run();
  // Free: n2 (leaf1) and n3 (leaf2). Two nodes fit now only across both leaf groups; n1+n2 from t=4600.
  const jobs::JobId two = d.submit(16);
  EXPECT_EQ(d.job(two).state, JobState::kPending);
  EXPECT_EQ(
      d.job(two).reason.rfind("compact: waiting 60 min for 2 nodes in 1 leaf group (leaf1), reserved from t=4600", 0),
      0u)
      << d.job(two).reason;
  bool posted = false;
  for (const auto& t : d.timers) posted = posted || t.first >= std::chrono::milliseconds(300'000);
  EXPECT_TRUE(posted) << "a pass for the end of the wait";

  d.now = 1200;  // a pass on the way: still waiting, on the clock started at t=1000
  d.svc->request_pass();
  d.run();
  EXPECT_EQ(d.job(two).state, JobState::kPending);
  EXPECT_NE(d.job(two).reason.find("starts anyway at t=1300"), std::string::npos) << d.job(two).reason;

  d.now = 1300;
  d.fire_timers();
  ASSERT_EQ(d.job(two).state, JobState::kStarting) << d.job(two).reason;
  EXPECT_EQ(d.job(two).leaves_spanned, 2);
}

// The wait's start is in the job's record: a scheduler restarted halfway through the wait ends it when it
// would have ended, not a whole wait after the restart.
TEST(DaemonCompactWait, ARestartKeepsTheWaitsClock) {
  testing::TempDir dir;
  CompactDaemon d(dir);
  sched::PolicyConfig policy;
  policy.compact_wait_s = 300;
  policy.compact_wait_max_s = 300;  // the compact set frees at t=4600, after the longest wait
  d.svc->set_policy(policy);
  d.submit(8);  // n1
  ASSERT_TRUE(d.svc->set_node_health("n4", sched::NodeHealth::kDrain, "test", CompactDaemon::kAdmin));
  d.run();
  const jobs::JobId two = d.submit(16);  // waits from t=1000
  ASSERT_EQ(d.job(two).state, JobState::kPending);
  EXPECT_EQ(d.job(two).compact_since, std::optional<int64_t>(1000));

  d.now = 1200;
  d.reopen(policy);
  ASSERT_EQ(d.job(two).state, JobState::kPending) << d.job(two).reason;
  EXPECT_EQ(d.job(two).compact_since, std::optional<int64_t>(1000));
  EXPECT_NE(d.job(two).reason.find("starts anyway at t=1300"), std::string::npos) << d.job(two).reason;
  bool posted = false;
  for (const auto& t : d.timers)
    posted = posted || (t.first >= std::chrono::seconds(99) && t.first <= std::chrono::milliseconds(100'100));
  EXPECT_TRUE(posted) << "a pass for the end of the wait, 100 s after the restart";

  d.now = 1300;
  d.fire_timers();
  ASSERT_EQ(d.job(two).state, JobState::kStarting) << d.job(two).reason;
  EXPECT_EQ(d.job(two).leaves_spanned, 2);
  EXPECT_FALSE(d.job(two).compact_since) << "cleared at the start: a requeue waits afresh";
  d.reopen(policy);
  EXPECT_FALSE(d.job(two).compact_since);
}

TEST(DaemonCompactWait, ZeroStartsAtOnce) {
  testing::TempDir dir;
  CompactDaemon d(dir);
  sched::PolicyConfig policy;
  policy.compact_wait_s = 0;
  d.svc->set_policy(policy);
  d.submit(8);
  ASSERT_TRUE(d.svc->set_node_health("n4", sched::NodeHealth::kDrain, "test", CompactDaemon::kAdmin));
  d.run();
  const jobs::JobId two = d.submit(16);
  ASSERT_EQ(d.job(two).state, JobState::kStarting) << d.job(two).reason;
  EXPECT_EQ(d.job(two).leaves_spanned, 2);
}

// A high job preempts scavenger work for a set on its fewest leaf groups; the victim is requeued, says why,
// and is still there after a restart, whose first pass starts it again on the node left free.
TEST(DaemonCompactPreemption, TheVictimIsRequeuedWithItsReasonAndSurvivesARestart) {
  testing::TempDir dir;
  CompactDaemon d(dir);
  sched::PolicyConfig policy;
  policy.compact_wait_s = 300;
  d.svc->set_policy(policy);
  const jobs::JobId scavenger = d.submit(8, jobs::Qos::kScavenger);  // n1
  ASSERT_EQ(d.job(scavenger).state, JobState::kStarting);
  ASSERT_TRUE(d.svc->set_node_health("n4", sched::NodeHealth::kDrain, "test", CompactDaemon::kAdmin));
  d.run();
  // Free: n2 (leaf1) and n3 (leaf2); n1+n2 once the scavenger job is gone.
  const jobs::JobId high = d.submit(16, jobs::Qos::kHigh);
  ASSERT_EQ(d.job(high).state, JobState::kStarting) << d.job(high).reason;
  EXPECT_EQ(d.job(high).leaves_spanned, 1);
  EXPECT_EQ(d.job(scavenger).state, JobState::kPending);
  EXPECT_EQ(d.job(scavenger).reason.rfind("preempted by job " + std::to_string(high) + "; requeued", 0), 0u)
      << d.job(scavenger).reason;
  d.reopen(policy);
  EXPECT_EQ(d.job(high).state, JobState::kStarting);
  EXPECT_EQ(d.job(high).nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(d.job(scavenger).state, JobState::kStarting) << d.job(scavenger).reason;
  EXPECT_EQ(d.job(scavenger).nodes, std::vector<std::string>{"n3"});
}

}  // namespace
}  // namespace railyard::daemon
