// The scheduling pass: requested by any change that can alter the plan, coalesced into one posted pass,
// paced, run, and its plan applied. A pass has three steps, only the first and last on the loop:
//
//   loop: table.snapshot() ──► pass executor: Scheduler::schedule() ──post──► loop: plan_changes(),
//                                                                              commit, apply, observers
//
// The executor is inline by default (tests' fake loops) or a worker thread (run_on_thread(), the daemon).
// While a pass is in flight the loop keeps serving requests, and the table may change under the plan:
// plan_changes() re-checks every start against the table of the moment (job still PENDING, nodes still up,
// GPUs still free) and drops the stale ones; a dropped start, or any pass request made while the pass was in
// flight, asks for one more pass once it is applied. At most one pass is in flight. Passes are paced: the
// next one starts no sooner than max(kMinPassInterval, last pass's duration (snapshot to applied)) after the
// last one was applied, on the monotonic clock, so a stream of submits is not one fsync'd pass per submit,
// and passes take at most about half of the time.
//
// A pass budget (set_pass_budget(), --pass-budget-ms) bounds schedule(): it stops between jobs once the
// budget is spent (sched::Snapshot::out_of_time), the jobs it did not reach keep their reason and estimated
// start, and one more pass is asked for. Each pass starts again at the head of the queue, so the budget
// bounds how long an event waits for its pass; the jobs past it are reached as the head's work shrinks.
//
// A plan with many starts is applied in slices of kApplySlice starts, each committed and applied on its own
// and the next one posted, so the loop answers heartbeats and requests between them; the pass is in flight
// until the last slice, which also applies the plan's reasons, rejections and parking.
//
// Arrays: an array is submitted (and synced) as one job record; each pass first creates its next tasks as
// jobs, a window at a time, and ends the arrays whose tasks have all ended (JobTable::array_changes).
//
// The steps themselves (arrays, schedule(), the plan's changes, parking) are lifecycle::PassDriver's, the
// simulator's too; this class adds the pacing, the executor, the slices, the compact wakes and the stats.
//
// Runs on the loop, but for schedule() on the executor.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "scheduler/core/cycle.hpp"
#include "scheduler/daemon/loop.hpp"
#include "scheduler/daemon/worker_thread.hpp"
#include "scheduler/lifecycle/job_table.hpp"
#include "scheduler/lifecycle/pass_driver.hpp"
#include "scheduler/store/state_store.hpp"

namespace railyard::daemon {

inline constexpr std::chrono::milliseconds kMinPassInterval{20};
// Starts applied (and committed) at once: a plan with more is applied in slices, the loop serving what
// waits between them (a slice of this size takes tens of milliseconds on a 10,000-node cluster).
inline constexpr size_t kApplySlice = 1000;

struct PassStats {
  int64_t passes_total = 0;
  double last_pass_seconds = 0;  // snapshot to applied, wall time
  double pass_seconds_sum = 0;
  // The last pass's steps: snapshot and apply block the loop, schedule() runs on the executor.
  double last_snapshot_seconds = 0, last_schedule_seconds = 0, last_apply_seconds = 0;
  int64_t stale_starts_total = 0;  // starts dropped because the table changed during the pass
  int64_t array_tasks_total = 0;   // jobs created as the tasks of arrays
  int64_t cut_passes_total = 0;    // passes that stopped at the pass budget
  int64_t last_unexamined = 0;     // pending jobs the last pass did not reach
};

class PassRunner {
 public:
  using Clock = std::function<int64_t()>;  // seconds since the epoch
  using Monotonic = std::function<std::chrono::steady_clock::time_point()>;
  // Where a pass's changes go. `write`: the commit (with the lifecycle's run changes and the pre-commit
  // hooks), nothing applied; `applied`: into the table, and observers told; `noted`: observers told of
  // waiting jobs whose reason changed in memory only (JobTable::PendingNote), already in the table.
  struct Sink {
    std::function<Status(store::WriteBatch&)> write;
    std::function<void(const store::WriteBatch&)> applied;
    std::function<void(const store::WriteBatch&)> noted;
  };

  // `next_id`: the next job id, shared with the submit intake (an array's tasks take ids).
  PassRunner(lifecycle::JobTable& table, Loop loop, Clock clock, Clock clock_ms, jobs::JobId& next_id,
             Sink sink);
  ~PassRunner();  // waits for a pass in flight on the worker thread; its result is dropped
  PassRunner(const PassRunner&) = delete;
  PassRunner& operator=(const PassRunner&) = delete;

  // Where schedule() runs. Call before the first request. A test's executor must run or drop its work before
  // the runner is destroyed.
  void run_on_thread();
  void set_executor(Executor executor) { executor_ = std::move(executor); }
  // The clock that paces and times passes; steady_clock by default. Called on the loop and on the executor.
  void set_monotonic_clock(Monotonic clock) { monotonic_ = std::move(clock); }
  void set_policy(const sched::PolicyConfig& policy) { policy_ = policy; }
  // The longest schedule() may take, on the monotonic clock (0: no bound). See the header comment. Read on
  // the executor: set it before the first request (or, with a test's executor, between passes).
  void set_pass_budget(std::chrono::milliseconds budget) { budget_ = budget; }

  // Requests a pass (coalesced and paced; see the header comment).
  void request();
  const PassStats& stats() const { return stats_; }

 private:
  struct Work;
  void run();
  void tend_arrays();
  Status commit(lifecycle::Changes& changes, bool array_tasks);
  void finish(const std::shared_ptr<Work>& done);
  void apply_slice(const std::shared_ptr<Work>& done, size_t from);
  void end_pass();
  void note_compact_waits(const Work& work);

  lifecycle::JobTable& table_;
  Loop loop_;
  Clock clock_;
  Clock clock_ms_;
  jobs::JobId& next_id_;
  Sink sink_;
  Monotonic monotonic_ = [] { return std::chrono::steady_clock::now(); };
  sched::PolicyConfig policy_;
  std::chrono::milliseconds budget_{0};
  PassStats stats_;
  bool posted_ = false;
  bool in_flight_ = false;  // snapshot taken, plan not applied yet
  bool again_ = false;      // a pass was requested while one was in flight
  std::chrono::steady_clock::time_point last_end_{};
  std::chrono::steady_clock::duration last_duration_{};
  // The time of the pass posted for the earliest end of a compact wait (Plan::wake_at), if one is posted.
  // When each wait began is in the job's record (JobRecord::compact_since, persisted).
  std::optional<int64_t> wake_posted_;
  // The pass's steps (lifecycle/pass_driver.hpp); its schedule() on the executor only, one pass at a time.
  // The scheduler's reuse check compares the running jobs' GPU buffers with the last snapshot's, so that
  // snapshot is kept alive (last_work_, also executor-only) until the next one is built: a new buffer can
  // never have an old one's address.
  lifecycle::PassDriver driver_;
  std::shared_ptr<Work> last_work_;
  Executor executor_;
  std::shared_ptr<char> alive_ = std::make_shared<char>();  // expired once destruction starts
  std::unique_ptr<WorkerThread> thread_;                    // last: joined first
};

}  // namespace railyard::daemon
