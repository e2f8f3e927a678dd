// One pass over a prepared usage, shared by sched::schedule() and sched::Scheduler (core only).
#pragma once

#include <span>

#include "scheduler/model/plan.hpp"
#include "scheduler/core/reservation.hpp"
#include "scheduler/model/snapshot.hpp"
#include "scheduler/model/usage.hpp"

namespace railyard::sched {

class PendingQueue;

// `usage` is built over `classes` of s.cluster with s.health: empty (fresh or reset), or, with
// `holds_running`, exactly what taking every running job (job i with owner i) would make of an empty one;
// the pass leaves its starts (owner running.size() + k) and reservations in it. `dues`: the running jobs'
// releases sorted by end (Releases::dues_of), or empty to build them on demand. With `queue` (brought to `s`
// already) the pass walks it and examines only the jobs whose outcome can change (cycle.cpp, Pass::run).
Plan run_pass(const Snapshot& s, const NodeClasses& classes, ClusterUsage& usage,
              std::span<const Releases::Entry> dues = {}, bool holds_running = false,
              PendingQueue* queue = nullptr);

}  // namespace railyard::sched
