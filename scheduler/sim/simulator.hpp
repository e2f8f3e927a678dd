// Discrete-event simulator: replays a trace through the daemon's job lifecycle and scheduling core
// (VirtualCluster: lifecycle::JobTable and sched::Scheduler) on a virtual clock. Event loop, ordering rules
// and the slowdown model: scheduler/sim/README.md.
//
// Contract: deterministic (same cluster, trace, policy and options give the same JobResults); one run owns
// all its state, so runs of different policies share nothing but the immutable Cluster and may run on
// different threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "scheduler/model/snapshot.hpp"
#include "scheduler/sim/comm_model.hpp"
#include "scheduler/sim/trace.hpp"
#include "topology/cluster.hpp"

namespace railyard::sim {

struct PolicySpec {
  std::string name;
  sched::PolicyConfig config;
};
// "railyard" (defaults: topology placement, backfill, compact wait), "first-fit" (topology-oblivious,
// backfill), "fifo" (topology placement, no backfill), "slurm-tree" (topology placement and backfill with no
// compact wait: Slurm's topology/tree without --switches). The simulator fast path (explain = false) is set
// on all of them.
Result<PolicySpec> policy_by_name(std::string_view name);
std::vector<std::string> policy_names();

struct SimOptions {
  int64_t pass_interval_s =
      0;  // at most one scheduling pass per this many virtual seconds; 0 = every event time
  CommParams comm;
  double fairshare_half_life_s = 7 * 24 * 3600.0;
  bool full_passes = false;  // every pass examines every waiting job (VirtualCluster)
};

// What happened to one job: a trace row, or one task of a row's array. Times are virtual seconds; -1 = never.
struct JobResult {
  sched::JobId id = 0;  // the lifecycle's id: 1 + index in the (sorted) trace while no row is an array
  std::string name;     // the row's job_id; a task's is job_id_INDEX
  int64_t submit = 0;
  int64_t first_start = -1;
  int64_t end = -1;
  int gpus = 0;
  int nodes = 0;  // of the last placement
  int leaves_spanned = 0;
  int min_leaves = 0;
  double comm_slowdown = 1.0;  // stretch of the last placement
  double duration_s = 0;       // the trace's duration (ideal run time)
  int64_t run_s = 0;           // virtual seconds spent running, all segments
  int preemptions = 0;
  jobs::Qos qos = jobs::Qos::kNormal;
  bool rejected = false;  // the core said it can never run
};

struct SimResult {
  std::string policy;
  std::vector<JobResult> jobs;  // by id (an array itself has none; tasks never created have none)
  int cluster_gpus = 0;
  double busy_gpu_s = 0;        // integral of GPUs held over time
  double free_gpu_s = 0;        // integral of free GPUs over [first submit, last end]
  double fragmented_gpu_s = 0;  // part of free_gpu_s while a waiting job needed <= the free GPUs
  int64_t first_submit = 0;
  int64_t last_end = 0;
  int64_t preemptions = 0;
  int64_t rejected = 0;
  int64_t unfinished = 0;      // still pending when no event was left
  int64_t plan_conflicts = 0;  // starts the lifecycle's re-check dropped (a core bug if ever > 0)
  int64_t passes = 0;
  double wall_s = 0;
};

// Called now and then with jobs finished (or rejected) so far and the total.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

SimResult simulate(const topology::Cluster& cluster, const std::vector<TraceJob>& trace,
                   const PolicySpec& policy, const SimOptions& options, const ProgressFn& progress = {});

}  // namespace railyard::sim
