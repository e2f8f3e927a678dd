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
// With Snapshot::out_of_time set, the loop may stop early: Plan::unexamined lists the rest.
#pragma once

#include <memory>

#include "scheduler/model/plan.hpp"
#include "scheduler/model/snapshot.hpp"

namespace railyard::sched {

Plan schedule(const Snapshot& snapshot);

// The same pass for a shell that schedules one cluster again and again (the simulator, the daemon): it
// keeps what depends only on the cluster and node health (node classes, the empty usage), and the last
// pass's usage and release list, which it brings to the next snapshot by difference (jobs that ended give
// their GPUs back, jobs that moved in `running` are relabelled, new ones are taken), so a pass costs
// O(running jobs + what changed) before it places anything, instead of O(nodes + GPUs held).
// schedule(s) returns exactly what sched::schedule(s) returns, for any snapshot (another cluster or
// health, or MIG slices, rebuild). Contract: a running job that stays with the same `gpus` vector (the
// same buffer) from one call to the next kept its GPUs and expected end (moving the RunningJob is fine);
// any other job is compared by value.
// With Snapshot::pending_changes (a JobTable's snapshots) it also keeps the waiting jobs in priority order
// (queue/pending_queue.hpp) and a pass examines only the jobs whose outcome can differ from the last pass's:
// the starts, reservations and rejections are exactly sched::schedule()'s, and Plan::pending lists the
// jobs examined, each with the reason schedule() gives it; the others keep the reason they have.
// Not thread-safe.
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
