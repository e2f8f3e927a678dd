// The job state machine. Diagram and rationale: jobs/README.md ("States").
//
//   PENDING --placed--> STARTING --all_ranks_running--> RUNNING
//   STARTING|RUNNING --exited_ok--> COMPLETED, --exited_fail--> FAILED, --timed_out--> TIMEOUT,
//                    --node_failed--> NODE_FAIL, --preempted--> PREEMPTED,
//                    --out_of_memory--> OUT_OF_MEMORY (the kernel OOM-killed a process in the job's cgroup:
//                                       the job's failure, not the node's; never requeued, it would again)
//   PENDING|HELD|STARTING|RUNNING --cancelled--> CANCELLED
//   FAILED|NODE_FAIL|PREEMPTED|STARTING|RUNNING --requeued--> PENDING
//   PENDING --held--> HELD --released--> PENDING
//
// Pure functions over a fixed table: callers (daemon, simulator) apply events and persist the new state.
// Whether a requeue is *wanted* (spec.requeue, preemption policy) is the caller's decision; this only says
// whether it is *possible*.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "common/result.hpp"
#include "jobs/spec.hpp"

namespace railyard::jobs {

enum class JobEvent {
  kPlaced,           // the scheduler chose GPUs; agents are launching
  kAllRanksRunning,  // every rank reported started
  kExitedOk,         // every rank exited 0
  kExitedFail,       // a rank exited non-zero or failed to launch
  kCancelled,        // a user or admin cancelled
  kTimedOut,         // the time limit passed
  kOutOfMemory,      // a process went past the job's memory limit and the kernel killed it
  kNodeFailed,       // a node of the allocation died or lost contact
  kPreempted,        // the scheduler took the GPUs for higher-priority work
  kRequeued,         // back to the queue (requeue policy, or preemption with requeue)
  kHeld,             // a user or admin held a pending job
  kReleased,         // the hold was lifted
};

std::string_view to_string(JobEvent e);  // "placed", "all_ranks_running", ...
std::optional<JobEvent> parse_event(std::string_view s);

struct StateTransition {
  JobState from;
  JobEvent event;
  JobState to;
};

// Every allowed (from, event) -> to; each (from, event) appears at most once.
std::span<const StateTransition> state_transitions();

// True when some event takes `from` to `to`. A state never transitions to itself.
bool can_transition(JobState from, JobState to);

// The state after `event`; kConflict naming both when the event does not apply to `from`.
Result<JobState> transition(JobState from, JobEvent event);

}  // namespace railyard::jobs
