// The scheduling core's output. A shell applies it: the daemon persists it and tells agents; the simulator
// advances its virtual clock. The plan is computed on a snapshot; the applier re-checks before committing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scheduler/model/snapshot.hpp"
#include "topology/cluster.hpp"

namespace railyard::sched {

// Why a job did not start, as constants the CLI and the dashboard show next to the message.
enum class PendingReason {
  kNone,
  kHeld,            // held by its owner or an admin
  kDependency,      // waits for another job (afterok)
  kQuotaUser,       // user's GPU quota reached
  kQuotaProject,    // project's GPU quota reached
  kResources,       // not enough free GPUs of the right kind / shape now
  kReservation,     // would fit, but would delay a higher-priority job's reservation
  kPriority,        // blocked behind higher-priority jobs (no backfill)
  kPreempting,      // waiting for preempted jobs to leave (start follows)
  kCompact,         // fits now only on more leaf groups than its minimum: waits for a compact placement
};
std::string_view to_string(PendingReason r);

struct Placement {
  JobId job = 0;
  std::vector<GpuId> gpus;                // sorted
  std::vector<MigSlice> slices;           // MIG jobs
  std::vector<NodeId> nodes;              // sorted, distinct
  int leaves_spanned = 0;
  int min_leaves = 0;                     // fewest leaf groups that could hold these nodes on an empty cluster
  topology::Level span = topology::Level::kCluster;
  double allreduce_s = 0;                 // cost-model estimate for PolicyConfig::allreduce_bytes
  std::vector<JobId> preempts;            // scavenger jobs that must leave first (empty: start now)
};

struct Reservation {
  JobId job = 0;
  int64_t start_time = 0;                 // earliest time it fits, from running jobs' time limits
  std::vector<GpuId> gpus;                // the GPUs held for it
};

struct PendingInfo {
  JobId job = 0;
  PendingReason reason = PendingReason::kNone;
  std::string message;                    // "needs 32 whole nodes in one leaf group; 19 free"
  std::optional<int64_t> estimated_start; // set when the job has a reservation
  double priority = 0;
  // kCompact: when the wait began (PendingJob::compact_wait_since, or this pass's time for a new wait).
  std::optional<int64_t> compact_since;
};

// A job that can never run as asked (e.g. 9 GPUs per node on 8-GPU nodes, a failed dependency).
struct Rejection {
  JobId job = 0;
  std::string message;
};

struct Plan {
  std::vector<Placement> starts;          // in priority order
  std::vector<Reservation> reservations;
  std::vector<PendingInfo> pending;       // every pending job that did not start, in priority order
  std::vector<Rejection> rejected;
  // Pending jobs the pass did not reach (Snapshot::out_of_time), in priority order: no decision was taken
  // for them, so they keep their last reason and estimated start.
  std::vector<JobId> unexamined;
  // The earliest time a pass may start a job with nothing else changed (the end of a compact wait): a
  // shell that runs passes only on events schedules one for then. Unset: no such time.
  std::optional<int64_t> wake_at;
};

}  // namespace railyard::sched
