// JobTable: dependencies (afterok/afterany/afternotok/aftercorr), parking of jobs whose dependencies cannot be
// met yet, and job arrays (tasks released within their window).
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "scheduler/lifecycle/job_table.hpp"

namespace railyard::lifecycle {

using jobs::JobState;

sched::DependencyState JobTable::dependency_state(const jobs::Dependency& d) const {
  using S = sched::DependencyState;
  using T = jobs::Dependency::Type;
  // The state of what `d` names: a job, or a task of an array. A task the array ended without creating
  // (cancelled, failed on a dependency) never ran: it counts as ended without completing.
  std::optional<JobState> state;
  if (d.task < 0) {
    const JobRecord* r = find(d.job);
    if (!r) return S::kNeverSatisfied;  // no such job
    state = r->state;
  } else {
    const JobRecord* parent = find(d.job);
    const ArrayProgress* a = array(d.job);
    const auto pos = parent && parent->spec.array ? parent->spec.array->position_of(d.task) : std::nullopt;
    if (!a || !pos) return S::kNeverSatisfied;  // no such array, or no such index in it
    if (*pos < a->created()) {
      const JobRecord* t = find(a->tasks[static_cast<size_t>(*pos)]);
      if (!t) return S::kNeverSatisfied;
      state = t->state;
    } else if (!jobs::is_terminal(parent->state)) {
      return S::kWaiting;  // not created yet
    } else {
      state = JobState::kCancelled;
    }
  }
  if (!jobs::is_terminal(*state)) return S::kWaiting;
  const bool completed = *state == JobState::kCompleted;
  switch (d.type) {
    case T::kAfterAny:
      return S::kSatisfied;
    case T::kAfterNotOk:
      return completed ? S::kNeverSatisfied : S::kSatisfied;
    default:
      return completed ? S::kSatisfied : S::kNeverSatisfied;
  }
}

void JobTable::corresponding_tasks(jobs::JobSpec& task) const {
  std::vector<jobs::Dependency> after;
  for (const auto& d : task.after) {
    if (d.type != jobs::Dependency::Type::kAfterCorr) {
      after.push_back(d);
      continue;
    }
    const JobRecord* other = find(d.job);
    if (other && other->spec.array && other->spec.array->position_of(task.array_task))
      after.push_back({jobs::Dependency::Type::kAfterOk, d.job, task.array_task});
  }
  task.after = std::move(after);
}

std::optional<JobTable::Unmet> JobTable::unmet_dependency(const jobs::JobSpec& parent) const {
  std::optional<Unmet> first;
  parent.any_dependency([&](const jobs::Dependency& d) {
    const auto st = dependency_state(d);
    if (st == sched::DependencyState::kNeverSatisfied) return first = Unmet{d, true}, true;
    if (st == sched::DependencyState::kWaiting && !first) first = Unmet{d, false};
    return false;
  });
  return first;
}

void JobTable::unpark_dependents(JobId target) {
  auto it = parked_on_.find(target);
  if (it == parked_on_.end()) return;
  for (JobId id : it->second)
    if (auto node = parked_.extract(id)) {
      enter_pass(*node.mapped());
      waiting_.insert(std::move(node));
    }
  parked_on_.erase(it);
}

void JobTable::unpark_all() {
  for (const auto& [id, r] : parked_) enter_pass(*r);
  waiting_.merge(parked_);
  parked_on_.clear();
}

void JobTable::park(const std::vector<sched::PendingInfo>& pending, bool explain) {
  using sched::PendingReason;
  for (const auto& info : pending) {
    if (info.reason != PendingReason::kHeld && info.reason != PendingReason::kDependency) continue;
    auto it = waiting_.find(info.job);
    if (it == waiting_.end()) continue;
    const JobRecord& r = *it->second;
    // The gate as a pass would find it now (sched::Pass::gates_open): held first, then the first
    // dependency not met, in the spec's order.
    std::optional<jobs::Dependency> gate;
    bool waiting = false;
    r.spec.any_dependency([&](const jobs::Dependency& d) {
      const auto st = dependency_state(d);
      if (st == sched::DependencyState::kSatisfied) return false;
      gate = d;
      waiting = st == sched::DependencyState::kWaiting;
      return true;
    });
    const bool same = info.reason == PendingReason::kHeld
                          ? r.state == JobState::kHeld
                          : r.state == JobState::kPending && waiting &&
                                (!explain || info.message == sched::dependency_waiting(*gate));
    if (!same || r.estimated_start) continue;
    const std::string kind(sched::to_string(info.reason));
    if (r.reason != (info.message.empty() ? kind : kind + ": " + info.message)) continue;  // not told yet
    // Only the first unmet dependency counts (the pass stops there); one met never changes again.
    if (info.reason == PendingReason::kDependency) parked_on_[gate->job].push_back(r.id);
    leave_pass(r.id);
    parked_.insert(waiting_.extract(it));
  }
}

const ArrayProgress* JobTable::array(JobId id) const {
  auto it = arrays_.find(id);
  return it == arrays_.end() ? nullptr : &it->second;
}

int64_t JobTable::array_window(const jobs::JobSpec& spec) const {
  if (spec.array && spec.array->max_running > 0) return spec.array->max_running;
  const int64_t fill = cluster_.gpu_count() / std::max(1, spec.total_gpus());
  return std::clamp(fill, kMinArrayWindow, kMaxArrayWindow);
}

Changes JobTable::array_changes(int64_t now, JobId& next_id) const {
  Changes b;
  for (JobId id : open_arrays_) {
    const JobRecord& parent = jobs_.at(id);
    const ArrayProgress& a = arrays_.at(id);
    if (parent.state != JobState::kPending) continue;
    // Tasks are created only once the array's dependencies are met (each task carries them too).
    const auto unmet = unmet_dependency(parent.spec);
    const bool never = unmet && unmet->never;  // a dependency that can no longer be met
    std::string waits;
    if (unmet)
      waits = "dependency: " +
              (never ? sched::dependency_broken(unmet->dep) : sched::dependency_waiting(unmet->dep));
    if (!waits.empty() && !(never && a.active == 0)) {
      if (parent.reason != waits) {
        JobRecord r = parent;
        r.reason = std::move(waits);
        b.updates.push_back(std::move(r));
      }
      continue;
    }
    if (never) {  // nothing left running: the array fails as its tasks would
      JobRecord r = parent;
      r.state = JobState::kFailed;
      r.end_time = now;
      r.reason = std::move(waits);
      b.events.push_back({job_subject(id), now, "scheduler", "rejected: " + r.reason});
      b.updates.push_back(std::move(r));
      continue;
    }
    if (a.created() < a.total) {
      if (!parent.reason.empty()) {  // no longer waiting
        JobRecord r = parent;
        r.reason.clear();
        b.updates.push_back(std::move(r));
      }
      int64_t n = std::min(array_window(parent.spec) - a.active, a.total - a.created());
      const int need = parent.spec.total_gpus();
      if (need > 0 && parent.spec.mig.empty() && parent.spec.qos != jobs::Qos::kHigh) {
        const int64_t startable = (cluster_.gpu_count() - occupancy_.owned()) / need;
        n = std::min(n, std::max(kMinArrayWindow, startable) - a.pending);
      }
      for (int64_t k = a.created(); k < a.created() + n; ++k) {
        JobRecord t;
        t.id = next_id++;
        t.spec = parent.spec;
        t.spec.array.reset();
        t.spec.array_job = id;
        t.spec.array_task = parent.spec.array->index_at(k);
        t.spec.env["RAILYARD_ARRAY_JOB_ID"] = std::to_string(id);
        t.spec.env["RAILYARD_ARRAY_TASK_ID"] = std::to_string(t.spec.array_task);
        corresponding_tasks(t.spec);
        t.submit_time = parent.submit_time;  // its place in the queue is the array's
        b.events.push_back(
            {job_subject(t.id), now, "scheduler",
             "submitted: task " + std::to_string(t.spec.array_task) + " of array " + std::to_string(id)});
        b.inserts.push_back(std::move(t));
      }
      continue;
    }
    if (a.active > 0) continue;
    JobRecord r = parent;
    r.state = a.failed == 0 ? JobState::kCompleted : JobState::kFailed;
    r.exit_code = a.max_exit;
    r.end_time = now;
    r.estimated_start.reset();
    r.reason = a.failed == 0
                   ? ""
                   : std::to_string(a.failed) + " of " + std::to_string(a.total) + " tasks did not complete";
    b.events.push_back(
        {job_subject(id), now, "scheduler",
         "ended: " + std::to_string(a.completed) + " of " + std::to_string(a.total) + " tasks completed"});
    b.updates.push_back(std::move(r));
  }
  return b;
}

}  // namespace railyard::lifecycle
