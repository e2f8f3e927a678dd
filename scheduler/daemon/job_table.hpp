// The daemon's in-memory mirror of the store: every job by id, node health, and what a scheduling pass
// needs. Changes are computed as WriteBatches *without* touching memory; the service commits a batch and
// only then apply()s it, so memory never holds what the disk does not.
//
//   request / plan ──*_changes()──► WriteBatch ──store.commit()──► apply() ──► memory
//
// Not thread safe: owned by the service on the daemon's single event loop.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "jobs/state.hpp"
#include "scheduler/core/plan.hpp"
#include "scheduler/store/state_store.hpp"
#include "topology/cluster.hpp"

namespace railyard::daemon {

using jobs::JobId;
using store::JobRecord;
using store::WriteBatch;

class JobTable {
 public:
  explicit JobTable(const topology::Cluster& cluster);

  // Replaces everything with what the store holds. Node records for unknown names are ignored.
  void load(store::StoredState state);
  void apply(const WriteBatch& batch);

  const topology::Cluster& cluster() const { return cluster_; }
  const JobRecord* find(JobId id) const;
  const std::map<JobId, JobRecord>& jobs() const { return jobs_; }
  JobId next_id() const { return jobs_.empty() ? 1 : jobs_.rbegin()->first + 1; }
  sched::NodeHealth health(topology::NodeId n) const { return health_[static_cast<size_t>(n)]; }
  const std::string& health_reason(topology::NodeId n) const {
    return health_reason_[static_cast<size_t>(n)];
  }
  // Owner job per GPU (0 = free), from STARTING/RUNNING jobs.
  std::vector<JobId> gpu_owners() const;
  size_t active_count() const { return active_.size(); }

  // GPUs of an ended (or requeued) allocation whose processes may still run: kept out of placements until
  // every node confirmed the kill or went down. In memory only: after a restart, fencing on register kills
  // such processes instead. Keyed by allocation id.
  void hold_gpus(const std::string& alloc, JobId job, std::vector<topology::GpuId> gpus);
  void release_gpus(const std::string& alloc) { draining_.erase(alloc); }
  bool holds(const std::string& alloc) const { return draining_.count(alloc) > 0; }

  // The pass input; borrows specs held here (valid until the next apply()).
  sched::Snapshot snapshot(int64_t now) const;
  // What applying `plan` at `now` changes; only jobs whose persisted fields change are included.
  WriteBatch plan_changes(const sched::Plan& plan, int64_t now) const;
  // The job after `event` (cancel, hold, release), or kConflict / kNotFound.
  Result<WriteBatch> event_changes(JobId id, jobs::JobEvent event, const std::string& actor,
                                   int64_t now) const;

 private:
  sched::DependencyState dependency_state(JobId id) const;

  const topology::Cluster& cluster_;
  std::map<JobId, JobRecord> jobs_;
  std::set<JobId> active_;  // not in a terminal state
  std::vector<sched::NodeHealth> health_;
  std::vector<std::string> health_reason_;
  struct Draining {
    JobId job = 0;
    std::vector<topology::GpuId> gpus;
  };
  std::map<std::string, Draining> draining_;
};

// "job:<id>"
std::string job_subject(JobId id);

}  // namespace railyard::daemon
