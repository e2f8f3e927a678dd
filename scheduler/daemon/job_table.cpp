#include "scheduler/daemon/job_table.hpp"

#include <unordered_map>

namespace railyard::daemon {
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
         a.time_to_train_s == b.time_to_train_s && a.attempt == b.attempt;
}

// Copies of the jobs a plan touches, collected so that several changes to one job become one update.
class Changes {
 public:
  explicit Changes(const std::map<JobId, JobRecord>& jobs) : jobs_(jobs) {}
  JobRecord* touch(JobId id) {
    if (auto it = changed_.find(id); it != changed_.end()) return &it->second;
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return nullptr;
    order_.push_back(id);
    return &changed_.emplace(id, it->second).first->second;
  }
  const JobRecord* current(JobId id) const {
    if (auto it = changed_.find(id); it != changed_.end()) return &it->second;
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : &it->second;
  }
  void into(WriteBatch& b) {
    for (JobId id : order_)
      if (!same_mutable(changed_.at(id), jobs_.at(id))) b.updates.push_back(std::move(changed_.at(id)));
  }

 private:
  const std::map<JobId, JobRecord>& jobs_;
  std::unordered_map<JobId, JobRecord> changed_;
  std::vector<JobId> order_;
};

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
  ++r.attempt;
}

}  // namespace

std::string job_subject(JobId id) { return "job:" + std::to_string(id); }

JobTable::JobTable(const topology::Cluster& cluster)
    : cluster_(cluster),
      health_(static_cast<size_t>(cluster.node_count()), sched::NodeHealth::kUp),
      health_reason_(static_cast<size_t>(cluster.node_count())) {}

void JobTable::load(store::StoredState state) {
  jobs_.clear();
  active_.clear();
  std::fill(health_.begin(), health_.end(), sched::NodeHealth::kUp);
  std::fill(health_reason_.begin(), health_reason_.end(), std::string());
  WriteBatch b;
  b.inserts = std::move(state.jobs);
  b.nodes = std::move(state.nodes);
  apply(b);
}

void JobTable::apply(const WriteBatch& batch) {
  auto put = [&](const JobRecord& r) {
    jobs_[r.id] = r;
    if (jobs::is_terminal(r.state)) {
      active_.erase(r.id);
    } else {
      active_.insert(r.id);
    }
  };
  for (const auto& r : batch.inserts) put(r);
  for (const auto& r : batch.updates) {
    auto it = jobs_.find(r.id);
    if (it == jobs_.end()) continue;
    JobRecord merged = r;
    merged.spec = std::move(it->second.spec);  // updates never carry a new spec
    merged.submit_time = it->second.submit_time;
    put(merged);
  }
  for (const auto& n : batch.nodes) {
    const topology::NodeId id = cluster_.find_node(n.name);
    if (id < 0) continue;
    health_[static_cast<size_t>(id)] = n.health;
    health_reason_[static_cast<size_t>(id)] = n.reason;
  }
}

const JobRecord* JobTable::find(JobId id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::vector<JobId> JobTable::gpu_owners() const {
  std::vector<JobId> owners(static_cast<size_t>(cluster_.gpu_count()), 0);
  for (JobId id : active_) {
    const JobRecord& r = jobs_.at(id);
    if (!holds_gpus(r.state)) continue;
    for (auto g : r.gpus) owners[static_cast<size_t>(g)] = id;
    for (const auto& s : r.slices) owners[static_cast<size_t>(s.gpu)] = id;
  }
  for (const auto& [alloc, d] : draining_)
    for (auto g : d.gpus) owners[static_cast<size_t>(g)] = d.job;
  return owners;
}

sched::DependencyState JobTable::dependency_state(JobId id) const {
  const JobRecord* r = find(id);
  if (!r) return sched::DependencyState::kNeverSatisfied;
  if (r->state == JobState::kCompleted) return sched::DependencyState::kSatisfied;
  if (jobs::is_terminal(r->state)) return sched::DependencyState::kNeverSatisfied;
  return sched::DependencyState::kWaiting;
}

sched::Snapshot JobTable::snapshot(int64_t now) const {
  sched::Snapshot s;
  s.cluster = &cluster_;
  s.health = health_;
  s.now = now;
  for (JobId id : active_) {
    const JobRecord& r = jobs_.at(id);
    if (holds_gpus(r.state)) {
      s.running.push_back({id, &r.spec, r.gpus, r.slices, r.start_time.value_or(now)});
    } else if (r.state == JobState::kPending || r.state == JobState::kHeld) {
      s.pending.push_back({id, &r.spec, r.submit_time, r.state == JobState::kHeld});
      for (JobId dep : r.spec.afterok) s.dependencies.emplace(dep, dependency_state(dep));
    }
  }
  // Draining allocations hold their GPUs under a negative id, so the core never takes them for a job of its
  // own; a preemption that names one is ignored by plan_changes() (unknown id).
  JobId fake = 0;
  for (const auto& [alloc, d] : draining_) {
    const JobRecord* r = find(d.job);
    if (r) s.running.push_back({--fake, &r->spec, d.gpus, {}, now});
  }
  return s;
}

void JobTable::hold_gpus(const std::string& alloc, JobId job, std::vector<topology::GpuId> gpus) {
  if (!gpus.empty()) draining_[alloc] = {job, std::move(gpus)};
}

WriteBatch JobTable::plan_changes(const sched::Plan& plan, int64_t now) const {
  WriteBatch b;
  Changes ch(jobs_);
  for (const auto& p : plan.starts) {
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
    if (!r || r->state != JobState::kPending) continue;
    place(*r, p, cluster_, now);
    b.events.push_back({job_subject(p.job), now, "scheduler",
                        "placed on " + std::to_string(p.gpus.size() + p.slices.size()) + " GPUs, " +
                            std::to_string(p.nodes.size()) + " nodes, " + std::to_string(p.leaves_spanned) +
                            " leaves"});
  }
  for (const auto& info : plan.pending) {
    // Most pending jobs keep their reason from pass to pass: compare before copying the record.
    const JobRecord* cur = ch.current(info.job);
    if (!cur || (cur->state != JobState::kPending && cur->state != JobState::kHeld)) continue;
    std::string reason =
        std::string(sched::to_string(info.reason)) + (info.message.empty() ? "" : ": " + info.message);
    if (cur->reason == reason && cur->estimated_start == info.estimated_start) continue;
    JobRecord* r = ch.touch(info.job);
    r->reason = std::move(reason);
    r->estimated_start = info.estimated_start;
  }
  for (const auto& res : plan.reservations)
    if (JobRecord* r = ch.touch(res.job); r && r->state == JobState::kPending)
      r->estimated_start = res.start_time;
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
  return b;
}

Result<WriteBatch> JobTable::event_changes(JobId id, jobs::JobEvent event, const std::string& actor,
                                           int64_t now) const {
  const JobRecord* cur = find(id);
  if (!cur) return not_found("job " + std::to_string(id) + " not found");
  auto next = jobs::transition(cur->state, event);
  if (!next) return next.error();
  JobRecord r = *cur;
  r.state = *next;
  if (jobs::is_terminal(r.state)) {
    r.end_time = now;
    r.estimated_start.reset();
  }
  if (event == jobs::JobEvent::kCancelled) r.reason = "cancelled by " + actor;
  if (event == jobs::JobEvent::kHeld) r.reason = "held by " + actor;
  if (event == jobs::JobEvent::kReleased) r.reason.clear();
  WriteBatch b;
  b.events.push_back({job_subject(id), now, actor, std::string(jobs::to_string(event))});
  b.updates.push_back(std::move(r));
  return b;
}

}  // namespace railyard::daemon
