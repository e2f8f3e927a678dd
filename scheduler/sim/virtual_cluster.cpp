#include "scheduler/sim/virtual_cluster.hpp"

#include <algorithm>
#include <unordered_set>
#include <utility>

namespace railyard::sim {

using jobs::JobState;

VirtualCluster::VirtualCluster(const topology::Cluster& cluster, sched::PolicyConfig policy, bool full_passes)
    : table_(cluster),
      policy_(std::move(policy)),
      driver_(table_,
              {[this](lifecycle::Changes& changes, bool array_tasks) { return commit(changes, array_tasks); },
               {}}),
      full_passes_(full_passes) {}

JobId VirtualCluster::submit(jobs::JobSpec spec, int64_t now) {
  lifecycle::Changes b;
  lifecycle::JobRecord r;
  r.id = next_id_++;
  r.spec = std::move(spec);
  r.submit_time = now;
  b.events.push_back({lifecycle::job_subject(r.id), now, r.spec.user, "submitted"});
  b.inserts.push_back(std::move(r));
  apply(b);
  return b.inserts.front().id;
}

Status VirtualCluster::act(JobId id, jobs::JobEvent event, int64_t now, const std::string& actor) {
  auto changes = table_.event_changes(id, event, actor, now);
  if (!changes) return changes.error();
  apply(*changes);
  return ok();
}

bool VirtualCluster::finish(JobId id, JobState end, std::optional<int> exit_code, int64_t now) {
  const lifecycle::JobRecord* r = table_.find(id);
  if (!r || (r->state != JobState::kStarting && r->state != JobState::kRunning)) return false;
  lifecycle::Changes b;
  const bool may_requeue = end == JobState::kFailed || end == JobState::kNodeFail;
  lifecycle::JobTable::end_changes(b, *r, end, exit_code, end == JobState::kCompleted ? "" : "ended", "sim",
                                   may_requeue, now);
  apply(b);
  return true;
}

void VirtualCluster::set_quota(lifecycle::QuotaRecord q) {
  lifecycle::Changes b;
  b.quotas.push_back(std::move(q));
  apply(b);
}

VirtualCluster::PassResult VirtualCluster::pass(int64_t now,
                                                const std::unordered_map<std::string, double>* user_usage,
                                                const std::unordered_map<std::string, double>* project_usage) {
  PassResult out;
  if (auto tasks = driver_.tend_arrays(now, next_id_)) out.tasks = std::move(*tasks);  // commit() never fails
  sched::Snapshot& snap = table_.pass_input(now);
  if (snap.pending.empty()) return out;
  snap.config = policy_;
  if (full_passes_) snap.pending_changes.reset();
  if (user_usage) snap.user_usage = *user_usage;
  if (project_usage) snap.project_usage = *project_usage;
  out.ran = true;
  out.plan = driver_.schedule(snap);
  if (observer_) observer_(snap, out.plan);
  result_ = &out;
  if (auto applied = driver_.apply(out.plan, now, true, policy_.explain)) out.stale = applied->stale;
  result_ = nullptr;
  return out;
}

// The driver's commit of a plan: what it did, from the records it changes (placed: STARTING, requeued
// victims, rejections), read against the table before it, then applied.
Status VirtualCluster::commit(lifecycle::Changes& changes, bool array_tasks) {
  if (result_ && !array_tasks) {
    PassResult& out = *result_;
    std::unordered_set<JobId> placed;
    for (auto& u : changes.updates) {
      const lifecycle::JobRecord* before = table_.find(u.id);
      if (u.state == JobState::kStarting) {
        placed.insert(u.id);
        u.state = JobState::kRunning;  // no agents: a placed job runs at once (JobTable::running_changes)
      } else if (u.state == JobState::kPending && before &&
                 (before->state == JobState::kStarting || before->state == JobState::kRunning)) {
        out.requeued.push_back(u.id);
      } else if (u.state == JobState::kFailed && before && !jobs::is_terminal(before->state)) {
        out.rejected.push_back(u.id);
      }
    }
    for (const auto& p : out.plan.starts)
      if (placed.count(p.job)) out.started.push_back(&p);
  }
  apply(changes);
  return ok();
}

}  // namespace railyard::sim
