#include "scheduler/lifecycle/job_table.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <unordered_map>

namespace railyard::lifecycle {
namespace {

using jobs::JobState;

bool holds_gpus(JobState s) { return s == JobState::kStarting || s == JobState::kRunning; }

bool same_slices(const std::vector<sched::MigSlice>& a, const std::vector<sched::MigSlice>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].gpu != b[i].gpu || a[i].first_slot != b[i].first_slot || a[i].slots != b[i].slots) return false;
  return true;
}

bool same_mutable(const JobRecord& a, const JobRecord& b) {
  return a.state == b.state && a.start_time == b.start_time && a.end_time == b.end_time &&
         a.exit_code == b.exit_code && a.reason == b.reason && a.gpus == b.gpus &&
         same_slices(a.slices, b.slices) && a.nodes == b.nodes && a.leaves_spanned == b.leaves_spanned &&
         a.min_leaves == b.min_leaves && a.estimated_start == b.estimated_start &&
         a.time_to_train_s == b.time_to_train_s && a.attempt == b.attempt &&
         a.compact_since == b.compact_since && a.held_by == b.held_by && a.held_by_admin == b.held_by_admin;
}

// Copies of the jobs a plan touches, collected so that several changes to one job become one update.
class Touched {
 public:
  explicit Touched(const std::map<JobId, JobRecord>& jobs) : jobs_(jobs) {}
  JobRecord* touch(JobId id) {
    if (auto it = changed_.find(id); it != changed_.end()) return &it->second;
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return nullptr;
    order_.push_back(id);
    return &changed_.emplace(id, it->second).first->second;
  }
  bool touched(JobId id) const { return changed_.count(id) > 0; }
  const JobRecord* current(JobId id) const {
    if (auto it = changed_.find(id); it != changed_.end()) return &it->second;
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : &it->second;
  }
  void into(Changes& b) {
    b.updates.reserve(b.updates.size() + order_.size());  // records are large: no moves while it grows
    for (JobId id : order_)
      if (!same_mutable(changed_.at(id), jobs_.at(id))) b.updates.push_back(std::move(changed_.at(id)));
  }

 private:
  const std::map<JobId, JobRecord>& jobs_;
  std::unordered_map<JobId, JobRecord> changed_;
  std::vector<JobId> order_;
};

// Every field an update may change: all but id, spec and submit time (see Changes).
void copy_mutable(const JobRecord& from, JobRecord& to) {
  to.state = from.state;
  to.start_time = from.start_time;
  to.end_time = from.end_time;
  to.exit_code = from.exit_code;
  to.reason = from.reason;
  to.gpus = from.gpus;
  to.slices = from.slices;
  to.nodes = from.nodes;
  to.leaves_spanned = from.leaves_spanned;
  to.min_leaves = from.min_leaves;
  to.estimated_start = from.estimated_start;
  to.time_to_train_s = from.time_to_train_s;
  to.attempt = from.attempt;
  to.compact_since = from.compact_since;
  to.held_by = from.held_by;
  to.held_by_admin = from.held_by_admin;
}

void place(JobRecord& r, const sched::Placement& p, const topology::Cluster& c, int64_t now) {
  r.state = JobState::kStarting;
  r.gpus = p.gpus;
  r.slices = p.slices;
  r.nodes.clear();
  for (auto n : p.nodes) r.nodes.push_back(c.node(n).name);
  r.leaves_spanned = p.leaves_spanned;
  r.min_leaves = p.min_leaves;
  r.start_time = now;
  r.reason.clear();
  r.estimated_start.reset();
  r.compact_since.reset();
  ++r.attempt;
}

// Why each job of `pending` still waits, where that changed: a record `ch` already changes gets it in
// place; the others become notes (memory only). Most jobs keep their reason from pass to pass, so it is
// compared before anything is built; with `pending` sorted by id (the service sorts it off the loop) the
// waiting jobs are walked alongside instead of looked up one by one.
void note_reasons(const std::vector<sched::PendingInfo>& pending,
                  const std::map<JobId, const JobRecord*>& waiting_jobs, Touched& ch,
                  std::vector<JobTable::PendingNote>& notes) {
  // Walked alongside when that is cheaper than a lookup each (a pass that examined a fraction of the queue).
  const bool by_id = pending.size() * 16 >= waiting_jobs.size() &&
                     std::is_sorted(pending.begin(), pending.end(),
                                    [](const auto& a, const auto& b) { return a.job < b.job; });
  auto waiting = waiting_jobs.begin();
  for (const auto& info : pending) {
    const JobRecord* cur = nullptr;
    if (by_id && !ch.touched(info.job)) {
      while (waiting != waiting_jobs.end() && waiting->first < info.job) ++waiting;
      if (waiting != waiting_jobs.end() && waiting->first == info.job) cur = waiting->second;
    } else {
      cur = ch.current(info.job);
    }
    if (!cur || (cur->state != JobState::kPending && cur->state != JobState::kHeld)) continue;
    const std::string_view kind = sched::to_string(info.reason);
    const std::string& had = cur->reason;
    const bool same = cur->estimated_start == info.estimated_start &&
                      (info.message.empty()
                           ? had == kind
                           : had.size() == kind.size() + 2 + info.message.size() && had.starts_with(kind) &&
                                 had.compare(kind.size(), 2, ": ") == 0 && had.ends_with(info.message));
    if (same) continue;
    std::string reason = std::string(kind) + (info.message.empty() ? "" : ": " + info.message);
    if (!ch.touched(info.job)) {
      notes.push_back({info.job, std::move(reason), info.estimated_start});
      continue;
    }
    JobRecord* r = ch.touch(info.job);
    r->reason = std::move(reason);
    r->estimated_start = info.estimated_start;
  }
}

// The jobs a pass did not reach (Plan::unexamined) keep their reason; one without a reason yet (submitted
// since the last pass that reached it) gets kNotReached. Walked alongside the waiting jobs when sorted by id.
void note_unexamined(const std::vector<JobId>& unexamined, const std::map<JobId, const JobRecord*>& waiting_jobs,
                     std::vector<JobTable::PendingNote>& notes) {
  const bool by_id = unexamined.size() * 16 >= waiting_jobs.size() && std::is_sorted(unexamined.begin(), unexamined.end());
  auto waiting = waiting_jobs.begin();
  for (JobId id : unexamined) {
    const JobRecord* cur = nullptr;
    if (by_id) {
      while (waiting != waiting_jobs.end() && waiting->first < id) ++waiting;
      if (waiting != waiting_jobs.end() && waiting->first == id) cur = waiting->second;
    } else if (auto it = waiting_jobs.find(id); it != waiting_jobs.end()) {
      cur = it->second;
    }
    if (cur && cur->state == JobState::kPending && cur->reason.empty())
      notes.push_back({id, std::string(JobTable::kNotReached), cur->estimated_start});
  }
}

}  // namespace

std::string job_subject(JobId id) { return "job:" + std::to_string(id); }

std::string_view to_string(QuotaRecord::Kind k) { return k == QuotaRecord::Kind::kUser ? "user" : "project"; }

void JobTable::apply(const std::vector<PendingNote>& notes) {
  for (const auto& n : notes) {
    auto it = waiting_.find(n.job);
    if (it == waiting_.end()) continue;
    JobRecord& r = jobs_.at(n.job);
    r.reason = n.reason;
    r.estimated_start = n.estimated_start;
  }
}

JobTable::JobTable(const topology::Cluster& cluster)
    : cluster_(cluster),
      health_(static_cast<size_t>(cluster.node_count()), sched::NodeHealth::kUp),
      health_reason_(static_cast<size_t>(cluster.node_count())),
      containers_(static_cast<size_t>(cluster.node_count()), 0) {
  occupancy_.reset(cluster.gpu_count());
}

void JobTable::release_gpus(const std::string& alloc) {
  auto it = draining_.find(alloc);
  if (it == draining_.end()) return;
  occupancy_.drain(it->second.gpus, -1);
  draining_.erase(it);
}

void JobTable::load(State state) {
  jobs_.clear();
  arrays_.clear();
  open_arrays_.clear();
  waiting_.clear();
  occupancy_.reset(cluster_.gpu_count());
  live_.pending.clear();
  live_.running.clear();
  pending_slot_.clear();
  journal_.clear();
  journal_source_ = 0;  // a new source: a Scheduler rebuilds its queue from the next snapshot
  pending_with_dependencies_ = 0;
  pending_by_gpus_.clear();
  pending_high_ = 0;
  running_slot_.clear();
  parked_.clear();
  parked_on_.clear();
  holding_.clear();
  draining_.clear();
  runs_.clear();
  if (usage_) usage_.emplace(usage_->half_life_s());
  running_users_.clear();
  running_projects_.clear();
  quotas_.clear();
  live_.user_quota.clear();
  live_.project_quota.clear();
  live_.user_shares.clear();
  live_.project_shares.clear();
  std::fill(health_.begin(), health_.end(), sched::NodeHealth::kUp);
  std::fill(health_reason_.begin(), health_reason_.end(), std::string());
  Changes b;
  b.inserts = std::move(state.jobs);
  b.nodes = std::move(state.nodes);
  b.holds = std::move(state.holds);
  b.runs = std::move(state.runs);
  b.quotas = std::move(state.quotas);
  apply(b);
}

namespace {

// A task's part in its array's counts: +1 or -1 of `state`.
void count_task(ArrayProgress& a, JobState state, int64_t sign) {
  if (state == JobState::kPending) a.pending += sign;
  if (!jobs::is_terminal(state))
    a.active += sign;
  else if (state == JobState::kCompleted)
    a.completed += sign;
  else
    a.failed += sign;
}

void note_exit(ArrayProgress& a, const JobRecord& task) {
  if (jobs::is_terminal(task.state) && task.exit_code)
    a.max_exit = std::max(a.max_exit.value_or(0), *task.exit_code);
}

}  // namespace

void JobTable::apply(const Changes& batch) {
  auto index = [&](const JobRecord& r) {
    waiting_.erase(r.id);
    parked_.erase(r.id);  // any change of its own unparks a job
    holding_.erase(r.id);
    leave_pass(r.id);
    if (r.spec.array) {  // never placed itself: its tasks are
      if (jobs::is_terminal(r.state))
        open_arrays_.erase(r.id);
      else
        open_arrays_.insert(r.id);
      return;
    }
    if (r.state == JobState::kPending || r.state == JobState::kHeld)
      waiting_.emplace(r.id, &r);
    else if (!jobs::is_terminal(r.state)) {
      holding_.emplace(r.id, &r);
      occupancy_.own(r);
    } else {
      return;
    }
    enter_pass(r);
  };
  // New ids only: the store's primary key refused a duplicate before this batch was applied.
  for (const auto& r : batch.inserts) {
    index(jobs_.insert_or_assign(r.id, r).first->second);
    if (r.spec.array) arrays_[r.id].total = r.spec.array->size();
    if (r.spec.array_job != 0) {  // tasks are inserted in their array's order (array_changes)
      ArrayProgress& a = arrays_[r.spec.array_job];
      a.tasks.push_back(r.id);
      count_task(a, r.state, 1);
      note_exit(a, r);
      if (jobs::is_terminal(r.state)) unpark_dependents(r.spec.array_job);  // a task created ended
    }
  }
  for (const auto& r : batch.updates) {
    auto it = jobs_.find(r.id);
    if (it == jobs_.end()) continue;
    const JobState before = it->second.state;
    if (holding_.count(r.id)) occupancy_.disown(it->second);  // before its GPUs change
    copy_mutable(r, it->second);  // never the spec: a pass on another thread may be reading it
    index(it->second);
    if (const JobId parent = it->second.spec.array_job; parent != 0 && before != r.state) {
      ArrayProgress& a = arrays_[parent];
      count_task(a, before, -1);
      count_task(a, r.state, 1);
      note_exit(a, r);
    }
    // Whether a dependency is met changes only when what it names ends (dependency_state).
    if (jobs::is_terminal(before) != jobs::is_terminal(r.state)) {
      unpark_dependents(r.id);
      if (const JobId parent = it->second.spec.array_job; parent != 0) unpark_dependents(parent);
    }
  }
  for (const auto& n : batch.nodes) {
    const topology::NodeId id = cluster_.find_node(n.name);
    if (id < 0) continue;
    health_[static_cast<size_t>(id)] = n.health;
    health_reason_[static_cast<size_t>(id)] = n.reason;
  }
  for (const auto& h : batch.holds) hold_gpus(h);
  for (const auto& a : batch.released) release_gpus(a);
  std::vector<const RunRecord*> ended;
  for (const auto& r : batch.runs) {
    auto [it, added] = runs_.try_emplace({r.job, r.attempt}, r);
    const bool ends = r.end && (added || !it->second.end);
    if (!added) it->second = r;
    if (ends) ended.push_back(&it->second);
  }
  if (usage_) charge_ended(ended);
  for (const auto& q : batch.quotas) {
    const bool user = q.kind == QuotaRecord::Kind::kUser;
    auto& bounds = user ? live_.user_quota : live_.project_quota;
    auto& shares = user ? live_.user_shares : live_.project_shares;
    bounds.erase(q.name);
    shares.erase(q.name);
    if (q.lifted) {
      quotas_.erase({q.kind, q.name});
      continue;
    }
    quotas_.insert_or_assign({q.kind, q.name}, q);
    if (q.gpus) bounds[q.name] = static_cast<int>(*q.gpus);  // at most Service::kMaxQuotaGpus
    if (q.shares != 1) shares[q.name] = q.shares;
  }
}

const QuotaRecord* JobTable::quota(QuotaRecord::Kind kind, const std::string& name) const {
  auto it = quotas_.find({kind, name});
  return it == quotas_.end() ? nullptr : &it->second;
}

// The ledger is decayed once, to the latest end, and each run is added as of its own end (add() decays it the
// rest of the way): O(runs + parties), where adding them in end order would decay every balance per run.
void JobTable::charge_ended(const std::vector<const RunRecord*>& ended) {
  if (ended.empty()) return;
  int64_t last = *ended.front()->end;
  for (const RunRecord* r : ended) last = std::max(last, *r->end);
  usage_->decay_to(last);
  for (const RunRecord* r : ended)
    if (const JobRecord* j = find(r->job))
      usage_->add(j->spec.user, j->spec.project, usage_->decayed_use(r->gpu_count(), r->start, *r->end), *r->end);
}

void JobTable::track_usage(double half_life_s) {
  usage_.emplace(half_life_s);
  rebase_running_use(0);
  std::vector<const RunRecord*> ended;
  for (const auto& [key, r] : runs_)
    if (r.end) ended.push_back(&r);
  charge_ended(ended);
}

JobTable::InUse JobTable::gpus_in_use() const {
  InUse u;
  for (const auto& r : live_.running) {
    const int gpus = static_cast<int>(r.gpus.size() + r.slices.size());
    u.users[r.spec->user] += gpus;
    u.projects[r.spec->project] += gpus;
  }
  for (const auto& [alloc, d] : draining_)  // held until their kill is confirmed, as the passes count them
    if (const JobRecord* j = find(d.job)) {
      u.users[j->spec.user] += static_cast<int>(d.gpus.size());
      u.projects[j->spec.project] += static_cast<int>(d.gpus.size());
    }
  return u;
}

JobTable::Usage JobTable::usage_at(int64_t now) const {
  Usage u;
  if (!usage_) return u;
  const int64_t as_of = usage_->as_of();
  const double decay = as_of == INT64_MIN || now <= as_of
                           ? 1.0
                           : std::exp2(-static_cast<double>(now - as_of) / usage_->half_life_s());
  for (const auto& [who, used] : usage_->users()) u.users[who] = used * decay;
  for (const auto& [who, used] : usage_->projects()) u.projects[who] = used * decay;
  const double per_gpu = usage_->half_life_s() / std::numbers::ln2;
  const double now_scale = std::exp2(-static_cast<double>(now - use_origin_) / usage_->half_life_s());
  for (auto [running, out] : {std::pair{&running_users_, &u.users}, std::pair{&running_projects_, &u.projects}})
    for (const auto& [who, r] : *running) {
      const double used = per_gpu * (r.gpus - r.scaled * now_scale);
      if (used > 0) (*out)[who] += used;
    }
  return u;
}

namespace {

// How a run ended, from the record that ended it (see RunRecord::outcome).
std::string run_outcome(const JobRecord& after) {
  if (jobs::is_terminal(after.state)) return std::string(jobs::to_string(after.state));
  if (after.reason.starts_with("preempted")) return "PREEMPTED";
  constexpr std::string_view kRequeued = "requeued after ";  // AgentHub::end_job: "requeued after X: why"
  if (after.reason.starts_with(kRequeued)) {
    const std::string rest = after.reason.substr(kRequeued.size());
    if (jobs::parse_state(rest.substr(0, rest.find(':')))) return rest.substr(0, rest.find(':'));
  }
  return "REQUEUED";
}

}  // namespace

std::vector<RunRecord> JobTable::run_changes(const Changes& batch, int64_t now) const {
  std::vector<RunRecord> out;
  for (const auto& after : batch.updates) {
    const JobRecord* before = find(after.id);
    if (!before) continue;
    const bool was_live = holds_gpus(before->state), is_live = holds_gpus(after.state);
    if (was_live && (!is_live || after.attempt != before->attempt)) {
      auto it = runs_.find({before->id, before->attempt});
      RunRecord run;
      if (it != runs_.end()) {
        run = it->second;
      } else {  // a run the table has no record of (cannot happen after migration 4): rebuilt from the job
        run.job = before->id;
        run.attempt = before->attempt;
        run.nodes = before->nodes;
        run.gpus = before->gpus;
        run.slices = before->slices;
        run.start = before->start_time.value_or(now);
      }
      run.end = after.end_time.value_or(now);
      run.outcome = run_outcome(after);
      out.push_back(std::move(run));
    }
    if (is_live && (!was_live || after.attempt != before->attempt))
      out.push_back({after.id, after.attempt, after.nodes, after.gpus, after.slices,
                     after.start_time.value_or(now), std::nullopt, ""});
  }
  return out;
}

int JobTable::removed_gpus() const {
  int n = 0;
  for (topology::NodeId id = 0; id < cluster_.node_count(); ++id)
    if (health_[static_cast<size_t>(id)] == sched::NodeHealth::kRemoved) n += cluster_.node(id).gpus;
  return n;
}

const JobRecord* JobTable::find(JobId id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::vector<JobId> JobTable::gpu_owners() const {
  std::vector<JobId> owners(static_cast<size_t>(cluster_.gpu_count()), 0);
  for (const auto& [id, rec] : holding_) {
    const JobRecord& r = *rec;
    for (auto g : r.gpus) owners[static_cast<size_t>(g)] = id;
    for (const auto& s : r.slices) owners[static_cast<size_t>(s.gpu)] = id;
  }
  for (const auto& [alloc, d] : draining_)
    for (auto g : d.gpus) owners[static_cast<size_t>(g)] = d.job;
  return owners;
}

void JobTable::hold_gpus(GpuHold hold) {
  // A stored hold may predate a change of the cluster file: GPUs it no longer has are dropped.
  std::erase_if(hold.gpus, [&](topology::GpuId g) { return g < 0 || g >= cluster_.gpu_count(); });
  if (hold.gpus.empty()) return;
  if (auto it = draining_.find(hold.alloc); it != draining_.end()) occupancy_.drain(it->second.gpus, -1);
  occupancy_.drain(hold.gpus, +1);
  std::string alloc = hold.alloc;
  draining_.insert_or_assign(std::move(alloc), std::move(hold));
}

JobTable::PlanChanges JobTable::plan_changes(const sched::Plan& plan, int64_t now) const {
  PlanChanges out;
  Changes& b = out.batch;
  Touched ch(jobs_);
  for (const auto& p : plan.starts) {
    const JobRecord* cur = ch.current(p.job);
    if (!cur || cur->state != JobState::kPending) {  // cancelled, held or gone since the snapshot
      ++out.stale;
      continue;
    }
    const bool nodes_up = std::all_of(p.nodes.begin(), p.nodes.end(), [&](topology::NodeId n) {
      return health_[static_cast<size_t>(n)] == sched::NodeHealth::kUp;
    });
    if (!nodes_up || !occupancy_.free_for(p)) {
      ++out.stale;
      continue;
    }
    for (JobId victim : p.preempts) {
      JobRecord* v = ch.touch(victim);
      if (!v || !holds_gpus(v->state)) continue;
      JobRecord requeued;
      requeued.id = v->id;
      requeued.spec = v->spec;
      requeued.submit_time = v->submit_time;
      requeued.attempt = v->attempt;
      *v = std::move(requeued);
      v->reason = "preempted by job " + std::to_string(p.job) + "; requeued";
      b.events.push_back({job_subject(victim), now, "scheduler", v->reason});
    }
    JobRecord* r = ch.touch(p.job);
    place(*r, p, cluster_, now);
    b.events.push_back({job_subject(p.job), now, "scheduler",
                        "placed on " + std::to_string(p.gpus.size() + p.slices.size()) + " GPUs, " +
                            std::to_string(p.nodes.size()) + " nodes, " + std::to_string(p.leaves_spanned) +
                            " leaves"});
  }
  // A compact wait's start is written once, when it begins (unlike reasons), so that a restart ends the wait
  // when it would have ended.
  for (const auto& info : plan.pending) {
    if (!info.compact_since) continue;
    const JobRecord* cur = ch.current(info.job);
    if (cur && cur->state == JobState::kPending && !cur->compact_since)
      ch.touch(info.job)->compact_since = info.compact_since;
  }
  note_reasons(plan.pending, waiting_, ch, out.notes);
  note_unexamined(plan.unexamined, waiting_, out.notes);
  // A reservation's job is in plan.pending with the same estimated_start (handled above).
  b.events.reserve(b.events.size() + plan.rejected.size());
  for (const auto& rej : plan.rejected) {
    JobRecord* r = ch.touch(rej.job);
    if (!r || (r->state != JobState::kPending && r->state != JobState::kHeld)) continue;
    r->state = JobState::kFailed;
    r->reason = rej.message;
    r->end_time = now;
    r->estimated_start.reset();
    b.events.push_back({job_subject(rej.job), now, "scheduler", "rejected: " + rej.message});
  }
  ch.into(b);
  return out;
}

namespace {

// `r` after `event`, by `actor` at `now`; the event's record goes to `b`. `why` ends the reason.
Status apply_event(JobRecord& r, jobs::JobEvent event, const std::string& actor, const std::string& why,
                   int64_t now, Changes& b) {
  auto next = jobs::transition(r.state, event);
  if (!next) return next.error();
  r.state = *next;
  if (jobs::is_terminal(r.state)) {
    r.end_time = now;
    r.estimated_start.reset();
  }
  if (event == jobs::JobEvent::kCancelled) r.reason = "cancelled" + why;
  if (event == jobs::JobEvent::kHeld) r.reason = "held" + why;
  if (event == jobs::JobEvent::kReleased) r.reason.clear();
  b.events.push_back({job_subject(r.id), now, actor, std::string(jobs::to_string(event))});
  return ok();
}

}  // namespace

Result<Changes> JobTable::event_changes(JobId id, jobs::JobEvent event, const std::string& actor,
                                           int64_t now) const {
  const JobRecord* cur = find(id);
  if (!cur) return not_found("job " + std::to_string(id) + " not found");
  Changes b;
  JobRecord r = *cur;
  if (auto s = apply_event(r, event, actor, " by " + actor, now, b); !s) return s.error();
  b.updates.push_back(std::move(r));
  const ArrayProgress* a = cur->spec.array ? array(id) : nullptr;
  if (!a) return b;
  const std::string why = " with array " + std::to_string(id) + " by " + actor;
  for (JobId t : a->tasks) {
    const JobRecord* task = find(t);
    if (!task) continue;
    const bool applies = event == jobs::JobEvent::kCancelled ? !jobs::is_terminal(task->state)
                         : event == jobs::JobEvent::kHeld    ? task->state == JobState::kPending
                                                             : task->state == JobState::kHeld;
    if (!applies) continue;
    JobRecord tr = *task;
    if (apply_event(tr, event, actor, why, now, b)) b.updates.push_back(std::move(tr));
  }
  return b;
}

}  // namespace railyard::lifecycle
