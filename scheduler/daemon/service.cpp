#include "scheduler/daemon/service.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <mutex>
#include <thread>
#include <utility>

#include "jobs/validate.hpp"
#include "scheduler/api/auth.hpp"
#include "scheduler/core/cycle.hpp"

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

// Work posted on the loop: an exception is a bug, logged, and must not end the daemon.
std::function<void()> guarded(const char* what, std::function<void()> fn) {
  return [what, fn = std::move(fn)] {
    try {
      fn();
    } catch (const std::exception& e) {
      spdlog::error("{}: internal error: {}", what, e.what());
    }
  };
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

// One submit commit between the flush (on the loop) and its apply (on the loop).
struct Service::SubmitWork {
  std::vector<QueuedSubmit> queue;
  WriteBatch batch;
  Status status = ok();
};

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

const jobs::JobSpec* Service::submitted_spec(JobId id, std::span<const jobs::JobSpec> earlier) const {
  if (const JobRecord* r = table_.find(id)) return &r->spec;
  if (id >= next_id_) {
    const auto k = static_cast<size_t>(id - next_id_);
    return k < earlier.size() ? &earlier[k] : nullptr;
  }
  // Below next_id_ and not in the table: queued or being committed (ids ascend through both), or lost to
  // a failed commit.
  auto in = [id](const std::vector<JobRecord>& jobs) -> const jobs::JobSpec* {
    auto it =
        std::lower_bound(jobs.begin(), jobs.end(), id, [](const JobRecord& r, JobId v) { return r.id < v; });
    return it != jobs.end() && it->id == id ? &it->spec : nullptr;
  };
  if (submit_in_flight_)
    if (const auto* spec = in(submit_in_flight_->batch.inserts)) return spec;
  for (const auto& q : queue_)
    if (const auto* spec = in(q.jobs)) return spec;
  return nullptr;
}

Status Service::prepare(jobs::JobSpec& spec, const Caller& who,
                        std::span<const jobs::JobSpec> earlier) const {
  if (spec.user.empty() || who.uid) spec.user = who.user;
  if (spec.user != who.user && !who.admin())
    return Error{ErrorCode::kPermission, "user " + who.user + " may not submit jobs as " + spec.user};
  if (spec.project.empty()) spec.project = spec.user;
  if (spec.array_job != 0 || spec.array_task != -1)
    return invalid(
        "array_job, array_task: set by the scheduler on the tasks it creates for an array; "
        "submit the array with \"array\" instead");
  // A dependency names a job submitted before this one: ids only grow, so a later id (this job's own
  // included) would wait forever. submit() gives the specs of one call the ids from next_id_ on, in order:
  // an earlier job of the same batch counts. On a task it names an array and one of its indexes; aftercorr
  // names an array. That array may be earlier in the batch or not on disk yet (submitted_spec).
  const JobId own = next_id_ + static_cast<JobId>(earlier.size());
  auto not_yet = [&](JobId id, const std::string& text) {
    return invalid("dependency " + text + ": job " + std::to_string(id) +
                   " is not an earlier job (this one will be job " + std::to_string(own) +
                   "; a job can wait only for jobs submitted before it)");
  };
  for (JobId id : spec.afterok)
    if (id >= own) return not_yet(id, "afterok:" + std::to_string(id));
  for (const auto& d : spec.after) {
    if (d.job >= own) return not_yet(d.job, d.text());
    if (d.task < 0 && d.type != jobs::Dependency::Type::kAfterCorr) continue;
    const jobs::JobSpec* target = submitted_spec(d.job, earlier);
    if (!target) return invalid("dependency " + d.text() + ": job " + std::to_string(d.job) + " not found");
    if (!target->array)
      return invalid("dependency " + d.text() + ": job " + std::to_string(d.job) + " is not an array");
    if (d.task >= 0 && !target->array->position_of(d.task))
      return invalid("dependency " + d.text() + ": array " + std::to_string(d.job) + " (" +
                     target->array->text() + ") has no task " + std::to_string(d.task));
  }
  return jobs::validate_against_cluster(spec, table_.cluster());
}

void Service::submit(std::vector<jobs::JobSpec> specs, const Caller& who, SubmitDone done,
                     const std::string& idempotency_key, const store::AuditRecord* audit) {
  std::string key;
  if (!idempotency_key.empty()) {
    key = who.user + "\n" + idempotency_key;
    // A retry makes no change: its audit row is written on its own (deferred) once it is answered with ids.
    if (auto it = idempotent_done_.find(key); it != idempotent_done_.end()) {
      if (audit) record_audit(*audit);
      std::vector<JobId> ids;
      for (int64_t k = 0; k < it->second.second; ++k) ids.push_back(it->second.first + k);
      loop_.post([done = std::move(done), ids = std::move(ids)]() mutable { done(std::move(ids)); });
      return;
    }
    if (auto it = idempotent_waiting_.find(key); it != idempotent_waiting_.end()) {
      if (audit)
        done = [this, row = *audit, done = std::move(done)](Result<std::vector<JobId>> ids) {
          if (ids) record_audit(row);
          done(std::move(ids));
        };
      it->second.push_back(std::move(done));
      return;
    }
    idempotent_waiting_[key];
  }
  queued_jobs_ += specs.size();
  QueuedSubmit q{{}, who.user, std::move(done), std::move(key), {}};
  if (audit) q.audit = *audit;
  const int64_t now = clock_();
  for (auto& spec : specs) {
    JobRecord r;
    r.id = next_id_++;
    r.spec = std::move(spec);
    r.submit_time = now;
    q.jobs.push_back(std::move(r));
  }
  queue_.push_back(std::move(q));
  ++submit_arrivals_;
  if (!flush_posted_) {
    flush_posted_ = true;
    post_flush(submit_arrivals_, 0, 0);
  }
}

// The flush waits until kQuietFlushTurns turns of the loop in a row brought no new submit (at most
// kMaxFlushTurns turns), so the requests that arrived meanwhile join this commit (one fsync) instead of the
// next: what other clients sent at the same time, and a pipelining client's next submits, which the server
// reads one every few turns.
void Service::post_flush(uint64_t seen, int quiet_turns, int turns) {
  loop_.post(guarded("submit flush", [this, seen, quiet_turns, turns] {
    const int quiet = submit_arrivals_ == seen ? quiet_turns + 1 : 0;
    if (quiet < kQuietFlushTurns && turns < kMaxFlushTurns)
      return post_flush(submit_arrivals_, quiet, turns + 1);
    flush_submits();
  }));
}

void Service::flush_submits() {
  flush_posted_ = false;
  if (submit_in_flight_ || queue_.empty()) return;  // the commit in flight flushes again when done
  auto work = std::make_shared<SubmitWork>();
  work->queue = std::move(queue_);
  queue_.clear();
  const size_t jobs = std::exchange(queued_jobs_, 0);
  WriteBatch& b = work->batch;
  b.durability = submit_durability_;
  for (auto& q : work->queue) {
    if (!q.idempotency_key.empty() && !q.jobs.empty())
      b.idempotency.push_back({q.idempotency_key, q.jobs.front().id, static_cast<int64_t>(q.jobs.size())});
    for (auto& r : q.jobs) {
      b.events.push_back({job_subject(r.id), r.submit_time, q.actor, "submitted"});
      b.inserts.push_back(std::move(r));
    }
    if (q.audit) b.audit.push_back(std::move(*q.audit));
  }
  stamp_events(b);
  // A few jobs commit on the loop: the hand-over to the thread and back would cost more than parsing that
  // overlaps it, and the clients waiting for them are answered sooner, so they send their next requests in
  // time to share the next commit.
  if (!submit_executor_ || jobs < submit_thread_min_jobs_) {
    work->status = store_commit(b);
    if (work->status) committed(b.durability);
    return submits_committed(work);
  }
  submit_in_flight_ = work;
  std::weak_ptr<char> alive = alive_;
  submit_executor_([this, work, alive] {
    work->status = submit_store_->commit(work->batch);
    loop_.post(guarded("submit commit", [this, work, alive] {
      if (alive.expired()) return;
      // A kWritten commit through the second connection is synced like the loop's own (the delayed sync
      // syncs the one log both write). A kSynced one leaves the loop's unsynced commits as they are: those
      // made while it was in flight may have missed its fsync.
      if (work->status && work->batch.durability == store::Durability::kWritten)
        committed(store::Durability::kWritten);
      submits_committed(work);
    }));
  });
}

void Service::submits_committed(const std::shared_ptr<SubmitWork>& work) {
  if (std::exchange(submit_in_flight_, nullptr) && queued_jobs_ >= submit_thread_min_jobs_)
    flush_submits();  // what queued meanwhile starts writing while this one is applied
  const Status& s = work->status;
  const WriteBatch& b = work->batch;
  if (s) {
    applied(b);
    stats_.submits_total += static_cast<int64_t>(b.inserts.size());
    ++stats_.submit_commits_total;
  } else {
    spdlog::error("submit commit failed: {}", s.error().message);
  }
  size_t i = 0;
  for (auto& q : work->queue) {
    std::vector<JobId> ids;
    for (size_t k = 0; k < q.jobs.size(); ++k) ids.push_back(b.inserts[i++].id);
    std::vector<SubmitDone> retries;
    if (!q.idempotency_key.empty()) {
      if (auto it = idempotent_waiting_.find(q.idempotency_key); it != idempotent_waiting_.end()) {
        retries = std::move(it->second);
        idempotent_waiting_.erase(it);
      }
      if (s && !ids.empty())
        idempotent_done_[q.idempotency_key] = {ids.front(), static_cast<int64_t>(ids.size())};
    }
    for (auto& retry : retries) {
      if (s) {
        retry(ids);
      } else {
        retry(s.error());
      }
    }
    if (s) {
      q.done(std::move(ids));
    } else {
      q.done(s.error());
    }
  }
  if (s) request_pass();
  if (!queue_.empty() && !submit_in_flight_ && !flush_posted_) {  // a few that queued meanwhile
    flush_posted_ = true;
    post_flush(submit_arrivals_, 0, 0);
  }
}

Result<JobRecord> Service::act(JobId id, jobs::JobEvent event, const Caller& who,
                               const store::AuditRecord* audit) {
  const JobRecord* cur = table_.find(id);
  if (!cur) return not_found("job " + std::to_string(id) + " not found");
  if (cur->spec.user != who.user && !who.admin())
    return Error{ErrorCode::kPermission, "job " + std::to_string(id) + " belongs to " + cur->spec.user +
                                             "; only its owner or an admin may " + std::string(verb(event)) +
                                             " it"};
  auto batch = table_.event_changes(id, event, who.user, clock_());
  if (!batch) return batch.error();
  if (audit) batch->audit.push_back(*audit);
  if (auto s = write(*batch); !s) return s.error();
  applied(*batch);
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

void Service::prepare_write(WriteBatch& batch) {
  auto runs = table_.run_changes(batch, clock_());
  batch.runs.insert(batch.runs.end(), std::make_move_iterator(runs.begin()),
                    std::make_move_iterator(runs.end()));
  for (const auto& hook : pre_commit_) hook(batch);
  stamp_events(batch);
}

Status Service::write(WriteBatch& batch) {
  prepare_write(batch);
  if (batch.empty()) return ok();
  if (auto s = store_commit(batch); !s) return s;
  committed(batch.durability);
  return ok();
}

Status Service::store_commit(const WriteBatch& batch) {
  if (deferred_.empty()) return store_->commit(batch);
  std::vector<const WriteBatch*> all;
  all.reserve(deferred_.size() + 1);
  for (const auto& d : deferred_) all.push_back(&d);
  all.push_back(&batch);
  if (auto s = store_->commit_all(all); !s) return s;  // kept for the next commit
  stats_.deferred_batches_total += static_cast<int64_t>(deferred_.size());
  deferred_.clear();
  return ok();
}

Status Service::write_deferred() {
  if (deferred_.empty()) return ok();
  WriteBatch none;
  none.durability = store::Durability::kWritten;
  return store_commit(none);
}

void Service::committed(store::Durability durability) {
  if (durability == store::Durability::kSynced) return now_durable();
  unsynced_ = true;
  if (!sync_posted_) post_sync();
}

void Service::post_sync() {
  sync_posted_ = true;
  std::weak_ptr<char> alive = alive_;
  loop_.post_after(kLazySyncDelay, guarded("log sync", [this, alive, seen = syncs_] {
                     if (!alive.expired()) sync_log(seen);
                   }));
}

void Service::sync_log(uint64_t syncs_then) {
  sync_posted_ = false;
  if (!unsynced_) return;  // a synced commit did it meanwhile
  // A synced commit since this sync was posted made everything before it durable; what is unsynced now came
  // after it, less than kLazySyncDelay ago: wait that long again (in a stream of submits, the next submit's
  // commit syncs it, and this sync never runs).
  if (syncs_then != syncs_) return post_sync();
  if (sync_in_flight_) return post_sync();  // one at a time: what came since waits for the next
  if (auto s = write_deferred(); !s) {
    spdlog::error("writing agent reports: {}", s.error().message);
    return committed(store::Durability::kWritten);  // try again later; the waiters keep waiting
  }
  auto elsewhere = sync_executor_ ? store_->sync_elsewhere() : nullptr;
  if (!elsewhere) {
    if (auto s = store_->sync(); !s) {
      spdlog::error("syncing the state database: {}", s.error().message);
      return committed(store::Durability::kWritten);  // try again later; the waiters keep waiting
    }
    ++stats_.log_syncs_total;
    return now_durable();
  }
  // Off the loop: the fsync covers everything written so far; commits made while it runs wait for the next.
  sync_in_flight_ = true;
  unsynced_ = false;
  in_flight_waiters_ = std::exchange(durable_waiters_, {});
  std::weak_ptr<char> alive = alive_;
  sync_executor_([this, elsewhere = std::move(elsewhere), post = loop_.post, alive] {
    Status s = elsewhere();
    post(guarded("log sync", [this, s = std::move(s), alive] {
      if (!alive.expired()) log_synced(s);
    }));
  });
}

void Service::log_synced(const Status& status) {
  sync_in_flight_ = false;
  auto waiters = std::exchange(in_flight_waiters_, {});
  if (!status) {
    spdlog::error("syncing the state database: {}", status.error().message);
    durable_waiters_.insert(durable_waiters_.begin(), std::make_move_iterator(waiters.begin()),
                            std::make_move_iterator(waiters.end()));
    return committed(store::Durability::kWritten);  // try again later; the waiters keep waiting
  }
  ++stats_.log_syncs_total;
  for (auto& fn : waiters) fn();
}

void Service::now_durable() {
  ++syncs_;
  unsynced_ = false;
  // A synced commit's fsync covers a sync still in flight too: its waiters need not wait for it.
  auto first = std::exchange(in_flight_waiters_, {});
  auto waiters = std::exchange(durable_waiters_, {});
  for (auto& fn : first) fn();
  for (auto& fn : waiters) fn();
}

void Service::when_durable(std::function<void()> fn) {
  if (unsynced_) return durable_waiters_.push_back(std::move(fn));
  if (sync_in_flight_) return in_flight_waiters_.push_back(std::move(fn));  // all it needs was before
  fn();
}

void Service::stamp_events(WriteBatch& batch) const {
  if (batch.events.empty()) return;
  const int64_t ms = now_ms();
  for (auto& e : batch.events)
    if (e.time_ms == 0) e.time_ms = ms / 1000 == e.time ? ms : e.time * 1000;
}

void Service::applied(const WriteBatch& batch) {
  table_.apply(batch);
  for (const auto& o : observers_) o(batch);
}

Status Service::commit(WriteBatch batch) {
  if (batch.empty()) return ok();
  if (batch.durability == store::Durability::kDeferred) {
    prepare_write(batch);
    deferred_.push_back(batch);
    committed(store::Durability::kWritten);  // unsynced: the delayed sync writes it, then syncs
  } else if (auto s = write(batch); !s) {
    return s;
  }
  applied(batch);
  if (!batch.updates.empty() || !batch.nodes.empty()) request_pass();
  return ok();
}

void Service::request_pass() {
  if (pass_in_flight_) {
    pass_again_ = true;
    return;
  }
  if (pass_posted_) return;
  pass_posted_ = true;
  const auto now = std::chrono::steady_clock::now();
  const auto earliest =
      last_pass_end_ + std::max<std::chrono::steady_clock::duration>(kMinPassInterval, last_pass_duration_);
  auto pass = guarded("scheduling pass", [this] { run_pass(); });
  if (now >= earliest) return loop_.post(std::move(pass));
  loop_.post_after(std::chrono::ceil<std::chrono::milliseconds>(earliest - now), std::move(pass));
}

// On the loop: the snapshot, then schedule() on the executor, whose result comes back to finish_pass().
void Service::run_pass() {
  using Clock = std::chrono::steady_clock;
  pass_posted_ = false;
  if (pass_in_flight_) return void(pass_again_ = true);
  auto work = std::make_shared<PassWork>();
  work->start = Clock::now();
  tend_arrays();
  work->snap = table_.snapshot(clock_());
  work->snap.config = policy_;
  work->snapshot_time = Clock::now() - work->start;
  if (work->snap.pending.empty()) return;
  pass_in_flight_ = true;
  std::weak_ptr<char> alive = alive_;
  auto compute = [this, work, alive] {
    const auto t = Clock::now();
    try {
      work->plan = scheduler_.schedule(work->snap);
      // By id, so plan_changes() walks it alongside the table instead of a lookup per job (on the loop).
      std::sort(work->plan.pending.begin(), work->plan.pending.end(),
                [](const auto& a, const auto& b) { return a.job < b.job; });
    } catch (const std::exception& e) {
      work->error = e.what();
    }
    work->schedule_time = Clock::now() - t;
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
  WriteBatch b = table_.array_changes(clock_(), next);
  if (b.empty()) return;
  b.durability = store::Durability::kWritten;
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
    last_pass_end_ = Clock::now();
    if (again()) request_pass();
    return;
  }
  const auto t_apply = Clock::now();
  const int64_t now = clock_();
  note_compact_waits(work);
  auto changes = table_.plan_changes(work.plan, now);
  WriteBatch& b = changes.batch;
  b.durability = store::Durability::kWritten;  // a start lost with the machine is placed again
  if (auto s = write(b); !s) {
    spdlog::error("scheduling pass: commit failed: {}", s.error().message);
    last_pass_end_ = Clock::now();
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
  last_pass_end_ = Clock::now();
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
