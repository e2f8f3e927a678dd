// One scheduling pass: Snapshot in, Plan out. Pure and deterministic: the same snapshot gives the same plan.
//
//   order pending by multifactor priority (queue/priority.hpp)
//   for each job, highest first:
//     held / dependency / quota checks          -> PendingInfo with a reason, or a Rejection
//     place now on free GPUs that no earlier reservation needs before this job would end
//                                              -> Placement (start)
//     else high QoS: try preempting scavenger work -> Placement with `preempts`
//     else, while reservations < depth: earliest time it fits as running jobs end -> Reservation
//     else                                      -> PendingInfo (resources / reservation / priority)
// Backfill is the rule in the second step: a lower job may take GPUs a reservation needs only if it ends
// (by its time limit) before that reservation starts; so no start in a plan delays any reservation.
#pragma once

#include <memory>

#include "scheduler/core/plan.hpp"
#include "scheduler/core/snapshot.hpp"

namespace railyard::sched {

Plan schedule(const Snapshot& snapshot);

// The same pass for a shell that schedules one cluster again and again (the simulator): it keeps what
// depends only on the cluster and node health (node classes, the empty usage) and reuses the usage
// buffers, so a pass costs O(nodes + GPUs held) instead of O(nodes + all GPUs) plus set-up.
// schedule(s) returns exactly what sched::schedule(s) returns, for any snapshot (another cluster or
// health rebuilds the cache). When the running list is the last snapshot's followed by the last plan's
// starts, the last pass's usage is reused instead of rebuilt. Contract for that check: a job that stays
// in `running` from one call to the next keeps its `gpus` and `slices` vectors unmodified (moving the
// RunningJob is fine: the check compares ids and the vectors' buffers). Not thread-safe.
class Scheduler {
 public:
  Scheduler();
  ~Scheduler();
  Scheduler(Scheduler&&) noexcept;
  Scheduler& operator=(Scheduler&&) noexcept;
  Plan schedule(const Snapshot& snapshot);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace railyard::sched
