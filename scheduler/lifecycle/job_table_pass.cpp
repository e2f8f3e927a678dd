// JobTable: the pass input, kept by every change (pass_input()) and copied for the daemon (snapshot()).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <unordered_map>
#include <vector>

#include "scheduler/lifecycle/job_table.hpp"

namespace railyard::lifecycle {

using jobs::JobState;

void JobTable::enter_pass(const JobRecord& r) {
  if (r.state == JobState::kPending || r.state == JobState::kHeld) {
    journal_.push_back(r.id);
    if (r.spec.any_dependency([](const jobs::Dependency&) { return true; })) ++pending_with_dependencies_;
    ++pending_by_gpus_[r.spec.gpus];
    pending_high_ += r.spec.qos == jobs::Qos::kHigh;
    pending_slot_[r.id] = static_cast<uint32_t>(live_.pending.size());
    live_.pending.push_back(
        {r.id, &r.spec, r.submit_time, r.state == JobState::kHeld, r.compact_since.value_or(-1)});
  } else {
    running_slot_[r.id] = static_cast<uint32_t>(live_.running.size());
    live_.running.push_back({r.id, &r.spec, r.gpus, r.slices, r.start_time.value_or(0)});
    count_running(live_.running.back(), +1);
  }
}

void JobTable::count_running(const sched::RunningJob& r, int sign) {
  if (!usage_) return;
  const double h = usage_->half_life_s();
  const double exponent = static_cast<double>(r.start_time - use_origin_) / h;
  if (sign > 0 && exponent > 32) return rebase_running_use(r.start_time);  // counts r
  const double g = sign * static_cast<double>(r.gpus.size() + r.slices.size());
  const double scaled = g * std::exp2(exponent);
  for (auto* m : {&running_users_, &running_projects_}) {
    const std::string& who = m == &running_users_ ? r.spec->user : r.spec->project;
    RunningUse& u = (*m)[who];
    u.gpus += g;  // whole numbers: exact
    u.scaled += scaled;
    if (u.gpus == 0) m->erase(who);
  }
}

// From the latest start on: every exponent is at most 0 (an older run's term only gets small).
void JobTable::rebase_running_use(int64_t origin) {
  for (const auto& r : live_.running) origin = std::max(origin, r.start_time);
  use_origin_ = origin;
  running_users_.clear();
  running_projects_.clear();
  for (const auto& r : live_.running) count_running(r, +1);
}

namespace {

// Takes `id` out of `v` (swap with the last), keeping `slots` right; false when it was not there.
template <typename T>
bool take_out(std::vector<T>& v, std::unordered_map<JobId, uint32_t>& slots, JobId id) {
  auto it = slots.find(id);
  if (it == slots.end()) return false;
  const uint32_t pos = it->second;
  slots.erase(it);
  if (pos + 1 != v.size()) {
    v[pos] = std::move(v.back());
    slots[v[pos].id] = pos;
  }
  v.pop_back();
  return true;
}

}  // namespace

void JobTable::leave_pass(JobId id) {
  if (auto it = pending_slot_.find(id); it != pending_slot_.end()) {
    journal_.push_back(id);
    const jobs::JobSpec& spec = *live_.pending[it->second].spec;
    if (spec.any_dependency([](const jobs::Dependency&) { return true; })) --pending_with_dependencies_;
    if (auto n = pending_by_gpus_.find(spec.gpus); n != pending_by_gpus_.end() && --n->second == 0)
      pending_by_gpus_.erase(n);
    pending_high_ -= spec.qos == jobs::Qos::kHigh;
    take_out(live_.pending, pending_slot_, id);
  }
  if (auto it = running_slot_.find(id); it != running_slot_.end()) count_running(live_.running[it->second], -1);
  take_out(live_.running, running_slot_, id);
}

std::shared_ptr<const sched::PendingChanges> JobTable::take_pending_changes() const {
  static std::atomic<uint64_t> sources{0};
  if (journal_source_ == 0) journal_source_ = ++sources;
  auto c = std::make_shared<sched::PendingChanges>();
  c->source = journal_source_;
  c->from = journal_generation_;
  c->to = ++journal_generation_;
  std::sort(journal_.begin(), journal_.end());
  journal_.erase(std::unique(journal_.begin(), journal_.end()), journal_.end());
  for (JobId id : journal_) {
    if (auto it = pending_slot_.find(id); it != pending_slot_.end())
      c->current.push_back(live_.pending[it->second]);
    else
      c->gone.push_back(id);
  }
  journal_.clear();
  return c;
}

void JobTable::add_dependencies(sched::Snapshot& s) const {
  s.dependencies.clear();
  if (pending_with_dependencies_ == 0) return;
  for (const auto& p : s.pending)
    p.spec->any_dependency([&](const jobs::Dependency& d) {
      s.dependencies.emplace(d, dependency_state(d));
      return false;
    });
}

// Draining allocations hold their GPUs under a negative id, so the core never takes them for a job of its own;
// a preemption that names one is ignored by plan_changes() (unknown id).
void JobTable::add_draining(sched::Snapshot& s) const {
  JobId fake = 0;
  for (const auto& [alloc, d] : draining_)
    if (const JobRecord* r = find(d.job)) s.running.push_back({--fake, &r->spec, d.gpus, {}, s.now});
}

void JobTable::note_starting(JobId id, std::string note) {
  const JobRecord* r = find(id);
  if (r && r->state == JobState::kStarting) starting_notes_[id] = {r->attempt, std::move(note)};
  // Notes of jobs no longer STARTING are dropped as new ones come: the map holds what is starting now.
  if (starting_notes_.size() > 1024)
    std::erase_if(starting_notes_, [this](const auto& n) {
      const JobRecord* j = find(n.first);
      return !j || j->state != JobState::kStarting;
    });
}

const std::string& JobTable::starting_note(const JobRecord& r) const {
  static const std::string kNone;
  if (r.state != JobState::kStarting) return kNone;
  auto it = starting_notes_.find(r.id);
  return it == starting_notes_.end() || it->second.first != r.attempt ? kNone : it->second.second;
}

void JobTable::set_containers(topology::NodeId n, bool runs_images) {
  containers_[static_cast<size_t>(n)] = runs_images ? 1 : 0;
}

sched::Snapshot& JobTable::pass_input(int64_t now) {
  live_.cluster = &cluster_;
  live_.now = now;
  if (live_.health != health_) live_.health = health_;
  if (live_.containers != containers_) live_.containers = containers_;
  add_dependencies(live_);
  live_.pending_changes = take_pending_changes();
  if (draining_.empty()) return live_;
  with_draining_ = live_;
  add_draining(with_draining_);
  return with_draining_;
}

sched::Snapshot JobTable::snapshot(int64_t now) const {
  sched::Snapshot s;
  s.cluster = &cluster_;
  s.health = health_;
  s.containers = containers_;
  s.now = now;
  s.pending = live_.pending;
  s.running.reserve(live_.running.size() + draining_.size());
  s.running.assign(live_.running.begin(), live_.running.end());
  s.user_quota = live_.user_quota;
  s.project_quota = live_.project_quota;
  s.user_shares = live_.user_shares;
  s.project_shares = live_.project_shares;
  if (usage_) {
    auto u = usage_at(now);
    s.user_usage = std::move(u.users);
    s.project_usage = std::move(u.projects);
  }
  add_dependencies(s);
  add_draining(s);
  s.pending_changes = take_pending_changes();
  return s;
}

}  // namespace railyard::lifecycle
