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

#include "scheduler/core/plan.hpp"
#include "scheduler/core/snapshot.hpp"

namespace railyard::sched {

Plan schedule(const Snapshot& snapshot);

}  // namespace railyard::sched
