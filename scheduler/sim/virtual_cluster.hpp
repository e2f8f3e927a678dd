// The simulator's shell around the job lifecycle: the same lifecycle::JobTable the daemon drives, with
// every transition applied at once on a virtual clock instead of committed to a store and reported by
// agents. A placed job is RUNNING in the same step (nothing to launch) and ends when its driver calls
// finish(). A pass takes the daemon's steps through the same lifecycle::PassDriver (array tasks, the pass
// input, schedule(), the plan applied, waiting jobs parked), all at once.
//
// Contract: deterministic; one owner; the cluster outlives it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "jobs/spec.hpp"
#include "scheduler/core/cycle.hpp"
#include "scheduler/lifecycle/job_table.hpp"
#include "scheduler/lifecycle/pass_driver.hpp"
#include "topology/cluster.hpp"

namespace railyard::sim {

using jobs::JobId;

class VirtualCluster {
 public:
  // `full_passes`: every pass examines every waiting job (sched::Scheduler without Snapshot::pending_changes),
  // for comparing with the passes that examine only what can change (the default).
  VirtualCluster(const topology::Cluster& cluster, sched::PolicyConfig policy, bool full_passes = false);

  const lifecycle::JobTable& table() const { return table_; }
  // The id the next submitted job (or array task) gets.
  JobId next_id() const { return next_id_; }

  // A new job (or array) at `now`; its id.
  JobId submit(jobs::JobSpec spec, int64_t now);
  // cancel, hold or release, as `actor`; kNotFound / kConflict as the daemon answers.
  Status act(JobId id, jobs::JobEvent event, int64_t now, const std::string& actor = "sim");
  // A live job ends at `now` (see JobTable::end_changes; requeued when it asked for that and `end` is
  // FAILED or NODE_FAIL). False when `id` is not live.
  bool finish(JobId id, jobs::JobState end, std::optional<int> exit_code, int64_t now);
  // Nodes lost at `now`: DOWN, their live jobs NODE_FAIL or requeued (JobTable::nodes_down_changes).
  void nodes_down(const std::vector<std::string>& names, const std::string& reason, int64_t now) {
    apply(table_.nodes_down_changes(names, reason, now));
  }

  struct PassResult {
    sched::Plan plan;
    std::vector<const sched::Placement*> started;  // into plan.starts: the starts applied
    std::vector<JobId> requeued;                   // preempted by them, back to PENDING
    std::vector<JobId> rejected;                   // now FAILED: can never run
    std::vector<JobId> tasks;                      // array tasks created before the pass
    size_t stale = 0;                              // starts dropped by the re-check (a core bug here)
    bool ran = false;                              // false: nothing was waiting
  };
  // Called by every pass with its input and the plan schedule() returned, before the plan is applied (the
  // property tests compare that plan with a full pass's).
  using PlanObserver = std::function<void(const sched::Snapshot&, const sched::Plan&)>;
  void observe_plans(PlanObserver observer) { observer_ = std::move(observer); }
  // Sets quota record `q` (as the daemon's PUT /quotas does).
  void set_quota(lifecycle::QuotaRecord q);

  // One pass at `now`. `usage` (decayed GPU-seconds per user and project) feeds fair share.
  PassResult pass(int64_t now, const std::unordered_map<std::string, double>* user_usage = nullptr,
                  const std::unordered_map<std::string, double>* project_usage = nullptr);

 private:
  void apply(const lifecycle::Changes& changes) { table_.apply(changes); }
  Status commit(lifecycle::Changes& changes, bool array_tasks);

  lifecycle::JobTable table_;
  sched::PolicyConfig policy_;
  lifecycle::PassDriver driver_;
  PassResult* result_ = nullptr;  // the pass whose plan the driver is committing
  bool full_passes_ = false;
  PlanObserver observer_;
  JobId next_id_ = 1;
};

}  // namespace railyard::sim
