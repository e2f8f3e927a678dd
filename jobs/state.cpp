#include "jobs/state.hpp"

#include <array>
#include <string>

namespace railyard::jobs {
namespace {

using S = JobState;
using E = JobEvent;

constexpr std::array<StateTransition, 25> kTransitions = {{
    {S::kPending, E::kPlaced, S::kStarting},
    {S::kPending, E::kHeld, S::kHeld},
    {S::kPending, E::kCancelled, S::kCancelled},
    {S::kHeld, E::kReleased, S::kPending},
    {S::kHeld, E::kCancelled, S::kCancelled},
    {S::kStarting, E::kAllRanksRunning, S::kRunning},
    // Exit events are accepted while STARTING too: a launch failure ends in FAILED without ever running,
    // and a short job can exit before the last agent's "running" report arrives.
    {S::kStarting, E::kExitedOk, S::kCompleted},
    {S::kStarting, E::kExitedFail, S::kFailed},
    {S::kStarting, E::kCancelled, S::kCancelled},
    {S::kStarting, E::kTimedOut, S::kTimeout},
    {S::kStarting, E::kOutOfMemory, S::kOutOfMemory},
    {S::kStarting, E::kNodeFailed, S::kNodeFail},
    {S::kStarting, E::kPreempted, S::kPreempted},
    {S::kStarting, E::kRequeued, S::kPending},
    {S::kRunning, E::kExitedOk, S::kCompleted},
    {S::kRunning, E::kExitedFail, S::kFailed},
    {S::kRunning, E::kCancelled, S::kCancelled},
    {S::kRunning, E::kTimedOut, S::kTimeout},
    {S::kRunning, E::kOutOfMemory, S::kOutOfMemory},
    {S::kRunning, E::kNodeFailed, S::kNodeFail},
    {S::kRunning, E::kPreempted, S::kPreempted},
    {S::kRunning, E::kRequeued, S::kPending},
    {S::kFailed, E::kRequeued, S::kPending},
    {S::kNodeFail, E::kRequeued, S::kPending},
    {S::kPreempted, E::kRequeued, S::kPending},
}};

constexpr std::array<std::pair<JobEvent, std::string_view>, 12> kEventNames = {{
    {E::kPlaced, "placed"},
    {E::kAllRanksRunning, "all_ranks_running"},
    {E::kExitedOk, "exited_ok"},
    {E::kExitedFail, "exited_fail"},
    {E::kCancelled, "cancelled"},
    {E::kTimedOut, "timed_out"},
    {E::kOutOfMemory, "out_of_memory"},
    {E::kNodeFailed, "node_failed"},
    {E::kPreempted, "preempted"},
    {E::kRequeued, "requeued"},
    {E::kHeld, "held"},
    {E::kReleased, "released"},
}};

}  // namespace

std::string_view to_string(JobEvent e) {
  for (const auto& [event, name] : kEventNames)
    if (event == e) return name;
  return "unknown";
}

std::optional<JobEvent> parse_event(std::string_view s) {
  for (const auto& [event, name] : kEventNames)
    if (name == s) return event;
  return std::nullopt;
}

std::span<const StateTransition> state_transitions() { return kTransitions; }

bool can_transition(JobState from, JobState to) {
  for (const StateTransition& t : kTransitions)
    if (t.from == from && t.to == to) return true;
  return false;
}

Result<JobState> transition(JobState from, JobEvent event) {
  for (const StateTransition& t : kTransitions)
    if (t.from == from && t.event == event) return t.to;
  return Error{ErrorCode::kConflict, "event " + std::string(to_string(event)) + " does not apply to a " +
                                         std::string(to_string(from)) + " job"};
}

}  // namespace railyard::jobs
