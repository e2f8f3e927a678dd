#include "scheduler/daemon/submit_intake.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "jobs/parse_util.hpp"
#include "jobs/validate.hpp"

namespace railyard::daemon {

// One submit commit between the flush (on the loop) and its apply (on the loop).
struct SubmitIntake::Work {
  std::vector<Queued> queue;
  WriteBatch batch;
  Status status = ok();
};

SubmitIntake::SubmitIntake(const JobTable& table, CommitPipeline& pipeline, Loop loop, Clock clock,
                           JobId& next_id, Sink sink)
    : table_(table),
      pipeline_(pipeline),
      loop_(std::move(loop)),
      clock_(std::move(clock)),
      next_id_(next_id),
      sink_(std::move(sink)) {}

SubmitIntake::~SubmitIntake() { alive_.reset(); }

void SubmitIntake::load(const std::vector<store::IdempotencyRecord>& keys) {
  for (const auto& k : keys) done_keys_[k.key] = {k.first_id, k.count};
}

Status SubmitIntake::set_durability(store::Durability durability) {
  if (durability == store::Durability::kDeferred)
    return invalid("a submit is acknowledged once written or once synced, not deferred");
  durability_ = durability;
  return ok();
}

const jobs::JobSpec* SubmitIntake::submitted_spec(JobId id, std::span<const jobs::JobSpec> earlier) const {
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
  if (in_flight_)
    if (const auto* spec = in(in_flight_->batch.inserts)) return spec;
  for (const auto& q : queue_)
    if (const auto* spec = in(q.jobs)) return spec;
  return nullptr;
}

Status SubmitIntake::set_high_qos_users(std::string_view list) {
  std::set<std::string, std::less<>> users;
  bool anyone = false;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view name = jobs::trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (name.empty()) return invalid("high_qos_users: an empty user name (expected \"alice,bob\" or \"*\")");
    if (name == "*") anyone = true;
    else users.emplace(name);
  }
  high_qos_users_ = std::move(users);
  high_qos_anyone_ = anyone;
  return ok();
}

Status SubmitIntake::prepare(jobs::JobSpec& spec, const Caller& who,
                             std::span<const jobs::JobSpec> earlier) const {
  if (spec.user.empty() || who.uid) spec.user = who.user;
  if (spec.user != who.user && !who.admin())
    return Error{ErrorCode::kPermission, "user " + who.user + " may not submit jobs as " + spec.user};
  if (spec.qos == jobs::Qos::kHigh && !who.admin() && !high_qos_anyone_ && !high_qos_users_.contains(spec.user))
    return Error{ErrorCode::kPermission,
                 "qos high: user " + spec.user +
                     " may not submit high-QoS jobs (admins may, and the users the scheduler's high_qos_users "
                     "names; normal and scavenger are open to all)"};
  if (user_check_)
    if (auto s = user_check_(spec.user); !s) return s;
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
  // Whole nodes (an imported script without a GPU count) take the GPU count of the nodes they may use.
  if (Status whole = jobs::resolve_whole_nodes(spec, table_.cluster()); !whole) return whole;
  return jobs::validate_against_cluster(spec, table_.cluster());
}

void SubmitIntake::submit(std::vector<jobs::JobSpec> specs, const Caller& who, SubmitDone done,
                          const std::string& idempotency_key, const store::AuditRecord* audit) {
  std::string key;
  if (!idempotency_key.empty()) {
    key = who.user + "\n" + idempotency_key;
    // A retry makes no change: its audit row is written on its own (deferred) once it is answered with ids.
    if (auto it = done_keys_.find(key); it != done_keys_.end()) {
      if (audit) sink_.audit(*audit);
      std::vector<JobId> ids;
      for (int64_t k = 0; k < it->second.second; ++k) ids.push_back(it->second.first + k);
      loop_.post([done = std::move(done), ids = std::move(ids)]() mutable { done(std::move(ids)); });
      return;
    }
    if (auto it = waiting_keys_.find(key); it != waiting_keys_.end()) {
      if (audit)
        done = [this, row = *audit, done = std::move(done)](Result<std::vector<JobId>> ids) {
          if (ids) sink_.audit(row);
          done(std::move(ids));
        };
      it->second.push_back(std::move(done));
      return;
    }
    waiting_keys_[key];
  }
  queued_jobs_ += specs.size();
  Queued q{{}, who.user, std::move(done), std::move(key), {}};
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
  ++arrivals_;
  if (!flush_posted_) {
    flush_posted_ = true;
    post_flush(arrivals_, 0, 0);
  }
}

// The flush waits until kQuietFlushTurns turns of the loop in a row brought no new submit (at most
// kMaxFlushTurns turns), so the requests that arrived meanwhile join this commit (one fsync) instead of the
// next: what other clients sent at the same time, and a pipelining client's next submits, which the server
// reads one every few turns.
void SubmitIntake::post_flush(uint64_t seen, int quiet_turns, int turns) {
  std::weak_ptr<char> alive = alive_;
  loop_.post(guarded("submit flush", [this, seen, quiet_turns, turns, alive] {
    if (alive.expired()) return;
    const int quiet = arrivals_ == seen ? quiet_turns + 1 : 0;
    if (quiet < kQuietFlushTurns && turns < kMaxFlushTurns) return post_flush(arrivals_, quiet, turns + 1);
    flush();
  }));
}

void SubmitIntake::flush() {
  flush_posted_ = false;
  if (in_flight_ || queue_.empty()) return;  // the commit in flight flushes again when done
  auto work = std::make_shared<Work>();
  work->queue = std::move(queue_);
  queue_.clear();
  const size_t jobs = std::exchange(queued_jobs_, 0);
  WriteBatch& b = work->batch;
  b.durability = durability_;
  for (auto& q : work->queue) {
    if (!q.idempotency_key.empty() && !q.jobs.empty())
      b.idempotency.push_back({q.idempotency_key, q.jobs.front().id, static_cast<int64_t>(q.jobs.size())});
    for (auto& r : q.jobs) {
      b.events.push_back({job_subject(r.id), r.submit_time, q.actor, "submitted"});
      b.inserts.push_back(std::move(r));
    }
    if (q.audit) b.audit.push_back(std::move(*q.audit));
  }
  pipeline_.stamp_events(b);
  // A few jobs commit on the loop: the hand-over to the thread and back would cost more than parsing that
  // overlaps it, and the clients waiting for them are answered sooner, so they send their next requests in
  // time to share the next commit.
  if (!pipeline_.commits_elsewhere() || jobs < min_jobs_elsewhere_) {
    work->status = pipeline_.commit(b);
    return committed(work);
  }
  in_flight_ = work;
  std::weak_ptr<char> alive = alive_;
  pipeline_.commit_elsewhere(work->batch, [this, work, alive](Status s) {
    if (alive.expired()) return;
    work->status = std::move(s);
    committed(work);
  });
}

void SubmitIntake::committed(const std::shared_ptr<Work>& work) {
  if (std::exchange(in_flight_, nullptr) && queued_jobs_ >= min_jobs_elsewhere_)
    flush();  // what queued meanwhile starts writing while this one is applied
  const Status& s = work->status;
  const WriteBatch& b = work->batch;
  if (s) {
    sink_.applied(b);
    submits_ += static_cast<int64_t>(b.inserts.size());
    ++commits_;
  } else {
    spdlog::error("submit commit failed: {}", s.error().message);
  }
  size_t i = 0;
  for (auto& q : work->queue) {
    std::vector<JobId> ids;
    for (size_t k = 0; k < q.jobs.size(); ++k) ids.push_back(b.inserts[i++].id);
    std::vector<SubmitDone> retries;
    if (!q.idempotency_key.empty()) {
      if (auto it = waiting_keys_.find(q.idempotency_key); it != waiting_keys_.end()) {
        retries = std::move(it->second);
        waiting_keys_.erase(it);
      }
      if (s && !ids.empty()) done_keys_[q.idempotency_key] = {ids.front(), static_cast<int64_t>(ids.size())};
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
  if (!queue_.empty() && !in_flight_ && !flush_posted_) {  // a few that queued meanwhile
    flush_posted_ = true;
    post_flush(arrivals_, 0, 0);
  }
}

}  // namespace railyard::daemon
