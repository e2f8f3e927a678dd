// Unit tests of the daemon's Service over a fake loop and a real SQLite store: pass pacing, the delayed sync
// of written commits, group commit of submits (on the loop and off it), idempotent submits.
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "scheduler/daemon/service.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "tests/daemon_client.hpp"
#include "tests/service_harness.hpp"
#include "topology/generator.hpp"

namespace railyard {
namespace {

using namespace service_test;  // NOLINT(google-build-using-namespace): the shared harness

// A service of a one-SU cluster on a new database, over a FakeLoop whose delayed work (post_after) waits in
// `timers` until the test runs it: fire() runs the first, settle() everything posted, delayed or not.
struct TimedService {
  testing::TempDir dir;
  Result<topology::Cluster> cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  FakeLoop loop;
  std::deque<std::function<void()>> timers;
  std::unique_ptr<daemon::Service> svc;
  TimedService() {
    auto st = SqliteStateStore::open(dir.file("s.db"));
    if (!cluster || !st) return;
    daemon::Loop fake{
        [this](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
        [this](std::chrono::milliseconds, std::function<void()> fn) { timers.push_back(std::move(fn)); }};
    svc = std::make_unique<daemon::Service>(*cluster, std::move(*st), std::move(fake),
                                            [] { return int64_t{5000}; });
  }
  void fire() {
    auto fn = std::move(timers.front());
    timers.pop_front();
    fn();
    loop.run();
  }
  void settle() {
    for (loop.run(); !timers.empty();) fire();
  }
  // Drains node i through Service::commit with the given durability.
  Status drain(int i, store::Durability d) {
    store::WriteBatch b;
    b.nodes.push_back({cluster->node(i).name, sched::NodeHealth::kDrain, "test"});
    b.durability = d;
    return svc->commit(std::move(b));
  }
};

// Pass pacing on the injected monotonic clock, without sleeping: a pass requested right after one ends waits
// kMinPassInterval counted from that end (a pass this short), what is left of it later, nothing once over.
TEST(Service, PassPacingCountsFromTheLastPassOnTheMonotonicClock) {
  testing::TempDir dir;
  auto cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  auto st = SqliteStateStore::open(dir.file("s.db"));
  ASSERT_TRUE(cluster && st);
  FakeLoop loop;
  std::vector<std::pair<std::chrono::milliseconds, std::function<void()>>> timers;
  daemon::Loop fake{[&](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
                    [&](std::chrono::milliseconds d, std::function<void()> fn) { timers.emplace_back(d, std::move(fn)); }};
  daemon::Service svc(*cluster, std::move(*st), std::move(fake), [] { return int64_t{5000}; });
  std::chrono::steady_clock::time_point t{std::chrono::seconds(100)};
  svc.set_monotonic_clock([&] { return t; });
  ASSERT_TRUE(svc.open());
  loop.run();
  // Two jobs of the whole cluster: one runs, the other keeps every later pass busy.
  const daemon::Caller ada{"ada", store::Role::kUser};
  for (int i = 0; i < 2; ++i) {
    jobs::JobSpec spec;
    spec.gpus = cluster->gpu_count();
    ASSERT_TRUE(svc.prepare(spec, ada));
    svc.submit({spec}, ada, [](Result<std::vector<jobs::JobId>> ids) { ASSERT_TRUE(ids); });
  }
  loop.run();
  for (; !timers.empty(); loop.run()) {  // the submits' own passes, paced or not
    auto fn = std::move(timers.front().second);
    timers.erase(timers.begin());
    fn();
  }
  const int64_t passes = svc.stats().passes_total;
  ASSERT_GE(passes, 1);
  ASSERT_EQ(svc.table().find(1)->state, jobs::JobState::kStarting);
  svc.request_pass();  // the clock has not moved since that pass ended
  loop.run();
  ASSERT_EQ(timers.size(), 1u) << "paced, not posted at once";
  EXPECT_EQ(timers.front().first, daemon::kMinPassInterval);
  EXPECT_EQ(svc.stats().passes_total, passes);
  t += std::chrono::milliseconds(5);
  timers.front().second();  // fires early (a loop may): the pass runs, and the next is paced from its end
  loop.run();
  EXPECT_EQ(svc.stats().passes_total, passes + 1);
  timers.clear();
  t += std::chrono::milliseconds(15);
  svc.request_pass();
  loop.run();
  ASSERT_EQ(timers.size(), 1u);
  EXPECT_EQ(timers.front().first, std::chrono::milliseconds(5)) << "20 ms from the last end, 15 of them gone";
  svc.request_pass();  // a second request while one is paced adds nothing
  loop.run();
  EXPECT_EQ(timers.size(), 1u);
  t += std::chrono::milliseconds(5);
  timers.front().second();
  loop.run();
  EXPECT_EQ(svc.stats().passes_total, passes + 2);
  timers.clear();
  t += std::chrono::seconds(1);  // long after: the next request runs at once
  svc.request_pass();
  loop.run();
  EXPECT_TRUE(timers.empty());
  EXPECT_EQ(svc.stats().passes_total, passes + 3);
}

// The delayed sync of kWritten commits (commit_pipeline.hpp, "Durability"): it runs kLazySyncDelay after the first
// unsynced commit, unless a synced commit came in between; then what is unsynced is younger than that, and
// it waits one more delay (a stream of submits syncs the scheduler's own commits with its own fsyncs).
TEST(Service, TheDelayedSyncWaitsAgainAfterASyncedCommit) {
  TimedService h;
  ASSERT_TRUE(h.svc);
  daemon::Service& svc = *h.svc;
  ASSERT_TRUE(svc.open());
  h.loop.run();
  bool durable = false;
  ASSERT_TRUE(h.drain(0, store::Durability::kWritten));
  svc.when_durable([&] { durable = true; });
  ASSERT_EQ(h.timers.size(), 1u);
  ASSERT_TRUE(h.drain(1, store::Durability::kSynced));
  EXPECT_TRUE(durable) << "the synced commit made the first durable";
  ASSERT_TRUE(h.drain(2, store::Durability::kWritten));
  durable = false;
  svc.when_durable([&] { durable = true; });
  EXPECT_EQ(h.timers.size(), 1u) << "one sync posted at a time";
  h.fire();
  EXPECT_EQ(svc.stats().log_syncs_total, 0) << "a synced commit came in between: wait again";
  EXPECT_FALSE(durable);
  ASSERT_EQ(h.timers.size(), 1u);
  h.fire();
  EXPECT_EQ(svc.stats().log_syncs_total, 1);
  EXPECT_TRUE(durable);
  EXPECT_TRUE(h.timers.empty());
}

// --submit-durability written: a submit is answered once its commit is in the log (another connection reads
// the job then), before any sync; the delayed sync makes it durable (a waiter on durability hears then). By
// default the commit is synced: durable when answered. A deferred submit is refused.
TEST(Service, WrittenSubmitsAreAnsweredBeforeTheirSyncAndSyncedWithinTheDelay) {
  for (const auto mode : {store::Durability::kWritten, store::Durability::kSynced}) {
    SCOPED_TRACE(mode == store::Durability::kWritten ? "written" : "synced");
    TimedService h;
    ASSERT_TRUE(h.svc);
    daemon::Service& svc = *h.svc;
    EXPECT_FALSE(svc.set_submit_durability(store::Durability::kDeferred));
    ASSERT_TRUE(svc.set_submit_durability(mode));
    EXPECT_EQ(svc.stats().submits_synced, mode == store::Durability::kSynced);
    ASSERT_TRUE(svc.open());
    h.settle();
    const int64_t syncs_before = svc.stats().log_syncs_total;
    const daemon::Caller ada{"ada", store::Role::kUser};
    jobs::JobSpec spec;
    spec.gpus = 8;
    ASSERT_TRUE(svc.prepare(spec, ada));
    std::vector<jobs::JobId> acked;
    svc.submit({spec}, ada, [&](Result<std::vector<jobs::JobId>> ids) {
      ASSERT_TRUE(ids) << ids.error().message;
      acked = *ids;
    });
    while (acked.empty() && !h.loop.work.empty()) {  // up to the answer (the pass it requests comes after)
      auto fn = std::move(h.loop.work.front());
      h.loop.work.pop_front();
      fn();
    }
    ASSERT_EQ(acked, std::vector<jobs::JobId>{1});
    EXPECT_EQ(count_rows(h.dir.file("s.db"), "SELECT count(*) FROM jobs WHERE id = 1"), 1)
        << "in the log when answered";
    bool durable = false;
    svc.when_durable([&] { durable = true; });
    EXPECT_EQ(svc.stats().log_syncs_total, syncs_before);
    if (mode == store::Durability::kSynced) {
      EXPECT_TRUE(durable) << "a synced submit is durable when answered";
      EXPECT_TRUE(h.timers.empty()) << "nothing for a delayed sync";
      continue;
    }
    EXPECT_FALSE(durable) << "written, not synced yet";
    EXPECT_EQ(h.timers.size(), 1u) << "the delayed sync is posted";
    h.settle();
    EXPECT_EQ(svc.stats().log_syncs_total, syncs_before + 1)
        << "one delayed sync for the submit and its pass";
    EXPECT_TRUE(durable);
  }
}

// The delayed sync off the loop (sync_log_on_thread in the daemon; a test-controlled executor here): the loop
// goes on while the fsync runs; a waiter for what was committed before it hears when it comes back, one for a
// commit made meanwhile only after the next sync; a synced commit meanwhile releases both at once.
TEST(Service, TheDelayedSyncOffTheLoopReleasesOnlyWhatItCovers) {
  TimedService h;
  ASSERT_TRUE(h.svc);
  daemon::Service& svc = *h.svc;
  std::deque<std::function<void()>> syncs;
  svc.set_sync_executor([&](std::function<void()> fn) { syncs.push_back(std::move(fn)); });
  ASSERT_TRUE(svc.open());
  h.loop.run();
  auto run_sync = [&] {
    auto fn = std::move(syncs.front());
    syncs.pop_front();
    fn();
    h.loop.run();
  };
  bool first = false, second = false;
  ASSERT_TRUE(h.drain(0, store::Durability::kWritten));
  svc.when_durable([&] { first = true; });
  ASSERT_EQ(h.timers.size(), 1u);
  h.fire();  // the delayed sync: its fsync goes to the executor
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_FALSE(first) << "not before the fsync is done";
  ASSERT_TRUE(h.drain(1, store::Durability::kWritten));  // while it runs
  svc.when_durable([&] { second = true; });
  run_sync();
  EXPECT_TRUE(first);
  EXPECT_FALSE(second) << "committed after the fsync began: the next sync";
  EXPECT_EQ(svc.stats().log_syncs_total, 1);
  ASSERT_EQ(h.timers.size(), 1u);
  h.fire();
  ASSERT_EQ(syncs.size(), 1u);
  run_sync();
  EXPECT_TRUE(second);
  EXPECT_EQ(svc.stats().log_syncs_total, 2);

  // A synced commit while a sync is in flight makes everything durable at once.
  bool third = false;
  ASSERT_TRUE(h.drain(2, store::Durability::kWritten));
  h.fire();
  ASSERT_EQ(syncs.size(), 1u);
  svc.when_durable([&] { third = true; });  // covered by the sync in flight
  EXPECT_FALSE(third);
  ASSERT_TRUE(h.drain(3, store::Durability::kSynced));
  EXPECT_TRUE(third);
  run_sync();
  EXPECT_EQ(svc.stats().log_syncs_total, 3);
  EXPECT_TRUE(h.timers.empty());
}

TEST(Service, SubmitsThatArriveTogetherShareOneCommitAndAreScheduled) {
  testing::TempDir dir;
  auto cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  ASSERT_TRUE(cluster);
  auto st = SqliteStateStore::open(dir.file("s.db"));
  ASSERT_TRUE(st);
  FakeLoop loop;
  daemon::Loop fake{
      [&](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
      [&](std::chrono::milliseconds, std::function<void()> fn) { loop.work.push_back(std::move(fn)); }};
  daemon::Service svc(*cluster, std::move(*st), std::move(fake), [] { return int64_t{5000}; });
  ASSERT_TRUE(svc.open());
  loop.run();
  const daemon::Caller ada{"ada", store::Role::kUser};
  std::vector<jobs::JobId> acked;
  for (int i = 0; i < 3; ++i) {
    jobs::JobSpec spec;
    spec.gpus = 8;
    ASSERT_TRUE(svc.prepare(spec, ada));
    svc.submit({spec}, ada, [&](Result<std::vector<jobs::JobId>> ids) {
      ASSERT_TRUE(ids);
      acked.push_back(ids->front());
    });
  }
  EXPECT_TRUE(acked.empty()) << "acknowledged before the commit";
  loop.run();
  EXPECT_EQ(acked, (std::vector<jobs::JobId>{1, 2, 3}));
  EXPECT_EQ(svc.stats().submit_commits_total, 1);
  EXPECT_EQ(svc.stats().submits_total, 3);
  for (jobs::JobId id : acked) {
    const JobRecord* r = svc.table().find(id);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->state, JobState::kStarting);
    EXPECT_EQ(r->nodes.size(), 1u);
    EXPECT_EQ(r->start_time, 5000);
  }
  jobs::JobSpec bad;
  bad.nodes = 1;
  bad.gpus_per_node = 9;
  EXPECT_FALSE(svc.prepare(bad, ada));
  jobs::JobSpec other;
  other.gpus = 1;
  other.user = "bob";
  auto denied = svc.prepare(other, ada);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kPermission);
}

// QoS high (it goes before every normal job and may preempt scavenger ones) is for admins and the users
// high_qos_users names; normal and scavenger are open to all.
TEST(Service, QosHighIsForAdminsAndTheUsersTheSettingsName) {
  TimedService t;
  ASSERT_TRUE(t.svc && t.svc->open());
  const daemon::Caller ada{"ada", store::Role::kUser}, bob{"bob", store::Role::kUser};
  const daemon::Caller root{"root", store::Role::kAdmin};
  auto with = [](jobs::Qos qos) {
    jobs::JobSpec spec;
    spec.gpus = 8;
    spec.qos = qos;
    return spec;
  };
  auto high = with(jobs::Qos::kHigh);
  auto denied = t.svc->prepare(high, ada);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kPermission);
  EXPECT_NE(denied.error().message.find("qos high: user ada may not submit high-QoS jobs"), std::string::npos)
      << denied.error().message;
  for (auto qos : {jobs::Qos::kNormal, jobs::Qos::kScavenger}) {
    auto spec = with(qos);
    EXPECT_TRUE(t.svc->prepare(spec, ada));
  }
  auto as_admin = with(jobs::Qos::kHigh);
  EXPECT_TRUE(t.svc->prepare(as_admin, root));
  ASSERT_TRUE(t.svc->set_high_qos_users(" ada , carol"));
  auto ada_high = with(jobs::Qos::kHigh), bob_high = with(jobs::Qos::kHigh);
  EXPECT_TRUE(t.svc->prepare(ada_high, ada));
  EXPECT_FALSE(t.svc->prepare(bob_high, bob));
  ASSERT_TRUE(t.svc->set_high_qos_users("*"));
  EXPECT_TRUE(t.svc->prepare(bob_high, bob));
  EXPECT_FALSE(t.svc->set_high_qos_users("ada,,bob"));
  ASSERT_TRUE(t.svc->set_high_qos_users(""));
  auto again = with(jobs::Qos::kHigh);
  EXPECT_FALSE(t.svc->prepare(again, ada));
}

// Idempotent submits (issue 30): a submit repeated with its key, before or after its commit and after a
// restart on the same database, makes no second job and gets the first one's ids; keys are per user.
TEST(Service, ASubmitRepeatedWithItsIdempotencyKeyGetsTheSameIds) {
  testing::TempDir dir;
  auto cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  ASSERT_TRUE(cluster);
  const daemon::Caller ada{"ada", store::Role::kUser}, bob{"bob", store::Role::kUser};
  std::vector<std::vector<jobs::JobId>> answers;
  auto record = [&](Result<std::vector<jobs::JobId>> ids) {
    ASSERT_TRUE(ids) << ids.error().message;
    answers.push_back(*ids);
  };
  auto specs = [](int n) {
    std::vector<jobs::JobSpec> out(static_cast<size_t>(n));
    for (auto& s : out) {
      s.gpus = 1;
      s.user = "";
    }
    return out;
  };
  {
    auto st = SqliteStateStore::open(dir.file("s.db"));
    ASSERT_TRUE(st);
    FakeLoop loop;
    daemon::Loop fake{[&](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
                      [&](std::chrono::milliseconds, std::function<void()> fn) { loop.work.push_back(std::move(fn)); }};
    daemon::Service svc(*cluster, std::move(*st), std::move(fake), [] { return int64_t{5000}; });
    ASSERT_TRUE(svc.open());
    loop.run();
    auto batch = specs(3);
    for (auto& s : batch) ASSERT_TRUE(svc.prepare(s, ada));
    svc.submit(batch, ada, record, "k1");
    svc.submit(batch, ada, record, "k1");  // a retry while the first is not committed yet
    loop.run();
    svc.submit(batch, ada, record, "k1");  // a retry after
    auto one = specs(1);
    ASSERT_TRUE(svc.prepare(one[0], bob));
    svc.submit(one, bob, record, "k1");  // another user's key
    loop.run();
    ASSERT_EQ(answers.size(), 4u);
    EXPECT_EQ(answers[0], (std::vector<jobs::JobId>{1, 2, 3}));
    EXPECT_EQ(answers[1], answers[0]);
    EXPECT_EQ(answers[2], answers[0]);
    EXPECT_EQ(answers[3], (std::vector<jobs::JobId>{4}));
    EXPECT_EQ(svc.stats().submits_total, 4);
  }
  auto st = SqliteStateStore::open(dir.file("s.db"));
  ASSERT_TRUE(st);
  FakeLoop loop;
  daemon::Loop fake{[&](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
                    [&](std::chrono::milliseconds, std::function<void()> fn) { loop.work.push_back(std::move(fn)); }};
  daemon::Service svc(*cluster, std::move(*st), std::move(fake), [] { return int64_t{5000}; });
  ASSERT_TRUE(svc.open());  // a new leader on the same database
  loop.run();
  auto one = specs(1);
  ASSERT_TRUE(svc.prepare(one[0], bob));
  svc.submit(one, bob, record, "k1");
  loop.run();
  ASSERT_EQ(answers.size(), 5u);
  EXPECT_EQ(answers[4], (std::vector<jobs::JobId>{4}));
  EXPECT_EQ(svc.table().jobs().size(), 4u);
}

// Submits committed through a second connection on a test-controlled executor: the loop keeps going while
// a commit is in flight, submits that arrive meanwhile form the next commit, and nobody hears back (nor
// does the table know the job) before the commit that holds the job is done.
// A one-SU cluster and two connections to one new database: the service's and the submit committer's.
struct TwoConnections {
  testing::TempDir dir;
  Result<topology::Cluster> cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  Result<std::unique_ptr<SqliteStateStore>> st = SqliteStateStore::open(dir.file("s.db"));
  Result<std::unique_ptr<SqliteStateStore>> second = SqliteStateStore::open(dir.file("s.db"));
  bool ok() const { return cluster && st && second; }
  std::string file() const { return dir.file("s.db"); }
};

TEST(Service, SubmitCommitsOffTheLoopAreOrderedAndAckedOnlyOnceOnDisk) {
  TwoConnections db;
  ASSERT_TRUE(db.ok());
  FakeLoop loop;
  daemon::Loop fake{
      [&](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
      [&](std::chrono::milliseconds, std::function<void()> fn) { loop.work.push_back(std::move(fn)); }};
  daemon::Service svc(*db.cluster, std::move(*db.st), std::move(fake), [] { return int64_t{5000}; });
  std::deque<std::function<void()>> committer;
  svc.set_submit_committer(
      std::move(*db.second), [&](std::function<void()> fn) { committer.push_back(std::move(fn)); }, 2);
  ASSERT_TRUE(svc.open());
  loop.run();
  const daemon::Caller ada{"ada", store::Role::kUser};
  std::vector<std::vector<jobs::JobId>> acked;
  auto submit = [&](int n) {
    jobs::JobSpec spec;
    spec.gpus = 8;
    EXPECT_TRUE(svc.prepare(spec, ada));
    svc.submit(std::vector<jobs::JobSpec>(static_cast<size_t>(n), spec), ada, [&](Result<std::vector<jobs::JobId>> ids) {
      ASSERT_TRUE(ids) << ids.error().message;
      acked.push_back(*ids);
    });
  };
  const std::string jobs_on_disk = "SELECT count(*) FROM jobs";
  submit(2);
  loop.run();
  ASSERT_EQ(committer.size(), 1u) << "the first submit's commit is handed to the committer";
  submit(1);
  submit(3);
  loop.run();
  EXPECT_EQ(committer.size(), 1u) << "one commit in flight at a time";
  EXPECT_EQ(count_rows(db.file(), jobs_on_disk), 0);
  auto run_commit = [&] {
    auto fn = std::move(committer.front());
    committer.pop_front();
    fn();
  };
  run_commit();
  EXPECT_EQ(count_rows(db.file(), jobs_on_disk), 2);
  EXPECT_TRUE(acked.empty()) << "acknowledged on the committer's thread";
  EXPECT_EQ(svc.table().find(1), nullptr);
  loop.run();  // the first commit is applied and acked; the two that waited form the next commit
  ASSERT_EQ(acked.size(), 1u);
  EXPECT_EQ(acked[0], (std::vector<jobs::JobId>{1, 2}));
  ASSERT_NE(svc.table().find(2), nullptr);
  EXPECT_EQ(svc.table().find(3), nullptr);
  ASSERT_EQ(committer.size(), 1u);
  // The loop's own commits use the first connection meanwhile.
  ASSERT_TRUE(svc.act(2, jobs::JobEvent::kCancelled, ada));
  run_commit();
  loop.run();
  ASSERT_EQ(acked.size(), 3u);
  EXPECT_EQ(acked[1], (std::vector<jobs::JobId>{3}));
  EXPECT_EQ(acked[2], (std::vector<jobs::JobId>{4, 5, 6}));
  EXPECT_EQ(svc.stats().submit_commits_total, 2);
  EXPECT_EQ(svc.stats().submits_total, 6);
  EXPECT_EQ(count_rows(db.file(), jobs_on_disk), 6);
  EXPECT_EQ(count_rows(db.file(), "SELECT count(*) FROM events WHERE what = 'submitted'"), 6);
  EXPECT_EQ(svc.table().find(2)->state, JobState::kCancelled);
  EXPECT_TRUE(committer.empty());
  // Fewer jobs than the committer's minimum (2) commit on the loop.
  submit(1);
  loop.run();
  EXPECT_TRUE(committer.empty());
  ASSERT_EQ(acked.size(), 4u);
  EXPECT_EQ(acked[3], (std::vector<jobs::JobId>{7}));
  EXPECT_EQ(count_rows(db.file(), jobs_on_disk), 7);
}

// The daemon's form: a real thread and a loop that other threads post to.
TEST(Service, SubmitCommitsOnTheirOwnThreadLoseAndReorderNothing) {
  TwoConnections db;
  ASSERT_TRUE(db.ok());
  std::mutex mutex;
  std::deque<std::function<void()>> posted;
  daemon::Loop loop{[&](std::function<void()> fn) {
                      std::lock_guard lock(mutex);
                      posted.push_back(std::move(fn));
                    },
                    [&](std::chrono::milliseconds, std::function<void()> fn) {
                      std::lock_guard lock(mutex);
                      posted.push_back(std::move(fn));
                    }};
  auto run_one = [&] {
    std::function<void()> fn;
    {
      std::lock_guard lock(mutex);
      if (posted.empty()) return false;
      fn = std::move(posted.front());
      posted.pop_front();
    }
    fn();
    return true;
  };
  daemon::Service svc(*db.cluster, std::move(*db.st), std::move(loop), [] { return int64_t{5000}; });
  svc.commit_submits_on_thread(std::move(*db.second), 1);
  ASSERT_TRUE(svc.open());
  const daemon::Caller ada{"ada", store::Role::kUser};
  jobs::JobSpec spec;
  spec.gpus = 1;
  ASSERT_TRUE(svc.prepare(spec, ada));
  std::vector<jobs::JobId> acked;
  constexpr int kRequests = 200;
  for (int i = 0; i < kRequests; ++i) {
    svc.submit({spec, spec}, ada, [&](Result<std::vector<jobs::JobId>> ids) {
      ASSERT_TRUE(ids) << ids.error().message;
      acked.insert(acked.end(), ids->begin(), ids->end());
    });
    run_one();
  }
  for (int spins = 0; acked.size() < 2 * kRequests && spins < 200'000; ++spins)
    if (!run_one()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  ASSERT_EQ(acked.size(), 2u * kRequests);
  for (size_t i = 0; i < acked.size(); ++i) EXPECT_EQ(acked[i], static_cast<jobs::JobId>(i + 1));
  EXPECT_EQ(count_rows(db.file(), "SELECT count(*) FROM jobs"), 2 * kRequests);
  EXPECT_EQ(svc.stats().submits_total, 2 * kRequests);
  EXPECT_LT(svc.stats().submit_commits_total, kRequests) << "submits that queued meanwhile share commits";
  while (run_one()) {
  }
}

}  // namespace
}  // namespace railyard
