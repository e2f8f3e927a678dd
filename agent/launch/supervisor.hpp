// Supervisor: watches the allocations a Launcher started (or recover() found) and turns what happens to
// their processes into events. No SIGCHLD handler and no thread: poll() reaps with waitpid(WNOHANG), so it
// fits in any event loop (call it from a timer); wait_for() is a blocking convenience for tools and tests.
//
// Per allocation:
//   running --rank exits non-zero--> FAILED    --+
//   running --cancel()-------------> CANCELLED --+--> SIGTERM to every rank's process group,
//   running --time limit-----------> TIMEOUT   --+    SIGKILL to what is left after `grace`
//   running --every rank exits 0---> COMPLETED (leftover background processes get SIGKILL)
// A FAILED allocation whose cgroup counts a kernel OOM kill ends OUT_OF_MEMORY instead: the job went past
// its memory limit (a job that survives the kill of one of its processes and exits 0 still COMPLETES).
// The group is read before it is removed, so the verdict holds for adopted allocations too.
// AllocationFinished comes once every rank has exited and the groups are empty: what is left then gets
// SIGKILL, and the allocation waits up to `grace` more for it to go (a process in uninterruptible sleep may
// outlive that; it finishes anyway). The state file is then removed. Destroying a Supervisor does not touch
// the processes.
//
// Adopted allocations (from recover()) are usually not our children: their ranks are polled with
// kill(pid, 0) and their exit codes are unknown (RankExited::exit_code_lost; state LOST unless the agent
// cancelled or timed them out).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agent/launch/proc.hpp"
#include "agent/state/alloc_state.hpp"
#include "common/result.hpp"

namespace railyard::agent {

enum class AllocState { kCompleted, kFailed, kCancelled, kTimeout, kLost, kOutOfMemory };
std::string_view to_string(AllocState s);

struct RankStarted {
  std::string alloc_id;
  int rank = 0;
  pid_t pid = 0;
};

struct RankExited {
  std::string alloc_id;
  int rank = 0;
  int code = 0;    // exit status; 128 + signal when killed; -1 when lost
  int signal = 0;  // terminating signal, 0 when it exited
  bool exit_code_lost = false;
};

struct AllocationFinished {
  std::string alloc_id;
  long long job_id = 0;
  AllocState state = AllocState::kCompleted;
  int exit_code = 0;  // FAILED: the first failing rank's code; CANCELLED/TIMEOUT: the first rank's code
};

using SupervisorEvent = std::variant<RankStarted, RankExited, AllocationFinished>;

struct SupervisorOptions {
  std::shared_ptr<AllocStore> allocs;  // finished allocations' records are removed from here (if set)
  std::chrono::milliseconds grace{10000};
  std::chrono::milliseconds poll_interval{20};  // wait_for's sleep between polls
  // With become_subreaper(): also reap every child (waitpid(-1)) on each poll, so orphans outside the
  // ranks' groups (a worker's `setsid` children) do not stay zombies. Only for a process that
  // waits for no other children of its own.
  bool reap_all_children = false;
};

class Supervisor {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Supervisor(SupervisorOptions options);

  void add(AllocRecord record);    // started by a Launcher: RankStarted events follow
  void adopt(AllocRecord record);  // found by recover()
  // An allocation that finishes only when cancelled: a later node of an mpi job, whose processes (orteds)
  // arrive one by one through add_process(). A process added that way does not decide a successful
  // outcome, but its failure (a non-zero exit or a signal, before the allocation ends otherwise) fails the
  // allocation: mpirun would wait forever for a daemon that died. They are signalled and waited for like
  // ranks.
  void hold(AllocRecord record);
  Status add_process(const std::string& alloc_id, RankRecord process);
  Status cancel(const std::string& alloc_id);
  bool contains(const std::string& alloc_id) const { return allocs_.count(alloc_id) > 0; }

  std::vector<SupervisorEvent> poll();
  // The same with a GroupLiveness the caller shares between supervisors (one /proc scan per tick for all
  // of them, at most) and refreshes once per tick itself.
  std::vector<SupervisorEvent> poll(GroupLiveness& groups);
  // Polls until at least one event or the timeout; returns what the last poll produced.
  std::vector<SupervisorEvent> wait_for(std::chrono::milliseconds timeout);

  size_t size() const { return allocs_.size(); }
  std::vector<AllocRecord> records() const;

 private:
  struct Tracked {
    AllocRecord record;
    std::vector<bool> exited;
    std::optional<AllocState> outcome;
    std::optional<int> first_code;
    int failing_code = 0;
    bool any_lost = false;
    std::optional<Clock::time_point> deadline;
    std::optional<Clock::time_point> kill_at;
    bool killed = false;
    std::optional<Clock::time_point> empty_by;  // when the SIGKILLed leftovers must be gone by
    bool held = false;
    std::vector<bool> added;  // per rank: came through add_process()
  };

  void track(AllocRecord record);
  void reap(Tracked& t, std::vector<SupervisorEvent>& events);
  void rank_exited(Tracked& t, size_t i, int code, int sig, bool lost, std::vector<SupervisorEvent>& events);
  void teardown(Tracked& t, AllocState outcome);
  bool step(Tracked& t, std::vector<SupervisorEvent>& events, GroupLiveness& groups);  // true when finished

  SupervisorOptions options_;
  std::map<std::string, Tracked> allocs_;
  std::vector<SupervisorEvent> pending_;  // RankStarted of add()
  std::map<pid_t, int> reaped_;           // wait statuses collected by reap_all_children, for this poll
  GroupLiveness groups_;                  // for poll() without a shared one
  // Cgroups of finished allocations whose last (killed) members had not exited yet: retried each poll.
  std::vector<std::vector<std::string>> cgroups_to_remove_;
};

}  // namespace railyard::agent
