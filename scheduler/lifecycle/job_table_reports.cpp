// JobTable: what the nodes report about placed jobs (started, ended, lost).
#include <algorithm>

#include "scheduler/lifecycle/job_table.hpp"

namespace railyard::lifecycle {

using jobs::JobState;

namespace {

bool updates(const Changes& b, JobId id) {
  return std::any_of(b.updates.begin(), b.updates.end(), [&](const JobRecord& u) { return u.id == id; });
}

}  // namespace

void JobTable::running_changes(Changes& b, const JobRecord& r, const std::string& actor, const std::string& what,
                               int64_t now) {
  if (r.state != JobState::kStarting || updates(b, r.id)) return;
  JobRecord u = r;
  u.state = JobState::kRunning;
  b.events.push_back({job_subject(r.id), now, actor, what});
  b.updates.push_back(std::move(u));
}

void JobTable::end_changes(Changes& b, const JobRecord& r, JobState end, std::optional<int> exit_code,
                           const std::string& reason, const std::string& actor, bool may_requeue, int64_t now) {
  if (updates(b, r.id)) return;  // already ended by this batch
  if (may_requeue && r.spec.requeue) {
    JobRecord q;  // everything a placement set is cleared; the attempt counts on
    q.id = r.id;
    q.spec = r.spec;
    q.submit_time = r.submit_time;
    q.attempt = r.attempt;
    q.reason = "requeued after " + std::string(jobs::to_string(end)) + ": " + reason;
    b.events.push_back({job_subject(r.id), now, actor, q.reason});
    b.updates.push_back(std::move(q));
    return;
  }
  JobRecord e = r;
  e.state = end;
  e.end_time = now;
  e.exit_code = exit_code;
  e.reason = end == JobState::kCompleted ? "" : reason;
  b.events.push_back(
      {job_subject(r.id), now, actor, std::string(jobs::to_string(end)) + (reason.empty() ? "" : ": " + reason)});
  b.updates.push_back(std::move(e));
}

Changes JobTable::nodes_down_changes(const std::vector<std::string>& names, const std::string& reason,
                                     int64_t now) const {
  Changes b;
  for (const auto& n : names) {
    b.nodes.push_back({n, sched::NodeHealth::kDown, reason});
    b.events.push_back({"node:" + n, now, "scheduler", "down: " + reason});
  }
  for (const auto& held : holding_) {
    const JobRecord* r = held.second;  // not a structured binding: the lambda below captures it
    const auto on = std::find_if(names.begin(), names.end(), [&](const std::string& n) {
      return std::find(r->nodes.begin(), r->nodes.end(), n) != r->nodes.end();
    });
    if (on != names.end())
      end_changes(b, *r, JobState::kNodeFail, std::nullopt, "node " + *on + " down: " + reason, "scheduler", true,
                  now);
  }
  return b;
}

}  // namespace railyard::lifecycle
