// The job lifecycle's records: what JobTable holds and the changes it computes (scheduler/lifecycle). The
// daemon persists them (store::WriteBatch carries a Changes, store::StoredState a State); the simulator
// keeps them in memory only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/spec.hpp"
#include "jobs/state.hpp"
#include "scheduler/model/snapshot.hpp"

namespace railyard::lifecycle {

using jobs::JobId;

// One job as persisted and as the API shows it.
struct JobRecord {
  JobId id = 0;
  jobs::JobSpec spec;
  jobs::JobState state = jobs::JobState::kPending;
  int64_t submit_time = 0;
  std::optional<int64_t> start_time, end_time;
  std::optional<int> exit_code;
  std::string reason;                      // why pending / why failed; "" when none
  std::vector<topology::GpuId> gpus;       // whole GPUs held (or last held)
  std::vector<sched::MigSlice> slices;     // MIG slices held
  std::vector<std::string> nodes;          // node names of the allocation
  int leaves_spanned = 0, min_leaves = 0;  // 0 until placed
  std::optional<int64_t> estimated_start;  // set while the job has a reservation
  std::optional<double> time_to_train_s;   // null until an agent reports run_stop
  int attempt = 0;                         // placements so far; the allocation id is "<id>.<attempt>"
  // When a pass first made this pending job wait for a compact placement (sched::PendingInfo::compact_since);
  // cleared when it starts, so a requeued job waits afresh.
  std::optional<int64_t> compact_since;
  // Who placed the job's hold and whether with the admin role (only an admin releases an admin's hold);
  // "" and false while the job is not held. Set by the daemon's Service::act.
  std::string held_by;
  bool held_by_admin = false;
};

struct NodeRecord {
  std::string name;
  sched::NodeHealth health = sched::NodeHealth::kUp;
  std::string reason;
};

// Audit log entry: subject is "job:<id>" or "node:<name>". `time_ms` is the same instant in milliseconds,
// filled by the daemon when it commits the event (CommitPipeline::stamp_events); 0 until then, and for rows
// written before schema 4 the store reads time * 1000.
struct EventRecord {
  EventRecord() = default;
  EventRecord(std::string subject, int64_t time, std::string actor, std::string what, int64_t time_ms = 0)
      : subject(std::move(subject)),
        time(time),
        actor(std::move(actor)),
        what(std::move(what)),
        time_ms(time_ms) {}
  std::string subject;
  int64_t time = 0;  // seconds
  std::string actor;
  std::string what;
  int64_t time_ms = 0;
};

// GPUs of an ended (or requeued) allocation whose processes may still run on `nodes`: kept out of
// placements until each of those nodes confirmed the kill or went away (see daemon/agents.hpp).
struct GpuHold {
  std::string alloc;  // "<job>.<attempt>"
  JobId job = 0;
  std::vector<topology::GpuId> gpus;  // GPUs (whole, or holding the MIG slices) of the allocation
  std::vector<std::string> nodes;     // nodes whose kill is not confirmed yet
};

// One placement of a job (a requeued job has several): attempt `attempt` from `start` to `end`.
struct RunRecord {
  JobId job = 0;
  int attempt = 0;
  std::vector<std::string> nodes;
  std::vector<topology::GpuId> gpus;    // whole GPUs
  std::vector<sched::MigSlice> slices;  // MIG slices
  int64_t start = 0;
  std::optional<int64_t> end;  // null while the run lasts
  // "" while it lasts; then the state it ended in (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL), or
  // PREEMPTED, or REQUEUED (requeued after a failure, the run's own failure not known).
  std::string outcome;
  int gpu_count() const { return static_cast<int>(gpus.size() + slices.size()); }
};

// What an admin sets on a user or a project, as Slurm's associations hold it: a bound on the GPUs (whole GPUs
// and MIG slices) its jobs hold at once (sched::Snapshot::user_quota, project_quota), past which a job waits,
// saying so; and its fair-share shares (sched::Snapshot::user_shares, project_shares).
struct QuotaRecord {
  enum class Kind { kUser, kProject };
  Kind kind = Kind::kUser;
  std::string name;
  std::optional<int64_t> gpus;  // nullopt: no bound
  double shares = 1;
  bool lifted = false;  // in a Changes: the record goes (no bound, 1 share)
};
std::string_view to_string(QuotaRecord::Kind k);  // "user", "project"

// Everything a JobTable is built from (JobTable::load).
struct State {
  std::vector<JobRecord> jobs;  // by id
  std::vector<NodeRecord> nodes;
  std::vector<GpuHold> holds;
  std::vector<RunRecord> runs;  // by job, attempt
  std::vector<QuotaRecord> quotas;
};

// What one transition changes, applied whole (JobTable::apply) after the daemon committed it. Inserts carry
// new jobs (spec included); updates carry every field but the spec, user and submit time. Holds, runs and
// quotas are whole records (insert or replace; a lifted quota is dropped); `released` drops holds by
// allocation id.
struct Changes {
  std::vector<JobRecord> inserts;
  std::vector<JobRecord> updates;
  std::vector<NodeRecord> nodes;
  std::vector<EventRecord> events;
  std::vector<GpuHold> holds;
  std::vector<std::string> released;
  std::vector<RunRecord> runs;
  std::vector<QuotaRecord> quotas;
  bool empty() const {
    return inserts.empty() && updates.empty() && nodes.empty() && events.empty() && holds.empty() &&
           released.empty() && runs.empty() && quotas.empty();
  }
};

}  // namespace railyard::lifecycle
