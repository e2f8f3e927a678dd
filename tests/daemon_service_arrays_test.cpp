// Unit tests of job arrays in the daemon's Service: one record at submit, tasks a window at a time, restarts,
// cancel/hold/release of an array, afterok on an array (ArrayWorld: tests/service_harness.hpp).
#include <gtest/gtest.h>

#include <algorithm>

#include "scheduler/daemon/service.hpp"
#include "tests/service_harness.hpp"

namespace railyard {
namespace {

using namespace service_test;  // NOLINT(google-build-using-namespace): the shared harness

// --- Arrays: one record at submit, tasks created a window at a time by the passes ---

TEST(ServiceArrays, AnArrayIsOneRecordAndItsTasksComeAWindowAtATime) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId a = w.submit_array("10-19%3");
  ASSERT_EQ(a, 1);
  EXPECT_EQ(w.svc->stats().submits_total, 1);  // the submit stored one record
  EXPECT_EQ(w.job(a).state, JobState::kPending);
  // The first pass created the first three tasks (the "%3") and placed them; the array itself is never
  // placed.
  ASSERT_EQ(w.tasks(a), (std::vector<jobs::JobId>{2, 3, 4}));
  EXPECT_EQ(w.indexes(a), (std::vector<int>{10, 11, 12}));
  EXPECT_EQ(w.count(a, JobState::kStarting), 3u);
  EXPECT_TRUE(w.job(a).nodes.empty());
  const JobRecord& t = w.job(3);
  EXPECT_EQ(t.spec.array_job, a);
  EXPECT_FALSE(t.spec.array);
  EXPECT_EQ(t.spec.env.at("RAILYARD_ARRAY_JOB_ID"), "1");
  EXPECT_EQ(t.spec.env.at("RAILYARD_ARRAY_TASK_ID"), "11");
  EXPECT_EQ(t.submit_time, w.job(a).submit_time);
  EXPECT_EQ(w.svc->stats().array_tasks_total, 3);

  w.end({2}, JobState::kCompleted);  // one ends: one more is created
  EXPECT_EQ(w.indexes(a), (std::vector<int>{10, 11, 12, 13}));
  EXPECT_EQ(w.progress(a).active, 3);
  w.end({3}, JobState::kFailed, 3);
  EXPECT_EQ(w.progress(a).failed, 1);
  EXPECT_EQ(w.progress(a).completed, 1);
  while (w.progress(a).active > 0) {
    std::vector<jobs::JobId> live;
    for (jobs::JobId id : w.tasks(a))
      if (!jobs::is_terminal(w.job(id).state)) live.push_back(id);
    EXPECT_LE(live.size(), 3u);
    w.end(live, JobState::kCompleted);
  }
  EXPECT_EQ(w.indexes(a), (std::vector<int>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(w.job(a).state, JobState::kFailed);  // one task failed
  EXPECT_EQ(w.job(a).reason, "1 of 10 tasks did not complete");
  EXPECT_EQ(w.job(a).exit_code, 3);  // the highest of its tasks', as sbatch --wait gives
  EXPECT_EQ(w.job(a).end_time, w.now);
  EXPECT_FALSE(w.svc->table().has_open_arrays());

  const jobs::JobId b = w.submit_array("0-1");
  w.end(w.tasks(b), JobState::kCompleted, 0);
  EXPECT_EQ(w.job(b).state, JobState::kCompleted);
  EXPECT_EQ(w.job(b).exit_code, 0);
  EXPECT_EQ(w.job(b).reason, "");
}

TEST(ServiceArrays, WithoutACapTheWindowFillsTheClusterAndLaterTasksWait) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const int64_t gpus = w.cluster->gpu_count();
  const jobs::JobId a = w.submit_array("0-999", 8);
  const int64_t window = std::max<int64_t>(lifecycle::kMinArrayWindow, gpus / 8);
  EXPECT_EQ(w.svc->table().array_window(w.job(a).spec), window);
  EXPECT_EQ(w.progress(a).created(), window);
  EXPECT_EQ(static_cast<int64_t>(w.count(a, JobState::kStarting)), gpus / 8);
  EXPECT_EQ(static_cast<int64_t>(w.count(a, JobState::kPending)), window - gpus / 8);
}

// A million-task array is one record and a window of tasks, whose indexes come in the array's order as
// tasks end; cancelling it ends what was created and creates nothing more.
TEST(ServiceArrays, AMillionTaskArrayIsOneRecordAndAWindowInOrder) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId a = w.submit_array("999999,0-999998", 8);
  ASSERT_NE(a, 0);
  EXPECT_EQ(w.svc->stats().submits_total, 1);
  EXPECT_EQ(w.progress(a).total, 1'000'000);
  const int64_t window = w.svc->table().array_window(w.job(a).spec);
  ASSERT_EQ(w.progress(a).created(), window);
  std::vector<int> expected{999999};
  for (int i = 0; static_cast<int64_t>(expected.size()) < window; ++i) expected.push_back(i);
  EXPECT_EQ(w.indexes(a), expected);
  const size_t running = w.count(a, JobState::kStarting);
  ASSERT_GT(running, 0u);
  std::vector<jobs::JobId> first;  // the tasks started: the first of the array's order
  for (size_t i = 0; i < running; ++i) {
    EXPECT_EQ(w.job(w.tasks(a)[i]).state, JobState::kStarting) << i;
    first.push_back(w.tasks(a)[i]);
  }
  w.end(first, JobState::kCompleted);
  EXPECT_EQ(w.progress(a).created(), window + static_cast<int64_t>(running));
  for (int64_t i = window; i < w.progress(a).created(); ++i)
    EXPECT_EQ(w.job(w.tasks(a)[static_cast<size_t>(i)]).spec.array_task, i - 1) << "in the array's order";
  ASSERT_TRUE(w.svc->act(a, jobs::JobEvent::kCancelled, w.ada));
  w.loop.run();
  EXPECT_EQ(w.job(a).state, JobState::kCancelled);
  EXPECT_EQ(w.progress(a).active, 0);
  EXPECT_EQ(w.progress(a).created(), window + static_cast<int64_t>(running));
  EXPECT_FALSE(w.svc->table().has_open_arrays());
}

// Behind a full cluster an array creates kMinArrayWindow tasks, not its window: none of the others could
// start. When the GPUs come free, the pass that finds them creates enough tasks to fill them, and starts
// them in the array's order.
TEST(ServiceArrays, BehindAFullClusterOnlyTasksThatCouldStartAreCreated) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const int64_t gpus = w.cluster->gpu_count();
  ASSERT_GT(gpus, lifecycle::kMinArrayWindow);
  jobs::JobSpec all;
  all.gpus = static_cast<int>(gpus);
  all.command = {"true"};
  const jobs::JobId big = w.submit(all);
  ASSERT_EQ(w.job(big).state, JobState::kStarting);
  const jobs::JobId a = w.submit_array("0-999999", 1);
  ASSERT_EQ(w.svc->table().array_window(w.job(a).spec), gpus);
  EXPECT_EQ(w.progress(a).created(), lifecycle::kMinArrayWindow);
  EXPECT_EQ(w.progress(a).pending, lifecycle::kMinArrayWindow);
  w.end({big}, JobState::kCompleted);
  EXPECT_EQ(w.progress(a).created(), gpus);
  EXPECT_EQ(w.progress(a).pending, 0);
  EXPECT_EQ(static_cast<int64_t>(w.count(a, JobState::kStarting)), gpus);
  for (int64_t i = 0; i < gpus; ++i)
    EXPECT_EQ(w.job(w.tasks(a)[static_cast<size_t>(i)]).spec.array_task, i) << "in the array's order";
}

TEST(ServiceArrays, ARestartGoesOnFromTheTasksOnDiskWithoutRepeatingAnIndex) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId a = w.submit_array("0-7%2");
  w.end(w.tasks(a), JobState::kCompleted);
  ASSERT_EQ(w.progress(a).created(), 4);
  ASSERT_TRUE(w.svc->store().sync());
  w.reopen();
  const auto& p = w.progress(a);
  EXPECT_EQ(p.total, 8);
  EXPECT_EQ(p.created(), 4);
  EXPECT_EQ(p.completed, 2);
  EXPECT_EQ(p.active, 2);
  while (w.progress(a).active > 0) {
    std::vector<jobs::JobId> live;
    for (jobs::JobId id : w.tasks(a))
      if (!jobs::is_terminal(w.job(id).state)) live.push_back(id);
    w.end(live, JobState::kCompleted);
  }
  EXPECT_EQ(w.indexes(a), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(w.job(a).state, JobState::kCompleted);
}

TEST(ServiceArrays, CancelHoldAndReleaseOfAnArrayReachItsTasks) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const int per_gpus = static_cast<int>(w.cluster->gpu_count() / 2);  // two tasks fill the cluster
  const jobs::JobId a = w.submit_array("0-9%4", per_gpus);
  EXPECT_EQ(w.count(a, JobState::kStarting), 2u);
  EXPECT_EQ(w.count(a, JobState::kPending), 2u);

  auto held = w.svc->act(a, jobs::JobEvent::kHeld, w.ada);
  ASSERT_TRUE(held) << held.error().message;
  w.loop.run();
  EXPECT_EQ(w.job(a).state, JobState::kHeld);
  EXPECT_EQ(w.count(a, JobState::kHeld), 2u);  // the pending ones
  w.end({w.tasks(a)[0], w.tasks(a)[1]}, JobState::kCompleted);
  EXPECT_EQ(w.progress(a).created(), 4);  // a held array creates nothing
  EXPECT_EQ(w.count(a, JobState::kHeld), 2u);

  ASSERT_TRUE(w.svc->act(a, jobs::JobEvent::kReleased, w.ada));
  w.loop.run();
  EXPECT_EQ(w.job(a).state, JobState::kPending);
  EXPECT_EQ(w.count(a, JobState::kStarting), 2u);
  EXPECT_EQ(w.progress(a).created(), 6);

  auto cancelled = w.svc->act(a, jobs::JobEvent::kCancelled, w.ada);
  ASSERT_TRUE(cancelled) << cancelled.error().message;
  w.loop.run();
  EXPECT_EQ(w.job(a).state, JobState::kCancelled);
  EXPECT_EQ(w.progress(a).active, 0);
  EXPECT_EQ(w.count(a, JobState::kCancelled), 4u);  // two started, two pending
  EXPECT_EQ(w.progress(a).created(), 6);
  const daemon::Caller bob{"bob", store::Role::kUser};
  EXPECT_EQ(w.svc->act(a, jobs::JobEvent::kCancelled, bob).error().code, ErrorCode::kPermission);
  EXPECT_EQ(w.svc->act(a, jobs::JobEvent::kCancelled, w.ada).error().code, ErrorCode::kConflict);
}

TEST(ServiceArrays, AfterokOnAnArrayWaitsForAllItsTasksAndUsersCannotMakeTasks) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId a = w.submit_array("0-2");
  jobs::JobSpec after;
  after.gpus = 8;
  after.command = {"true"};
  after.afterok = {a};
  const jobs::JobId b = w.submit(after);
  EXPECT_EQ(w.job(b).state, JobState::kPending);
  w.end({w.tasks(a)[0], w.tasks(a)[1]}, JobState::kCompleted);
  EXPECT_EQ(w.job(b).state, JobState::kPending);
  w.end({w.tasks(a)[2]}, JobState::kCompleted);
  EXPECT_EQ(w.job(a).state, JobState::kCompleted);
  EXPECT_EQ(w.job(b).state, JobState::kStarting);

  // An array that depends on a job creates no task before that job completed, and fails without any when
  // it cannot complete.
  jobs::JobSpec blocker;
  blocker.gpus = 8;
  blocker.command = {"true"};
  const jobs::JobId x = w.submit(blocker);
  const jobs::JobId y = w.submit(blocker);
  auto waiting_array = [&](jobs::JobId dep) {
    jobs::JobSpec spec;
    spec.gpus = 8;
    spec.command = {"true"};
    spec.afterok = {dep};
    spec.array = jobs::parse_array_spec("0-3").value();
    return w.submit(spec);
  };
  const jobs::JobId after_x = waiting_array(x), after_y = waiting_array(y);
  EXPECT_EQ(w.progress(after_x).created(), 0);
  EXPECT_EQ(w.job(after_x).reason, "dependency: waits for job " + std::to_string(x));
  w.end({x}, JobState::kCompleted);
  EXPECT_EQ(w.progress(after_x).created(), 4);
  EXPECT_EQ(w.job(after_x).reason, "");
  w.end({y}, JobState::kFailed);
  EXPECT_EQ(w.progress(after_y).created(), 0);
  EXPECT_EQ(w.job(after_y).state, JobState::kFailed);
  EXPECT_EQ(w.job(after_y).reason, "dependency: job " + std::to_string(y) + " did not complete successfully");

  jobs::JobSpec forged;
  forged.gpus = 1;
  forged.array_job = a;
  forged.array_task = 7;
  auto refused = w.svc->prepare(forged, w.ada);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("set by the scheduler"), std::string::npos);
}

}  // namespace
}  // namespace railyard
