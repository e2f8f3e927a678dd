// Submit intake (Service): validation and ids on the loop, group commit on the submit thread, the answers
// once the commit is applied.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "jobs/validate.hpp"
#include "scheduler/daemon/guarded.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::daemon {

// One submit commit between the flush (on the loop) and its apply (on the loop).
struct Service::SubmitWork {
  std::vector<QueuedSubmit> queue;
  WriteBatch batch;
  Status status = ok();
};


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


}  // namespace railyard::daemon
