// The job lifecycle (issue 29): every job by id, node health, and what a scheduling pass needs, with every
// transition a job goes through: submit, dependencies, arrays, hold/release/cancel, a pass's plan, launch,
// end or requeue, node loss. A transition is computed as Changes *without* touching memory and applied
// whole with apply(). Both shells drive this one class: the daemon commits the changes to its store before
// it applies them, so memory never holds what the disk does not; the simulator applies them at once on its
// virtual clock.
//
//   request / plan / report ──*_changes()──► Changes ──(daemon: store.commit())──► apply() ──► memory
//
// Pure: no I/O, clock or threads; `now` is always an argument. Not thread safe: one owner (the daemon's
// event loop, or one simulation). One exception, for the pass that
// runs on a worker thread: a job's `spec` is written once, when the job is inserted, and never again
// (apply() copies only the mutable fields of an update, and jobs are never erased but by load()), and map
// nodes do not move, so a Snapshot's spec pointers may be read on another thread while the loop applies
// batches, until the next load().
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "jobs/state.hpp"
#include "scheduler/model/plan.hpp"
#include "common/result.hpp"
#include "scheduler/lifecycle/occupancy.hpp"
#include "scheduler/lifecycle/records.hpp"
#include "scheduler/queue/fairshare.hpp"
#include "topology/cluster.hpp"

namespace railyard::lifecycle {

using jobs::JobId;

// How far an array (a job whose spec has `array`) has come. Its tasks are jobs of their own, created a
// window at a time (JobTable::array_changes), in the array's order; what is derived here is rebuilt from
// the tasks themselves by load().
struct ArrayProgress {
  int64_t total = 0;                  // tasks in the array
  int64_t active = 0;                 // created tasks not ended (PENDING, HELD, STARTING, RUNNING)
  int64_t pending = 0;                // of those, PENDING
  int64_t completed = 0, failed = 0;  // created tasks that ended COMPLETED / in another end state
  std::optional<int> max_exit;        // the highest exit code of an ended task (the array's own, as sbatch's)
  std::vector<JobId> tasks;           // created tasks, in the array's order
  int64_t created() const { return static_cast<int64_t>(tasks.size()); }
};

// Unended tasks an array keeps created at once unless its "%M" says fewer: enough to fill the cluster with
// them, at least kMinArrayWindow, at most kMaxArrayWindow. Of those, PENDING ones are created only as far
// as the GPUs without a holder could start them now, at least kMinArrayWindow (no such bound for MIG tasks,
// nor for a high-QoS array, which may preempt): a task not yet created could not have started, and a
// million-task array behind a full cluster costs a pass 64 new records, not a window of them.
inline constexpr int64_t kMinArrayWindow = 64;
inline constexpr int64_t kMaxArrayWindow = 10'000;

class JobTable {
 public:
  explicit JobTable(const topology::Cluster& cluster);

  // Replaces everything with what the store holds. Node records for unknown names are ignored.
  void load(State state);
  void apply(const Changes& batch);
  // Why a waiting job waits, as a pass found it (see plan_changes()); ignored for a job no longer waiting.
  struct PendingNote {
    JobId job = 0;
    std::string reason;
    std::optional<int64_t> estimated_start;
  };
  void apply(const std::vector<PendingNote>& notes);

  const topology::Cluster& cluster() const { return cluster_; }
  const JobRecord* find(JobId id) const;
  const std::map<JobId, JobRecord>& jobs() const { return jobs_; }
  JobId next_id() const { return jobs_.empty() ? 1 : jobs_.rbegin()->first + 1; }
  sched::NodeHealth health(topology::NodeId n) const { return health_[static_cast<size_t>(n)]; }
  // What a STARTING job's launch is doing ("pulling image ..."), as its agents report it: in memory only,
  // and shown as the job's reason while it is STARTING (starting_note() is "" otherwise).
  void note_starting(JobId id, std::string note);
  const std::string& starting_note(const JobRecord& r) const;
  // Whether node n's agent runs image jobs, as its last register said (nodes no agent registered yet: no).
  // In memory only: an agent says it again at every register.
  void set_containers(topology::NodeId n, bool runs_images);
  bool containers(topology::NodeId n) const { return containers_[static_cast<size_t>(n)] != 0; }
  const std::string& health_reason(topology::NodeId n) const {
    return health_reason_[static_cast<size_t>(n)];
  }
  // Owner job per GPU (0 = free), from STARTING/RUNNING jobs.
  std::vector<JobId> gpu_owners() const;
  size_t active_count() const { return waiting_.size() + parked_.size() + holding_.size(); }

  // GPUs of an ended (or requeued) allocation whose processes may still run: kept out of placements until
  // every node confirmed the kill or went away. Persisted: a hold enters with the batch that ends its job
  // (Changes::holds, added by the agent hub's pre-commit hook) and leaves with Changes::released;
  // load() restores them. hold_gpus() holds in memory only (a fallback; see AgentHub::end_track).
  void hold_gpus(GpuHold hold);
  void release_gpus(const std::string& alloc);  // memory only
  bool holds(const std::string& alloc) const { return draining_.count(alloc) > 0; }
  const std::map<std::string, GpuHold>& gpu_holds() const { return draining_; }

  // Every run of every job, by (job, attempt); the live ones have no end.
  const std::map<std::pair<JobId, int>, RunRecord>& runs() const { return runs_; }
  // The runs a batch starts or ends, judged against the table before it: an update that places a job
  // starts run (job, attempt); one that takes a STARTING/RUNNING job out of that state or attempt ends
  // its run at the update's end time (or `now`). Call before committing `batch`, append to batch.runs.
  std::vector<RunRecord> run_changes(const Changes& batch, int64_t now) const;

  // GPUs of removed nodes: not capacity.
  int removed_gpus() const;

  // Fair-share usage (sched::Snapshot::user_usage, project_usage): the GPUs (whole and MIG slices) of every
  // run by user and by project, each second of use decayed by half per `half_life_s` since. Kept from
  // track_usage() on, rebuilt from the runs held (so a restart, which loads every run, loses nothing); off
  // by default (the simulator integrates usage itself).
  void track_usage(double half_life_s);
  double usage_half_life_s() const { return usage_ ? usage_->half_life_s() : 0; }
  // The usage as of `now` (not before the last run ended): ended runs', and running jobs' so far. Empty
  // maps when usage is not tracked.
  struct Usage {
    std::unordered_map<std::string, double> users, projects;
  };
  Usage usage_at(int64_t now) const;
  // GPUs (whole and MIG slices) held by STARTING/RUNNING jobs, and those of ended allocations still draining
  // (gpu_holds()), by user and by project: what quotas bound, as the passes count it.
  struct InUse {
    std::unordered_map<std::string, int> users, projects;
  };
  InUse gpus_in_use() const;
  // Quotas in force (QuotaRecord), by kind and name; the pass input holds their bounds and shares.
  using QuotaKey = std::pair<QuotaRecord::Kind, std::string>;
  const std::map<QuotaKey, QuotaRecord>& quotas() const { return quotas_; }
  const QuotaRecord* quota(QuotaRecord::Kind kind, const std::string& name) const;

  // The pass input, a copy for another thread (the daemon's pass); borrows specs held here (valid until
  // the next load(); see above). O(jobs not finished and not parked): pending and held jobs, and running
  // ones, in no particular order (the core orders them); with the quotas, and the usage when tracked.
  sched::Snapshot snapshot(int64_t now) const;
  // The same, kept up to date by every change instead of copied (the simulator's pass input, valid
  // until the next change): a running job keeps its `gpus` buffer while it holds them, so sched::Scheduler
  // carries it from pass to pass by reference. The caller may set the config and usage fields; `pending`,
  // `running` and the quotas are the table's. Jobs are in no particular order.
  sched::Snapshot& pass_input(int64_t now);
  // The waiting jobs the next pass will see (pass_input()'s pending), in no particular order.
  const std::vector<sched::PendingJob>& pass_pending() const { return live_.pending; }
  // Of those: the fewest GPUs (JobSpec::gpus) one asks for (INT_MAX: none waits), and whether a high-QoS
  // one waits. O(1).
  int min_pending_gpus() const { return pending_by_gpus_.empty() ? INT_MAX : pending_by_gpus_.begin()->first; }
  bool high_pending() const { return pending_high_ > 0; }

  // Parking: a waiting job that a pass found held, or waiting on a dependency, would only be told the same
  // again by every later pass until the job itself or a job it names changes, for that verdict depends on
  // nothing else (sched::Pass::gates_open). park() leaves such jobs of an applied pass (`pending`, the
  // plan's; `explain` as the pass had it) out of the next snapshots, each only if its gate still holds now
  // as the pass reported it and its reason says so (the plan is older than the table). A job is taken back
  // in (unparked) when its own record changes (hold, release, cancel: any update), when the job its first
  // unmet dependency names ends (a pass looks no further), or, when that names a task, when a task of that
  // array ends or the array does; by unpark_all() and load(). A deep queue of held and dependent jobs then
  // costs the passes nothing.
  void park(const std::vector<sched::PendingInfo>& pending, bool explain);
  void unpark_all();
  size_t parked_count() const { return parked_.size(); }
  // What applying `plan` at `now` changes; only jobs whose persisted fields change are included. The plan
  // may be older than the table (computed on another thread): a start is kept only if its job is still
  // PENDING, each of its nodes is still up and each of its GPUs (or MIG slots) is still free or held by a
  // job it preempts that still holds it; the others are dropped and counted in `stale`, and their jobs
  // stay PENDING with their old reason for the next pass. Reasons and rejections are written only for
  // jobs still PENDING or HELD. A waiting job's new reason or estimated start is derived state, recomputed
  // by every pass (the first one right after a restart): it goes to `notes`, applied in memory only, so a
  // pass over a long queue is not one UPDATE per job whose reason changed.
  struct PlanChanges {
    Changes batch;
    std::vector<PendingNote> notes;
    size_t stale = 0;
  };
  PlanChanges plan_changes(const sched::Plan& plan, int64_t now) const;
  // The reason of a job that no pass has reached yet (Plan::unexamined, a pass cut by its time budget).
  static constexpr std::string_view kNotReached =
      "queued: not reached yet (passes stop at their time budget, --pass-budget-ms, before this job)";
  // An array's progress (null for a job that is not an array), and whether any array is still open.
  const ArrayProgress* array(JobId id) const;
  bool has_open_arrays() const { return !open_arrays_.empty(); }
  // How many unended tasks array `spec` keeps created (see kMinArrayWindow).
  int64_t array_window(const jobs::JobSpec& spec) const;
  // What open arrays need at `now`: a PENDING array's next tasks as new jobs, up to its window of unended
  // tasks (and of pending ones: see kMinArrayWindow), with ids from `next_id` on (advanced past them); an
  // array whose tasks were all created and have all ended ends itself: COMPLETED when every task completed,
  // else FAILED. No task is created while the array's afterok jobs have not all completed (its reason says
  // which it waits for); once one of them cannot complete, the array fails when none of its tasks is left
  // unended. An array is never placed itself (snapshot() leaves it out); a HELD one creates no tasks.
  Changes array_changes(int64_t now, JobId& next_id) const;

  // The job after `event` (cancel, hold, release), or kConflict / kNotFound. On an array the event also
  // applies to its created tasks where it can: cancel ends the unended ones, hold holds the pending ones,
  // release releases the held ones.
  Result<Changes> event_changes(JobId id, jobs::JobEvent event, const std::string& actor, int64_t now) const;

  // What the nodes report about a placed job (the daemon hears it from agents, the simulator from its
  // clock). Each appends to `b` and leaves a job that `b` already updates as it is there.
  // A STARTING job whose processes all started: RUNNING (`what` is its event, e.g. "running as 7.1").
  static void running_changes(Changes& b, const JobRecord& r, const std::string& actor, const std::string& what,
                              int64_t now);
  // A live (STARTING/RUNNING) job ends: `end` (COMPLETED, FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY) with
  // `reason` (none kept for COMPLETED); or, when `may_requeue` and the job asked for it (spec.requeue), it
  // goes back to PENDING as a fresh record of its next attempt, "requeued after END: reason".
  static void end_changes(Changes& b, const JobRecord& r, jobs::JobState end, std::optional<int> exit_code,
                          const std::string& reason, const std::string& actor, bool may_requeue, int64_t now);
  // Nodes lost (no heartbeat, ...): DOWN with `reason`, and every live job on one of them ends NODE_FAIL
  // (requeued where it asked for that).
  Changes nodes_down_changes(const std::vector<std::string>& names, const std::string& reason,
                             int64_t now) const;

 private:
  sched::DependencyState dependency_state(const jobs::Dependency& d) const;
  // Whether array `parent` may create tasks: its dependencies (JobSpec::any_dependency) all met. Else the
  // first unmet one (one that can never be met, if any), and whether it can never be met.
  struct Unmet {
    jobs::Dependency dep;
    bool never = false;
  };
  std::optional<Unmet> unmet_dependency(const jobs::JobSpec& parent) const;
  // A new task's aftercorr:B entries become afterok on the task of array B with the task's own index
  // (none where B has no such index).
  void corresponding_tasks(jobs::JobSpec& task) const;

  const topology::Cluster& cluster_;
  std::map<JobId, JobRecord> jobs_;
  // Jobs not in a terminal state, pointing into jobs_: waiting (PENDING, HELD) and in the passes, waiting
  // and parked (see park()), and holding GPUs (STARTING, RUNNING).
  std::map<JobId, const JobRecord*> waiting_, parked_, holding_;
  // Parked jobs by the job (or array) their first unmet dependency names; entries of jobs since unparked
  // are dropped when their target ends (unparking them again is harmless).
  std::map<JobId, std::vector<JobId>> parked_on_;
  void unpark_dependents(JobId target);
  // The pass input (pass_input()): waiting_ jobs in live_.pending and holding_ jobs in live_.running, at
  // the slots kept here. Kept by these three, called wherever waiting_ or holding_ changes.
  void enter_pass(const JobRecord& r);
  void leave_pass(JobId id);
  void add_dependencies(sched::Snapshot& s) const;
  // The pending set's journal (sched::Snapshot::pending_changes): ids that entered or left live_.pending
  // since the last snapshot or pass input, which takes it. A source id per table and load(), so a
  // Scheduler fed by another table, or by this one before a load(), rebuilds its queue.
  std::shared_ptr<const sched::PendingChanges> take_pending_changes() const;
  mutable std::vector<JobId> journal_;
  mutable uint64_t journal_source_ = 0, journal_generation_ = 0;
  int64_t pending_with_dependencies_ = 0;  // jobs in live_.pending with any dependency
  std::map<int, int64_t> pending_by_gpus_;  // jobs in live_.pending by JobSpec::gpus
  int64_t pending_high_ = 0;                // jobs in live_.pending of QoS high
  void add_draining(sched::Snapshot& s) const;
  Occupancy occupancy_;  // who holds each GPU: the re-check of a plan's starts (plan_changes())
  sched::Snapshot live_;
  std::unordered_map<JobId, uint32_t> pending_slot_, running_slot_;
  sched::Snapshot with_draining_;  // pass_input() while allocations drain
  std::vector<sched::NodeHealth> health_;
  std::vector<std::string> health_reason_;
  std::vector<char> containers_;  // per node: Snapshot::containers
  std::unordered_map<JobId, std::pair<int, std::string>> starting_notes_;  // (attempt, note)
  std::map<std::string, GpuHold> draining_;  // by allocation id
  std::map<std::pair<JobId, int>, RunRecord> runs_;
  std::map<QuotaKey, QuotaRecord> quotas_;
  // Ended runs' usage (track_usage()), each charged once, when its end is applied.
  std::optional<sched::FairShareLedger> usage_;
  void charge_ended(const std::vector<const RunRecord*>& ended);
  // Running jobs' use so far, per user and per project, in closed form: the sum over their jobs of
  // FairShareLedger::decayed_use(g, start, now) is H/ln2 · (Σg − 2^(−(now − origin)/H) · Σ g·2^((start −
  // origin)/H)), so usage_at() costs O(parties), not O(running jobs). Kept while usage is tracked; the origin
  // moves (and the sums are rebuilt) when a start is 32 half-lives from it.
  struct RunningUse {
    double gpus = 0, scaled = 0;
  };
  std::unordered_map<std::string, RunningUse> running_users_, running_projects_;
  int64_t use_origin_ = 0;
  void count_running(const sched::RunningJob& r, int sign);
  void rebase_running_use(int64_t origin);
  std::map<JobId, ArrayProgress> arrays_;
  std::set<JobId> open_arrays_;  // arrays not ended
};

// "job:<id>"
std::string job_subject(JobId id);

}  // namespace railyard::lifecycle
