#include "scheduler/daemon/pass_runner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace railyard::daemon {

using store::WriteBatch;

// One pass between its snapshot (taken on the loop) and its apply (on the loop).
struct PassRunner::Work {
  sched::Snapshot snap;
  sched::Plan plan;
  std::string error;  // schedule() threw: nothing to apply
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::duration snapshot_time{}, schedule_time{}, apply_time{};
  // Applying it, slice by slice (PassRunner::apply_slice).
  size_t applied = 0, stale = 0, updates = 0, slices = 0;
};

PassRunner::PassRunner(lifecycle::JobTable& table, Loop loop, Clock clock, Clock clock_ms,
                       jobs::JobId& next_id, Sink sink)
    : table_(table),
      loop_(std::move(loop)),
      clock_(std::move(clock)),
      clock_ms_(std::move(clock_ms)),
      next_id_(next_id),
      sink_(std::move(sink)),
      driver_(table,
              {[this](lifecycle::Changes& changes, bool array_tasks) { return commit(changes, array_tasks); },
               [this](const std::vector<lifecycle::JobTable::PendingNote>& notes) {
                 WriteBatch seen;  // observers hear of new reasons too (the dashboard shows them)
                 seen.updates.reserve(notes.size());
                 for (const auto& n : notes) seen.updates.push_back(*table_.find(n.job));
                 sink_.noted(seen);
               }}) {}

// The driver's commit: written to the store (kWritten: the array itself was synced when it was submitted,
// tasks lost with the machine are created again from the tasks that remain, and a lost start is placed
// again), then applied.
Status PassRunner::commit(lifecycle::Changes& changes, bool array_tasks) {
  WriteBatch b(std::move(changes), store::Durability::kWritten);
  if (auto s = sink_.write(b); !s) return s;
  sink_.applied(b);
  if (array_tasks) stats_.array_tasks_total += static_cast<int64_t>(b.inserts.size());
  return ok();
}

PassRunner::~PassRunner() {
  alive_.reset();  // a pass finishing now posts an apply that will do nothing
  thread_.reset();
}

void PassRunner::run_on_thread() {
  thread_ = std::make_unique<WorkerThread>();
  executor_ = thread_->executor();
}

void PassRunner::request() {
  if (in_flight_) {
    again_ = true;
    return;
  }
  if (posted_) return;
  posted_ = true;
  const auto now = monotonic_();
  const auto earliest =
      last_end_ + std::max<std::chrono::steady_clock::duration>(kMinPassInterval, last_duration_);
  auto pass = guarded("scheduling pass", [this, alive = std::weak_ptr<char>(alive_)] {
    if (!alive.expired()) run();
  });
  if (now >= earliest) return loop_.post(std::move(pass));
  loop_.post_after(std::chrono::ceil<std::chrono::milliseconds>(earliest - now), std::move(pass));
}

// On the loop: the snapshot, then schedule() on the executor, whose result comes back to finish().
void PassRunner::run() {
  posted_ = false;
  if (in_flight_) return void(again_ = true);
  auto work = std::make_shared<Work>();
  work->start = monotonic_();
  tend_arrays();
  work->snap = table_.snapshot(clock_());
  work->snap.config = policy_;
  work->snapshot_time = monotonic_() - work->start;
  if (work->snap.pending.empty()) return;
  in_flight_ = true;
  std::weak_ptr<char> alive = alive_;
  auto compute = [this, work, alive] {
    const auto t = monotonic_();
    if (budget_.count() > 0) work->snap.out_of_time = [this, until = t + budget_] { return monotonic_() >= until; };
    try {
      work->plan = driver_.schedule(work->snap);
    } catch (const std::exception& e) {
      work->error = e.what();
    }
    work->schedule_time = monotonic_() - t;
    // The scheduler's memory of this snapshot (see pass_runner.hpp). Swapped here, the last pass's snapshot
    // and plan (one string per pending job) are freed on this thread, not on the loop.
    last_work_ = work;
    loop_.post(guarded("scheduling pass", [this, work, alive] {
      if (!alive.expired()) finish(work);
    }));
  };
  if (executor_) return executor_(std::move(compute));
  compute();
}

// Before a pass: open arrays get their next tasks (or end), so the pass sees them.
void PassRunner::tend_arrays() {
  if (auto created = driver_.tend_arrays(clock_(), next_id_); !created)
    spdlog::error("array tasks: commit failed: {}", created.error().message);
}

// Posts a pass for the earliest end of a compact wait: nothing else may happen then. (When each wait began
// goes into the job's record: JobTable::plan_changes.)
void PassRunner::note_compact_waits(const Work& work) {
  const auto wake = work.plan.wake_at;
  if (!wake || !loop_.post_after || (wake_posted_ && *wake_posted_ <= *wake)) return;
  wake_posted_ = *wake;
  const int64_t delay_ms = std::max<int64_t>(0, *wake * 1000 - clock_ms_()) + 20;  // into the wake second
  std::weak_ptr<char> alive = alive_;
  loop_.post_after(std::chrono::milliseconds(delay_ms), guarded("compact wait", [this, alive] {
                     if (alive.expired()) return;
                     wake_posted_.reset();
                     request();
                   }));
}

void PassRunner::finish(const std::shared_ptr<Work>& done) {
  const Work& work = *done;
  if (!work.error.empty()) {
    spdlog::error("scheduling pass: internal error: {}", work.error);
    end_pass();
    return;
  }
  note_compact_waits(work);
  apply_slice(done, 0);
}

// The pass is over (applied, or given up): the next may start, paced from now.
void PassRunner::end_pass() {
  in_flight_ = false;
  last_end_ = monotonic_();
  if (again_) {
    again_ = false;
    request();
  }
}

// Applies the plan's starts from `from` on, kApplySlice of them, and with the last slice everything else
// (reasons, rejections, parking); then posts the next slice, so that heartbeats, submits and reads are
// served between slices. Each slice is re-checked against the table of its moment (plan_changes()).
void PassRunner::apply_slice(const std::shared_ptr<Work>& done, size_t from) {
  using Clock = std::chrono::steady_clock;
  Work& work = *done;
  const auto t_apply = monotonic_();
  const int64_t now = clock_();
  const size_t to = std::min(work.plan.starts.size(), from + kApplySlice);
  const bool last = to == work.plan.starts.size();
  sched::Plan slice;
  slice.starts.assign(std::make_move_iterator(work.plan.starts.begin() + static_cast<std::ptrdiff_t>(from)),
                      std::make_move_iterator(work.plan.starts.begin() + static_cast<std::ptrdiff_t>(to)));
  if (last) {
    slice.pending = std::move(work.plan.pending);
    slice.rejected = std::move(work.plan.rejected);
    slice.unexamined = std::move(work.plan.unexamined);
  }
  const auto changes = driver_.apply(slice, now, last, work.snap.config.explain);
  if (!changes) {
    spdlog::error("scheduling pass: commit failed: {}", changes.error().message);
    end_pass();  // the starts not applied are planned again by the next pass
    return;
  }
  work.applied += to - from - changes->stale;
  work.stale += changes->stale;
  work.updates += changes->updates;
  work.apply_time += monotonic_() - t_apply;
  if (!last) {
    ++work.slices;
    std::weak_ptr<char> alive = alive_;
    loop_.post(guarded("scheduling pass", [this, done, to, alive] {
      if (!alive.expired()) apply_slice(done, to);
    }));
    return;
  }
  const auto end = monotonic_();
  last_duration_ = end - work.start;
  const auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  ++stats_.passes_total;
  stats_.last_pass_seconds = secs(last_duration_);
  stats_.pass_seconds_sum += stats_.last_pass_seconds;
  stats_.last_snapshot_seconds = secs(work.snapshot_time);
  stats_.last_schedule_seconds = secs(work.schedule_time);
  stats_.last_apply_seconds = secs(work.apply_time);
  stats_.stale_starts_total += static_cast<int64_t>(work.stale);
  const bool cut = !slice.unexamined.empty();
  stats_.cut_passes_total += cut ? 1 : 0;
  stats_.last_unexamined = static_cast<int64_t>(slice.unexamined.size());
  if (work.applied > 0 || !slice.rejected.empty() || stats_.last_pass_seconds > 0.5 || cut)
    spdlog::info(
        "pass: {} pending ({} parked{}), {} started, {} stale, {} rejected, {} updates, {} new reasons, "
        "{:.3f} s (snapshot {:.3f} s, schedule() {:.3f} s, apply {:.3f} s{})",
        work.snap.pending.size(), table_.parked_count(),
        cut ? ", " + std::to_string(slice.unexamined.size()) + " not reached within the budget" : "",
        work.applied, work.stale, slice.rejected.size(), work.updates, changes->notes,
        stats_.last_pass_seconds, stats_.last_snapshot_seconds, stats_.last_schedule_seconds,
        stats_.last_apply_seconds, work.slices > 0 ? " in " + std::to_string(work.slices + 1) + " slices" : "");
  if (work.stale > 0 || cut) again_ = true;
  end_pass();
}

}  // namespace railyard::daemon
