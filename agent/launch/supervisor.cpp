#include "agent/launch/supervisor.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <thread>

#include "agent/launch/cgroup.hpp"
#include "agent/launch/proc.hpp"
#include "agent/launch/process.hpp"

namespace railyard::agent {

std::string_view to_string(AllocState s) {
  switch (s) {
    case AllocState::kCompleted:
      return "completed";
    case AllocState::kFailed:
      return "failed";
    case AllocState::kCancelled:
      return "cancelled";
    case AllocState::kTimeout:
      return "timeout";
    case AllocState::kLost:
      return "lost";
    case AllocState::kOutOfMemory:
      return "out_of_memory";
  }
  return "unknown";
}

Supervisor::Supervisor(SupervisorOptions options) : options_(std::move(options)) {}

void Supervisor::track(AllocRecord record) {
  Tracked t;
  t.exited.assign(record.ranks.size(), false);
  if (record.deadline_unix_ms > 0) {
    using namespace std::chrono;
    const auto now_ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
    t.deadline = Clock::now() + milliseconds(record.deadline_unix_ms - now_ms);
  }
  t.record = std::move(record);
  const std::string id = t.record.alloc_id;
  allocs_.insert_or_assign(id, std::move(t));
}

void Supervisor::add(AllocRecord record) {
  for (const auto& r : record.ranks) pending_.push_back(RankStarted{record.alloc_id, r.rank, r.pid});
  track(std::move(record));
}

void Supervisor::adopt(AllocRecord record) { track(std::move(record)); }

void Supervisor::hold(AllocRecord record) {
  const std::string id = record.alloc_id;
  add(std::move(record));
  allocs_.at(id).held = true;
}

Status Supervisor::add_process(const std::string& alloc_id, RankRecord process) {
  auto it = allocs_.find(alloc_id);
  if (it == allocs_.end()) return not_found("no running allocation " + alloc_id);
  Tracked& t = it->second;
  if (t.outcome) return Error{ErrorCode::kConflict, "allocation " + alloc_id + " is ending"};
  pending_.push_back(RankStarted{alloc_id, process.rank, process.pid});
  t.record.ranks.push_back(std::move(process));
  t.exited.push_back(false);
  t.added.resize(t.record.ranks.size(), false);
  t.added.back() = true;
  return ok();
}

std::vector<AllocRecord> Supervisor::records() const {
  std::vector<AllocRecord> out;
  for (const auto& [id, t] : allocs_) out.push_back(t.record);
  return out;
}

Status Supervisor::cancel(const std::string& alloc_id) {
  auto it = allocs_.find(alloc_id);
  if (it == allocs_.end()) return not_found("no running allocation " + alloc_id);
  teardown(it->second, AllocState::kCancelled);
  return ok();
}

void Supervisor::teardown(Tracked& t, AllocState outcome) {
  if (t.outcome) return;  // the first reason wins; a cancel during a failure's teardown changes nothing
  t.outcome = outcome;
  t.kill_at = Clock::now() + options_.grace;
  for (const auto& r : t.record.ranks) signal_group(r.pgid, SIGTERM);
}

void Supervisor::rank_exited(Tracked& t, size_t i, int code, int sig, bool lost,
                             std::vector<SupervisorEvent>& events) {
  t.exited[i] = true;
  events.push_back(RankExited{t.record.alloc_id, t.record.ranks[i].rank, code, sig, lost});
  const bool added = i < t.added.size() && t.added[i];
  t.any_lost = t.any_lost || (lost && !added);
  if (lost) return;
  if (t.held || added) {
    // A process added through add_process (an orted that mpirun asked for through railyard-agent-exec)
    // exits 0 however the job ends. One that fails never reports to mpirun, and mpirun learns of a remote
    // daemon's death only from its rsh agent, which exited once the process started: it would wait for it
    // forever. So its failure fails the allocation, and the scheduler ends the job.
    if (code != 0 && !t.outcome) {
      t.failing_code = code;
      teardown(t, AllocState::kFailed);
    }
    return;
  }
  if (!t.first_code) t.first_code = code;
  if (code != 0 && !t.outcome) {
    t.failing_code = code;
    teardown(t, AllocState::kFailed);
  }
}

// Reaps each rank's whole group (the leader, and orphans we inherited as subreaper); ranks that are not
// our children (adopted) are checked for liveness instead.
void Supervisor::reap(Tracked& t, std::vector<SupervisorEvent>& events) {
  auto exited = [&](size_t i, int status) {
    const bool signalled = WIFSIGNALED(status);
    const int sig = signalled ? WTERMSIG(status) : 0;
    rank_exited(t, i, signalled ? 128 + sig : WEXITSTATUS(status), sig, false, events);
  };
  for (size_t i = 0; i < t.record.ranks.size(); ++i) {
    const RankRecord& r = t.record.ranks[i];
    if (auto it = reaped_.find(r.pid); it != reaped_.end() && !t.exited[i]) exited(i, it->second);
    int status = 0;
    pid_t p;
    while ((p = waitpid(-r.pgid, &status, WNOHANG)) > 0)
      if (p == r.pid && !t.exited[i]) exited(i, status);
    if (p < 0 && errno == ECHILD && !t.exited[i] && !process_alive(r.pid, r.start_ticks))
      rank_exited(t, i, -1, 0, true, events);
  }
}

bool Supervisor::step(Tracked& t, std::vector<SupervisorEvent>& events, GroupLiveness& groups) {
  reap(t, events);
  const auto now = Clock::now();
  if (!t.outcome && t.deadline && now >= *t.deadline) teardown(t, AllocState::kTimeout);
  auto groups_alive = [&t, &groups] {
    for (const auto& r : t.record.ranks)
      if (groups.alive(r.pgid)) return true;
    return false;
  };
  if (t.kill_at && !t.killed && now >= *t.kill_at) {
    for (const auto& r : t.record.ranks) signal_group(r.pgid, SIGKILL);
    t.killed = true;
  }
  if (t.held && !t.outcome) return false;
  for (bool e : t.exited)
    if (!e) return false;
  if (t.outcome && !t.killed && groups_alive()) return false;          // stragglers get until kill_at
  for (const auto& r : t.record.ranks) signal_group(r.pgid, SIGKILL);  // leftovers of a finished job
  // A SIGKILLed process is gone only once it has run its exit, and its GPUs are free only then: the
  // allocation finishes, and its GPUs are given back, when the groups are empty, or after `grace` more for a
  // member that does not die (uninterruptible sleep; its cgroup is then retried each poll).
  if (groups_alive()) {
    if (!t.empty_by) t.empty_by = now + options_.grace;
    if (now < *t.empty_by) return false;
  }
  AllocState state = t.outcome.value_or(t.any_lost ? AllocState::kLost : AllocState::kCompleted);
  const int code = state == AllocState::kFailed ? t.failing_code : t.first_code.value_or(t.any_lost ? -1 : 0);
  constexpr int kKilled = 128 + SIGKILL;
  if ((state == AllocState::kFailed || state == AllocState::kLost) &&
      (cgroup_oom_kills(t.record.cgroups) > 0 || (code == kKilled && cgroup_peak_reached_limit(t.record.cgroups))))
    state = AllocState::kOutOfMemory;
  events.push_back(AllocationFinished{t.record.alloc_id, t.record.job_id, state, code});
  if (options_.allocs) options_.allocs->remove(t.record.alloc_id);
  if (!remove_cgroup(t.record.cgroups)) cgroups_to_remove_.push_back(t.record.cgroups);
  return true;
}

std::vector<SupervisorEvent> Supervisor::poll() {
  groups_.refresh();
  return poll(groups_);
}

std::vector<SupervisorEvent> Supervisor::poll(GroupLiveness& groups) {
  std::vector<SupervisorEvent> events = std::move(pending_);
  pending_.clear();
  int status = 0;
  for (pid_t p; options_.reap_all_children && (p = waitpid(-1, &status, WNOHANG)) > 0;) reaped_[p] = status;
  for (auto it = allocs_.begin(); it != allocs_.end();) {
    if (step(it->second, events, groups))
      it = allocs_.erase(it);
    else
      ++it;
  }
  reaped_.clear();  // statuses of processes that were no rank: orphans, nothing to report
  std::erase_if(cgroups_to_remove_, [](const auto& dirs) { return remove_cgroup(dirs); });
  return events;
}

std::vector<SupervisorEvent> Supervisor::wait_for(std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  for (;;) {
    auto events = poll();
    const auto now = Clock::now();
    if (!events.empty() || now >= until) return events;
    std::this_thread::sleep_for(std::min<Clock::duration>(options_.poll_interval, until - now));
  }
}

}  // namespace railyard::agent
