#include "scheduler/daemon/service.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <mutex>
#include <thread>
#include <utility>

#include "scheduler/core/cycle.hpp"
#include "scheduler/daemon/guarded.hpp"

namespace railyard::daemon {
namespace {

// The verb of a job action, for messages ("only its owner or an admin may cancel it").
std::string_view verb(jobs::JobEvent event) {
  switch (event) {
    case jobs::JobEvent::kCancelled:
      return "cancel";
    case jobs::JobEvent::kHeld:
      return "hold";
    case jobs::JobEvent::kReleased:
      return "release";
    default:
      return "change";
  }
}

}  // namespace

// One pass between its snapshot (taken on the loop) and its apply (on the loop).
struct Service::PassWork {
  sched::Snapshot snap;
  sched::Plan plan;
  std::string error;  // schedule() threw: nothing to apply
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::duration snapshot_time{}, schedule_time{};
};

// A thread that runs posted work in order; the destructor drops work not started and joins.
class Service::PassThread {
 public:
  PassThread() : thread_([this] { work_loop(); }) {}
  ~PassThread() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  void run(std::function<void()> fn) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(fn));
    }
    wake_.notify_one();
  }

 private:
  void work_loop() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

Service::Service(const topology::Cluster& cluster, std::unique_ptr<store::StateStore> store, Loop loop,
                 Clock clock)
    : table_(cluster), store_(std::move(store)), loop_(std::move(loop)), clock_(std::move(clock)) {}

Service::~Service() {
  alive_.reset();  // a pass, submit commit or sync finishing now posts an apply that will do nothing
  thread_.reset();
  submit_thread_.reset();
  sync_thread_.reset();
  if (auto s = write_deferred(); !s) spdlog::error("writing the last agent reports: {}", s.error().message);
  // After the last commit, which may hand it a checkpoint (dropped: the store's close checkpoints).
  checkpoint_thread_.reset();
}

store::StateStore& Service::store() {
  if (auto s = write_deferred(); !s) spdlog::error("writing agent reports: {}", s.error().message);
  return *store_;
}

void Service::run_passes_on_thread() {
  thread_ = std::make_unique<PassThread>();
  executor_ = [t = thread_.get()](std::function<void()> fn) { t->run(std::move(fn)); };
}

void Service::sync_log_on_thread() {
  sync_thread_ = std::make_unique<PassThread>();
  sync_executor_ = [t = sync_thread_.get()](std::function<void()> fn) { t->run(std::move(fn)); };
}

void Service::checkpoint_on_thread() {
  checkpoint_thread_ = std::make_unique<PassThread>();
  const Executor run = [t = checkpoint_thread_.get()](std::function<void()> fn) { t->run(std::move(fn)); };
  const auto failed = [](const Error& e) { spdlog::error("{}", e.message); };
  store_->checkpoint_on(run, failed);
  if (submit_store_) submit_store_->checkpoint_on(run, failed);
}

void Service::commit_submits_on_thread(std::unique_ptr<store::StateStore> store, size_t min_jobs) {
  submit_thread_ = std::make_unique<PassThread>();
  set_submit_committer(
      std::move(store), [t = submit_thread_.get()](std::function<void()> fn) { t->run(std::move(fn)); },
      min_jobs);
}

void Service::set_submit_committer(std::unique_ptr<store::StateStore> store, Executor executor,
                                   size_t min_jobs) {
  submit_store_ = std::move(store);
  submit_executor_ = std::move(executor);
  submit_thread_min_jobs_ = min_jobs;
}

Status Service::set_submit_durability(store::Durability durability) {
  if (durability == store::Durability::kDeferred)
    return invalid("a submit is acknowledged once written or once synced, not deferred");
  submit_durability_ = durability;
  stats_.submits_synced = durability == store::Durability::kSynced;
  return ok();
}

Status Service::open() {
  auto state = store_->load();
  if (!state) return state.error();
  for (const auto& k : state->idempotency) idempotent_done_[k.key] = {k.first_id, k.count};
  table_.load(std::move(*state));
  next_id_ = table_.next_id();
  spdlog::info("loaded {} jobs ({} not finished)", table_.jobs().size(), table_.active_count());
  request_pass();
  return ok();
}

Result<JobRecord> Service::act(JobId id, jobs::JobEvent event, const Caller& who,
                               const store::AuditRecord* audit) {
  const JobRecord* cur = table_.find(id);
  if (!cur) return not_found("job " + std::to_string(id) + " not found");
  if (cur->spec.user != who.user && !who.admin())
    return Error{ErrorCode::kPermission, "job " + std::to_string(id) + " belongs to " + cur->spec.user +
                                             "; only its owner or an admin may " + std::string(verb(event)) +
                                             " it"};
  auto changes = table_.event_changes(id, event, who.user, clock_());
  if (!changes) return changes.error();
  WriteBatch batch(std::move(*changes));
  if (audit) batch.audit.push_back(*audit);
  if (auto s = write(batch); !s) return s.error();
  applied(batch);
  spdlog::info("job {} {} by {}", id, jobs::to_string(event), who.user);
  request_pass();
  return *table_.find(id);
}

Status Service::set_node_health(const std::string& name, sched::NodeHealth health, std::string reason,
                                const Caller& who, const store::AuditRecord* audit) {
  if (!who.admin()) return Error{ErrorCode::kPermission, "node changes need the admin role"};
  const topology::NodeId id = table_.cluster().find_node(name);
  if (id < 0) return not_found("node " + name + " not found");
  if (table_.health(id) == sched::NodeHealth::kRemoved && health != sched::NodeHealth::kUp)
    return Error{ErrorCode::kConflict, "node " + name + " is removed: resume it first"};
  WriteBatch b;
  const std::string what = std::string(sched::to_string(health)) + (reason.empty() ? "" : ": " + reason);
  b.nodes.push_back({name, health, std::move(reason)});
  b.events.push_back({"node:" + name, clock_(), who.user, what});
  if (audit) b.audit.push_back(*audit);
  stamp_events(b);
  if (auto s = store_commit(b); !s) return s;
  committed(b.durability);
  applied(b);
  spdlog::info("node {} {} by {}", name, what, who.user);
  request_pass();
  return ok();
}

Status Service::remove_node(const std::string& name, const Caller& who, const store::AuditRecord* audit) {
  if (!who.admin()) return Error{ErrorCode::kPermission, "node changes need the admin role"};
  const topology::NodeId id = table_.cluster().find_node(name);
  if (id < 0) return not_found("node " + name + " not found");
  if (table_.health(id) == sched::NodeHealth::kRemoved) {
    if (audit) record_audit(*audit);
    return ok();
  }
  auto on_node = [&](const std::vector<std::string>& nodes) {
    return std::find(nodes.begin(), nodes.end(), name) != nodes.end();
  };
  for (const auto& [job, r] : table_.jobs())
    if ((r.state == jobs::JobState::kStarting || r.state == jobs::JobState::kRunning) && on_node(r.nodes))
      return Error{ErrorCode::kConflict,
                   "node " + name + " runs job " + std::to_string(job) +
                       ": drain it first and wait for its jobs to end (or cancel them)"};
  for (const auto& [alloc, h] : table_.gpu_holds())
    if (on_node(h.nodes))
      return Error{ErrorCode::kConflict, "node " + name + " still holds the GPUs of allocation " + alloc +
                                             " (its kill is not confirmed yet): try again once it is"};
  WriteBatch b;
  b.nodes.push_back({name, sched::NodeHealth::kRemoved, "removed by " + who.user});
  b.events.push_back({"node:" + name, clock_(), who.user, "removed"});
  if (audit) b.audit.push_back(*audit);
  stamp_events(b);
  if (auto s = store_commit(b); !s) return s;
  committed(b.durability);
  applied(b);
  spdlog::info("node {} removed by {}", name, who.user);
  request_pass();
  return ok();
}

void Service::request_pass() {
  if (pass_in_flight_) {
    pass_again_ = true;
    return;
  }
  if (pass_posted_) return;
  pass_posted_ = true;
  const auto now = monotonic_();
  const auto earliest =
      last_pass_end_ + std::max<std::chrono::steady_clock::duration>(kMinPassInterval, last_pass_duration_);
  auto pass = guarded("scheduling pass", [this] { run_pass(); });
  if (now >= earliest) return loop_.post(std::move(pass));
  loop_.post_after(std::chrono::ceil<std::chrono::milliseconds>(earliest - now), std::move(pass));
}

// On the loop: the snapshot, then schedule() on the executor, whose result comes back to finish_pass().
void Service::run_pass() {
  pass_posted_ = false;
  if (pass_in_flight_) return void(pass_again_ = true);
  auto work = std::make_shared<PassWork>();
  work->start = monotonic_();
  tend_arrays();
  work->snap = table_.snapshot(clock_());
  work->snap.config = policy_;
  work->snapshot_time = monotonic_() - work->start;
  if (work->snap.pending.empty()) return;
  pass_in_flight_ = true;
  std::weak_ptr<char> alive = alive_;
  auto compute = [this, work, alive] {
    const auto t = monotonic_();
    try {
      work->plan = scheduler_.schedule(work->snap);
      // By id, so plan_changes() walks it alongside the table instead of a lookup per job (on the loop).
      std::sort(work->plan.pending.begin(), work->plan.pending.end(),
                [](const auto& a, const auto& b) { return a.job < b.job; });
    } catch (const std::exception& e) {
      work->error = e.what();
    }
    work->schedule_time = monotonic_() - t;
    // The scheduler's memory of this snapshot (see service.hpp). Swapped here, the last pass's snapshot
    // and plan (one string per pending job) are freed on this thread, not on the loop.
    last_work_ = work;
    loop_.post(guarded("scheduling pass", [this, work, alive] {
      if (!alive.expired()) finish_pass(work);
    }));
  };
  if (executor_) return executor_(std::move(compute));
  compute();
}

// Before a pass: open arrays get their next tasks (or end), so the pass sees them. kWritten like a pass: the
// array itself was synced when it was submitted, and tasks lost with the machine are created again from
// the tasks that remain (JobTable::load rebuilds the progress).
void Service::tend_arrays() {
  if (!table_.has_open_arrays()) return;
  JobId next = next_id_;
  WriteBatch b(table_.array_changes(clock_(), next), store::Durability::kWritten);
  if (b.empty()) return;
  if (auto s = write(b); !s) {
    spdlog::error("array tasks: commit failed: {}", s.error().message);
    return;
  }
  next_id_ = next;
  applied(b);
  stats_.array_tasks_total += static_cast<int64_t>(b.inserts.size());
}

// Posts a pass for the earliest end of a compact wait: nothing else may happen then. (When each wait began
// goes into the job's record: JobTable::plan_changes.)
void Service::note_compact_waits(const PassWork& work) {
  const auto wake = work.plan.wake_at;
  if (!wake || !loop_.post_after || (wake_posted_ && *wake_posted_ <= *wake)) return;
  wake_posted_ = *wake;
  const int64_t delay_ms = std::max<int64_t>(0, *wake * 1000 - now_ms()) + 20;  // into the wake second
  std::weak_ptr<char> alive = alive_;
  loop_.post_after(std::chrono::milliseconds(delay_ms), guarded("compact wait", [this, alive] {
                     if (alive.expired()) return;
                     wake_posted_.reset();
                     request_pass();
                   }));
}

void Service::finish_pass(const std::shared_ptr<PassWork>& done) {
  using Clock = std::chrono::steady_clock;
  pass_in_flight_ = false;
  const PassWork& work = *done;
  auto again = [this] {
    const bool wanted = pass_again_;
    pass_again_ = false;
    return wanted;
  };
  if (!work.error.empty()) {
    spdlog::error("scheduling pass: internal error: {}", work.error);
    last_pass_end_ = monotonic_();
    if (again()) request_pass();
    return;
  }
  const auto t_apply = monotonic_();
  const int64_t now = clock_();
  note_compact_waits(work);
  auto changes = table_.plan_changes(work.plan, now);
  WriteBatch b(std::move(changes.batch), store::Durability::kWritten);  // a lost start is placed again
  if (auto s = write(b); !s) {
    spdlog::error("scheduling pass: commit failed: {}", s.error().message);
    last_pass_end_ = monotonic_();
    if (again()) request_pass();
    return;
  }
  applied(b);
  if (!changes.notes.empty()) {
    table_.apply(changes.notes);
    WriteBatch seen;  // observers hear of new reasons too (the dashboard shows them)
    seen.updates.reserve(changes.notes.size());
    for (const auto& n : changes.notes) seen.updates.push_back(*table_.find(n.job));
    for (const auto& o : observers_) o(seen);
  }
  table_.park(work.plan.pending, work.snap.config.explain);
  last_pass_end_ = monotonic_();
  last_pass_duration_ = last_pass_end_ - work.start;
  const auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  ++stats_.passes_total;
  stats_.last_pass_seconds = secs(last_pass_duration_);
  stats_.pass_seconds_sum += stats_.last_pass_seconds;
  stats_.last_snapshot_seconds = secs(work.snapshot_time);
  stats_.last_schedule_seconds = secs(work.schedule_time);
  stats_.last_apply_seconds = secs(last_pass_end_ - t_apply);
  stats_.stale_starts_total += static_cast<int64_t>(changes.stale);
  if (!work.plan.starts.empty() || !work.plan.rejected.empty() || stats_.last_pass_seconds > 0.5)
    spdlog::info(
        "pass: {} pending ({} parked), {} started, {} stale, {} rejected, {} updates, {} new reasons, "
        "{:.3f} s (snapshot {:.3f} s, schedule() {:.3f} s, apply {:.3f} s)",
        work.snap.pending.size(), table_.parked_count(), work.plan.starts.size() - changes.stale,
        changes.stale, work.plan.rejected.size(), b.updates.size(), changes.notes.size(),
        stats_.last_pass_seconds, stats_.last_snapshot_seconds, stats_.last_schedule_seconds,
        stats_.last_apply_seconds);
  if (again() || changes.stale > 0) request_pass();
}

}  // namespace railyard::daemon
