// Unit tests of job dependencies in the daemon's Service besides afterok: afterany, afternotok, one task of
// an array, aftercorr; and parking of held and dependent jobs (ArrayWorld: tests/service_harness.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <span>

#include "scheduler/daemon/service.hpp"
#include "scheduler/model/plan.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "tests/service_harness.hpp"
#include "topology/generator.hpp"

namespace railyard {
namespace {

using namespace service_test;  // NOLINT(google-build-using-namespace): the shared harness

// --- Dependencies besides afterok: afterany, afternotok, one task of an array, aftercorr ---

jobs::JobSpec eight_gpus(std::vector<jobs::Dependency> after = {}) {
  jobs::JobSpec spec;
  spec.gpus = 8;
  spec.command = {"true"};
  spec.after = std::move(after);
  return spec;
}

TEST(ServiceDependencies, AfteranyAndAfternotokStartOnTheEndsTheyName) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId x = w.submit(eight_gpus()), y = w.submit(eight_gpus());
  const jobs::JobId any_x = w.submit(eight_gpus({{T::kAfterAny, x}}));
  const jobs::JobId notok_x = w.submit(eight_gpus({{T::kAfterNotOk, x}}));
  const jobs::JobId notok_y = w.submit(eight_gpus({{T::kAfterNotOk, y}}));
  // A job that names itself or a later one would wait forever: refused at submit.
  const jobs::JobId next = w.svc->table().next_id();
  for (jobs::JobId id : {next, next + 5}) {
    jobs::JobSpec later = eight_gpus({{T::kAfterAny, id}});
    auto st = w.svc->prepare(later, w.ada);
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().message, "dependency afterany:" + std::to_string(id) + ": job " +
                                      std::to_string(id) + " is not an earlier job (this one will be job " +
                                      std::to_string(next) +
                                      "; a job can wait only for jobs submitted before it)");
    later = eight_gpus();
    later.afterok = {id};
    EXPECT_FALSE(w.svc->prepare(later, w.ada));
  }
  // In one batch, a job may name an earlier job of that batch (the ids are given in order).
  jobs::JobSpec second = eight_gpus({{T::kAfterAny, next}});
  const jobs::JobSpec first = eight_gpus();
  EXPECT_TRUE(w.svc->prepare(second, w.ada, std::span(&first, 1)));
  EXPECT_FALSE(w.svc->prepare(second, w.ada));

  w.end({x}, JobState::kFailed, 1);  // ended, not completed: both of x's dependents start
  EXPECT_EQ(w.job(any_x).state, JobState::kStarting);
  EXPECT_EQ(w.job(notok_x).state, JobState::kStarting);
  EXPECT_EQ(w.job(notok_y).state, JobState::kPending);
  w.end({y}, JobState::kCompleted, 0);  // completed: afternotok can never be met
  EXPECT_EQ(w.job(notok_y).state, JobState::kFailed);
  EXPECT_EQ(w.job(notok_y).reason,
            "dependency: job " + std::to_string(y) + " completed successfully (afternotok)");
}

TEST(ServiceDependencies, ADependencyOnOneTaskWaitsForThatTaskAlone) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId a = w.submit_array("0-5%2");  // two tasks at a time: index 4 is created late
  const jobs::JobId on_1 = w.submit(eight_gpus({{T::kAfterOk, a, 1}}));
  const jobs::JobId on_4 = w.submit(eight_gpus({{T::kAfterAny, a, 4}}));
  EXPECT_EQ(w.job(on_1).reason, "dependency: waits for task 1 of array " + std::to_string(a));
  EXPECT_EQ(w.job(on_4).reason, "dependency: waits for task 4 of array " + std::to_string(a) + " to end");
  w.end({w.tasks(a)[0]}, JobState::kCompleted, 0);  // index 0: nothing of on_1's
  EXPECT_EQ(w.job(on_1).state, JobState::kPending);
  w.end({w.tasks(a)[1]}, JobState::kCompleted, 0);  // index 1, with the rest of the array still to come
  EXPECT_EQ(w.job(on_1).state, JobState::kStarting);
  EXPECT_EQ(w.job(on_4).state, JobState::kPending);  // index 4 not even created yet
  EXPECT_EQ(w.progress(a).created(), 4);
  // Cancelling the array before it created index 4: that task never runs, which afterany accepts.
  ASSERT_TRUE(w.svc->act(a, jobs::JobEvent::kCancelled, w.ada));
  w.loop.run();
  EXPECT_EQ(w.progress(a).created(), 4);
  EXPECT_EQ(w.job(on_4).state, JobState::kStarting);

  // What cannot name a task is refused at submit, with the reason.
  const jobs::JobId plain = w.submit(eight_gpus());
  auto refused = [&](jobs::Dependency d) {
    jobs::JobSpec spec = eight_gpus({d});
    if (d.type == T::kAfterCorr) spec.array = jobs::parse_array_spec("0-1").value();
    auto st = w.svc->prepare(spec, w.ada);
    return st ? std::string("accepted") : st.error().message;
  };
  EXPECT_EQ(refused({T::kAfterOk, a, 9}), "dependency afterok:" + std::to_string(a) + "_9: array " +
                                              std::to_string(a) + " (0-5%2) has no task 9");
  EXPECT_EQ(refused({T::kAfterOk, plain, 0}), "dependency afterok:" + std::to_string(plain) + "_0: job " +
                                                  std::to_string(plain) + " is not an array");
  EXPECT_EQ(refused({T::kAfterCorr, plain}), "dependency aftercorr:" + std::to_string(plain) + ": job " +
                                                 std::to_string(plain) + " is not an array");
  EXPECT_EQ(refused({T::kAfterAny, 999, 1}).substr(0, 56),
            "dependency afterany:999_1: job 999 is not an earlier job");
  EXPECT_EQ(refused({T::kAfterAny, a, 5}), "accepted");
}

// Parking (JobTable::park): jobs a pass found held or waiting on a dependency sit out the passes until they,
// or what they wait for, change; they still start when it does.
TEST(ServiceDependencies, HeldAndDependentJobsSitOutThePassesUntilWhatTheyWaitForChanges) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const daemon::JobTable& table = w.svc->table();
  auto in_passes = [&](jobs::JobId id) {
    const auto snap = table.snapshot(w.now);
    return std::any_of(snap.pending.begin(), snap.pending.end(), [&](const auto& p) { return p.id == id; });
  };
  const jobs::JobId x = w.submit(eight_gpus());
  const jobs::JobId a = w.submit_array("0-3");
  const jobs::JobId on_x = w.submit(eight_gpus({{T::kAfterOk, x}}));
  const jobs::JobId on_task = w.submit(eight_gpus({{T::kAfterOk, a, 2}}));
  const jobs::JobId held = w.submit(eight_gpus({{T::kAfterOk, x}}));
  EXPECT_EQ(table.parked_count(), 3u);  // parked by the passes that followed their submits
  ASSERT_TRUE(w.svc->act(held, jobs::JobEvent::kHeld, w.ada));
  EXPECT_EQ(table.parked_count(), 2u);  // its own change takes it back into the passes...
  w.loop.run();
  EXPECT_EQ(table.parked_count(), 3u);  // ...where it is found held
  EXPECT_EQ(w.job(held).state, JobState::kHeld);
  EXPECT_EQ(w.job(on_x).reason, "dependency: waits for job " + std::to_string(x));
  EXPECT_EQ(w.job(on_task).reason, "dependency: waits for task 2 of array " + std::to_string(a));
  for (jobs::JobId id : {on_x, on_task, held}) EXPECT_FALSE(in_passes(id)) << id;
  EXPECT_EQ(table.active_count(), 8u);  // x, 4 tasks (the array itself is not a job to place) and 3 parked

  // x starting to run changes nothing for its dependents; a task of the array ending wakes the job that
  // names one of its tasks, which the next pass parks again.
  store::WriteBatch running;
  running.durability = store::Durability::kWritten;
  running.updates.push_back(w.job(x));
  running.updates.back().state = JobState::kRunning;
  ASSERT_TRUE(w.svc->commit(running));
  EXPECT_EQ(table.parked_count(), 3u);
  w.loop.run();
  ASSERT_TRUE(w.svc->commit([&] {
    store::WriteBatch b;
    b.durability = store::Durability::kWritten;
    b.updates.push_back(w.job(w.tasks(a)[1]));
    b.updates.back().state = JobState::kCompleted;
    return b;
  }()));
  EXPECT_EQ(table.parked_count(), 2u);
  EXPECT_TRUE(in_passes(on_task));
  w.loop.run();
  EXPECT_EQ(table.parked_count(), 3u);
  EXPECT_EQ(w.job(on_task).reason, "dependency: waits for task 2 of array " + std::to_string(a));

  // Released, the held job waits for x again; each starts once what it waits for is met.
  ASSERT_TRUE(w.svc->act(held, jobs::JobEvent::kReleased, w.ada));
  w.loop.run();
  EXPECT_EQ(w.job(held).state, JobState::kPending);
  EXPECT_EQ(w.job(held).reason, "dependency: waits for job " + std::to_string(x));
  EXPECT_EQ(table.parked_count(), 3u);
  w.end({w.tasks(a)[2]}, JobState::kCompleted, 0);
  EXPECT_EQ(w.job(on_task).state, JobState::kStarting);
  w.end({x}, JobState::kCompleted, 0);
  EXPECT_EQ(w.job(on_x).state, JobState::kStarting);
  EXPECT_EQ(w.job(held).state, JobState::kStarting);
  EXPECT_EQ(table.parked_count(), 0u);

  // A job waiting for GPUs is never parked: what it waits for is not a job.
  jobs::JobSpec whole = eight_gpus();
  whole.gpus = static_cast<int>(w.cluster->gpu_count());
  const jobs::JobId big = w.submit(whole);
  EXPECT_EQ(w.job(big).state, JobState::kPending);
  EXPECT_TRUE(in_passes(big));
  EXPECT_EQ(table.parked_count(), 0u);
}

// The plan park() gets was computed on another thread from an older snapshot: a verdict is kept only while
// it still holds, and was written as the job's reason.
TEST(ServiceDependencies, ParkingKeepsOnlyVerdictsThatStillHold) {
  using T = jobs::Dependency::Type;
  Result<topology::Cluster> cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  ASSERT_TRUE(cluster);
  daemon::JobTable table(*cluster);
  auto record = [](jobs::JobId id, JobState state, std::vector<jobs::Dependency> after, std::string reason) {
    JobRecord r;
    r.id = id;
    r.state = state;
    r.spec = eight_gpus(std::move(after));
    r.reason = std::move(reason);
    return r;
  };
  const std::string held = "held: held";
  store::StoredState stored;
  stored.jobs = {
      record(1, JobState::kStarting, {}, ""),
      record(2, JobState::kCompleted, {}, ""),
      record(3, JobState::kPending, {{T::kAfterOk, 1}}, "dependency: waits for job 1"),
      record(4, JobState::kPending, {{T::kAfterOk, 2}}, "dependency: waits for job 2"),  // 2 ended since
      record(5, JobState::kHeld, {}, held),
      record(6, JobState::kPending, {}, held),                // released since
      record(7, JobState::kPending, {{T::kAfterOk, 1}}, ""),  // its reason not written
      record(8, JobState::kPending, {{T::kAfterAny, 2}, {T::kAfterOk, 1}},
             "dependency: waits for job 2 to end"),                     // now waits for 1
      record(9, JobState::kPending, {{T::kAfterOk, 1}}, "dependency"),  // a pass without messages
      record(10, JobState::kPending, {{T::kAfterOk, 1}, {T::kAfterOk, 11}},
             "dependency: waits for job 1"),  // 11's end is not looked at
      record(11, JobState::kStarting, {}, "")};
  table.load(std::move(stored));
  using R = sched::PendingReason;
  auto verdict = [](jobs::JobId id, R reason, std::string message) {
    sched::PendingInfo info;
    info.job = id;
    info.reason = reason;
    info.message = std::move(message);
    return info;
  };
  table.park(
      {verdict(3, R::kDependency, "waits for job 1"), verdict(4, R::kDependency, "waits for job 2"),
       verdict(5, R::kHeld, "held"), verdict(6, R::kHeld, "held"),
       verdict(7, R::kDependency, "waits for job 1"), verdict(8, R::kDependency, "waits for job 2 to end"),
       verdict(10, R::kDependency, "waits for job 1")},
      true);
  // Without explanations a pass's message is empty: the gate's kind must still hold.
  table.park({verdict(9, R::kDependency, ""), verdict(4, R::kDependency, ""), verdict(6, R::kHeld, "")},
             false);
  auto in_passes = [&] {  // the snapshot's pending jobs, by id (a snapshot has no order of its own)
    std::vector<jobs::JobId> ids;
    for (const auto& p : table.snapshot(0).pending) ids.push_back(p.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  };
  EXPECT_EQ(in_passes(), (std::vector<jobs::JobId>{4, 6, 7, 8}));
  EXPECT_EQ(table.parked_count(), 4u);
  EXPECT_EQ(table.active_count(), 10u);

  // Job 1 running is no end; its end wakes 3, 9 and 10 (11's did not: 10 waits for 1 first). A job's own
  // change wakes it.
  auto update = [&](jobs::JobId id, JobState state) {
    store::WriteBatch b;
    b.updates.push_back(*table.find(id));
    b.updates.back().state = state;
    table.apply(b);
  };
  update(1, JobState::kRunning);
  update(11, JobState::kCompleted);
  EXPECT_EQ(in_passes(), (std::vector<jobs::JobId>{4, 6, 7, 8}));
  update(1, JobState::kCompleted);
  EXPECT_EQ(in_passes(), (std::vector<jobs::JobId>{3, 4, 6, 7, 8, 9, 10}));
  update(5, JobState::kPending);
  EXPECT_EQ(in_passes(), (std::vector<jobs::JobId>{3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(table.parked_count(), 0u);
  EXPECT_EQ(table.active_count(), 8u);  // 3 to 10: jobs 1 and 11 ended
}

// The array a task dependency names may not be in the table yet: earlier in the same batch, or submitted
// by another call whose commit has not happened.
TEST(ServiceDependencies, ATaskOfAnArrayNotOnDiskYetCanBeNamed) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId next = w.svc->table().next_id();
  jobs::JobSpec batch[2] = {eight_gpus(), eight_gpus({{T::kAfterOk, next, 3}})};
  batch[0].array = jobs::parse_array_spec("0-3").value();
  ASSERT_TRUE(w.svc->prepare(batch[0], w.ada));
  auto st = w.svc->prepare(batch[1], w.ada, std::span(batch, 1));
  ASSERT_TRUE(st) << st.error().message;
  jobs::JobSpec no_task = eight_gpus({{T::kAfterOk, next, 4}});
  st = w.svc->prepare(no_task, w.ada, std::span(batch, 1));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "dependency afterok:" + std::to_string(next) + "_4: array " +
                                    std::to_string(next) + " (0-3) has no task 4");
  std::vector<jobs::JobId> ids;
  w.svc->submit({batch[0], batch[1]}, w.ada, [&](Result<std::vector<jobs::JobId>> r) { ids = r.value(); });
  // Not committed yet (the fake loop has not run): another call may already name a task of the array,
  // and aftercorr on it.
  ASSERT_EQ(w.svc->table().find(next), nullptr);
  jobs::JobSpec corr = eight_gpus({{T::kAfterCorr, next}});
  corr.array = jobs::parse_array_spec("2-3").value();
  st = w.svc->prepare(corr, w.ada);
  ASSERT_TRUE(st) << st.error().message;
  jobs::JobSpec on_plain = eight_gpus({{T::kAfterOk, next + 1, 0}});
  st = w.svc->prepare(on_plain, w.ada);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "dependency afterok:" + std::to_string(next + 1) + "_0: job " +
                                    std::to_string(next + 1) + " is not an array");
  w.loop.run();
  ASSERT_EQ(ids, (std::vector<jobs::JobId>{next, next + 1}));
  EXPECT_EQ(w.job(next + 1).reason, "dependency: waits for task 3 of array " + std::to_string(next));
  const jobs::JobId c = w.submit(corr);
  EXPECT_EQ(w.job(w.tasks(c)[0]).spec.after, (std::vector<jobs::Dependency>{{T::kAfterOk, next, 2}}));
  w.end({w.tasks(next)[3]}, JobState::kCompleted, 0);
  EXPECT_EQ(w.job(next + 1).state, JobState::kStarting);
}

// The same while the array's commit runs on the submit thread (held here until the test lets it run).
TEST(ServiceDependencies, ATaskOfAnArrayInTheSubmitCommitInFlightCanBeNamed) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  std::vector<std::function<void()>> held;
  w.reopen([&](daemon::Service& s) {
    auto second = SqliteStateStore::open(w.dir.file("a.db"));
    ASSERT_TRUE(second);
    s.set_submit_committer(
        std::move(*second), [&](std::function<void()> fn) { held.push_back(std::move(fn)); }, 1);
  });
  jobs::JobSpec array = eight_gpus();
  array.array = jobs::parse_array_spec("0-3").value();
  ASSERT_TRUE(w.svc->prepare(array, w.ada));
  const jobs::JobId a = w.svc->table().next_id();
  std::vector<jobs::JobId> ids;
  w.svc->submit({array}, w.ada, [&](Result<std::vector<jobs::JobId>> r) { ids = r.value(); });
  w.loop.run();  // the flush hands the commit to the submit thread
  ASSERT_EQ(held.size(), 1u);
  ASSERT_EQ(w.svc->table().find(a), nullptr);
  jobs::JobSpec on_task = eight_gpus({{T::kAfterOk, a, 2}});
  auto st = w.svc->prepare(on_task, w.ada);
  EXPECT_TRUE(st) << st.error().message;
  jobs::JobSpec no_task = eight_gpus({{T::kAfterOk, a, 7}});
  st = w.svc->prepare(no_task, w.ada);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "dependency afterok:" + std::to_string(a) + "_7: array " + std::to_string(a) +
                                    " (0-3) has no task 7");
  held.front()();
  held.clear();
  w.loop.run();
  EXPECT_EQ(ids, (std::vector<jobs::JobId>{a}));
  EXPECT_NE(w.svc->table().find(a), nullptr);
}

TEST(ServiceDependencies, AftercorrMakesEachTaskFollowTheTaskWithItsIndexAcrossARestart) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId a = w.submit_array("0-3");
  jobs::JobSpec spec = eight_gpus({{T::kAfterCorr, a}});
  spec.array = jobs::parse_array_spec("1-5").value();
  const jobs::JobId b = w.submit(spec);
  ASSERT_EQ(w.indexes(b), (std::vector<int>{1, 2, 3, 4, 5}));    // aftercorr does not hold the array back
  auto task_of_b = [&](size_t i) { return w.tasks(b)[i - 1]; };  // b's index i
  auto task_of_a = [&](size_t i) { return w.tasks(a)[i]; };
  EXPECT_EQ(w.job(task_of_b(1)).spec.after, (std::vector<jobs::Dependency>{{T::kAfterOk, a, 1}}));
  EXPECT_EQ(w.job(task_of_b(1)).reason, "dependency: waits for task 1 of array " + std::to_string(a));
  EXPECT_EQ(w.job(task_of_b(3)).state, JobState::kPending);
  // a has no index 4 or 5: those tasks of b wait for nothing.
  EXPECT_TRUE(w.job(task_of_b(4)).spec.after.empty());
  EXPECT_EQ(w.job(task_of_b(4)).state, JobState::kStarting);
  EXPECT_EQ(w.job(task_of_b(5)).state, JobState::kStarting);

  w.end({task_of_a(2)}, JobState::kCompleted, 0);
  EXPECT_EQ(w.job(task_of_b(2)).state, JobState::kStarting);
  EXPECT_EQ(w.job(task_of_b(3)).state, JobState::kPending);
  w.end({task_of_a(1)}, JobState::kFailed, 2);
  EXPECT_EQ(w.job(task_of_b(1)).state, JobState::kFailed);
  EXPECT_EQ(w.job(task_of_b(1)).reason,
            "dependency: task 1 of array " + std::to_string(a) + " did not complete successfully");

  ASSERT_TRUE(w.svc->store().sync());
  w.reopen();  // the tasks' dependencies are in their specs on disk
  EXPECT_EQ(w.job(task_of_b(3)).state, JobState::kPending);
  EXPECT_EQ(w.job(task_of_b(3)).spec.after, (std::vector<jobs::Dependency>{{T::kAfterOk, a, 3}}));
  w.end({task_of_a(3)}, JobState::kCompleted, 0);
  EXPECT_EQ(w.job(task_of_b(3)).state, JobState::kStarting);
}

}  // namespace
}  // namespace railyard
