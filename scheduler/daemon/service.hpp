// The scheduler daemon's behaviour, free of HTTP: the composition of the parts that change the job table,
// each a class with one job, and the one path every change takes (write, apply, tell observers):
//
//   SubmitIntake (submit_intake.hpp): submits checked, given ids, group-committed, answered once applied.
//   PassRunner (pass_runner.hpp): passes requested, paced, scheduled off the loop, their plans applied.
//   NodeAdmin (node_admin.hpp): drain, resume, remove.
//   Tokens (tokens.hpp): bearer tokens, their cache and last use.
//   CommitPipeline (commit_pipeline.hpp): every write, its durability, the delayed sync, checkpoints.
//
// The service itself does the job actions (cancel, hold, release), the audit rows and the changes made by
// others (the agent hub: commit()). Runs on one event loop (the `post` function given at construction); every
// method must be called on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/core/cycle.hpp"
#include "scheduler/daemon/caller.hpp"
#include "scheduler/daemon/commit_pipeline.hpp"
#include "scheduler/daemon/loop.hpp"
#include "scheduler/daemon/node_admin.hpp"
#include "scheduler/daemon/pass_runner.hpp"
#include "scheduler/daemon/submit_intake.hpp"
#include "scheduler/daemon/tokens.hpp"
#include "scheduler/daemon/worker_thread.hpp"
#include "scheduler/lifecycle/job_table.hpp"
#include "scheduler/store/state_store.hpp"

namespace railyard::daemon {

using jobs::JobId;
using lifecycle::ArrayProgress;
using lifecycle::job_subject;
using lifecycle::JobTable;
using store::JobRecord;
using store::WriteBatch;

struct ServiceStats : PassStats {
  int64_t submits_total = 0;
  int64_t submit_commits_total = 0;
  int64_t log_syncs_total = 0;  // syncs of kWritten commits by the delayed sync (not by a synced commit)
  int64_t deferred_batches_total = 0;  // kDeferred batches written (each in a later transaction)
  bool submits_synced = true;          // Service::submit_durability() is kSynced
};

class Service {
 public:
  using Clock = std::function<int64_t()>;  // seconds since the epoch
  using SubmitDone = SubmitIntake::SubmitDone;
  using Executor = daemon::Executor;

  Service(const topology::Cluster& cluster, std::unique_ptr<store::StateStore> store, Loop loop, Clock clock);
  ~Service();  // waits for a pass in flight on the worker thread; its result is dropped
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Where the parts run their work off the loop. Each: call before open(). The worker threads are joined by
  // the destructor; a test's executor must run or drop its work before the service is destroyed.
  // Where schedule() runs (PassRunner).
  void run_passes_on_thread() { passes_.run_on_thread(); }
  void set_pass_executor(Executor executor) { passes_.set_executor(std::move(executor)); }
  // Where the delayed sync's fsync runs (CommitPipeline::sync_on_thread).
  void sync_log_on_thread() { pipeline_.sync_on_thread(); }
  void set_sync_executor(Executor executor) { pipeline_.set_sync_executor(std::move(executor)); }
  // Where submit commits of `min_jobs` jobs or more run: through `store` (a second connection to the same
  // database) on a thread of the service's own or on `executor` (SubmitIntake).
  void commit_submits_on_thread(std::unique_ptr<store::StateStore> store,
                                size_t min_jobs = kSubmitThreadMinJobs);
  void set_submit_committer(std::unique_ptr<store::StateStore> store, Executor executor,
                            size_t min_jobs = kSubmitThreadMinJobs);
  // The log's checkpoints on a thread of the service's own (CommitPipeline::checkpoint_on_thread). Call after
  // commit_submits_on_thread().
  void checkpoint_on_thread() { pipeline_.checkpoint_on_thread(); }
  // How durable a submit is when its caller hears back (railyard-scheduler --submit-durability): kSynced, the
  // default, on disk; or kWritten, in the log, which a killed scheduler keeps and a crash of the machine can
  // lose the last 2 x kLazySyncDelay of (the delayed sync makes them durable). kDeferred is refused. Any
  // time.
  Status set_submit_durability(store::Durability durability) { return intake_.set_durability(durability); }
  store::Durability submit_durability() const { return intake_.durability(); }

  // Loads the store and requests a first pass.
  Status open();
  // The same from a state already loaded from this service's store (an HA standby's warm load).
  Status open(store::StoredState state);

  const JobTable& table() const { return table_; }
  JobTable& table() { return table_; }
  ServiceStats stats() const;
  // The store, to read events and metrics: the deferred batches are written first, so a read sees every
  // applied change.
  store::StateStore& store() { return pipeline_.store(); }
  const Loop& loop() const { return loop_; }
  int64_t now() const { return clock_(); }
  // Milliseconds since the epoch, for event times; by default now() * 1000 (tests' clocks).
  void set_clock_ms(Clock clock_ms) { clock_ms_ = std::move(clock_ms); }
  int64_t now_ms() const { return clock_ms_ ? clock_ms_() : clock_() * 1000; }
  // The monotonic clock that paces passes (kMinPassInterval) and times them; steady_clock by default. Called
  // on the loop and on the pass executor's thread.
  using Monotonic = PassRunner::Monotonic;
  void set_monotonic_clock(Monotonic clock) { passes_.set_monotonic_clock(std::move(clock)); }

  // Writes `batch` (with what the pre-commit hooks add), applies it to the table, tells every observer and
  // requests a pass: the one path for state changes made outside the service (the agent hub). Nothing is
  // applied when the commit fails.
  // `batch.durability` says whether it returns once the batch is on disk or once it is in the log, or
  // (kDeferred) at once, the batch written with the next commit or by the delayed sync: the commits that
  // carry it fail while it cannot be written (a full disk), and it stays queued until one succeeds.
  Status commit(WriteBatch batch);
  // Runs `fn` on the loop once every commit made so far is on disk: now when nothing waits for a sync.
  // Dropped if the service is destroyed first.
  void when_durable(std::function<void()> fn) { pipeline_.when_durable(std::move(fn)); }
  // Called with every batch that may change jobs (actions, passes, commit(); not submits, which only
  // insert PENDING jobs) before it is written, after the service added the runs it starts or ends
  // (JobTable::run_changes): adds what must be durable with the change itself (the agent hub: the GPU
  // holds of the allocations it ends). Must not commit.
  using PreCommit = std::function<void(WriteBatch&)>;
  void add_pre_commit(PreCommit hook) { pre_commit_.push_back(std::move(hook)); }
  // Called after every applied batch (submits, actions, passes, commit()), on the loop; also with the
  // waiting jobs whose reason a pass changed in memory only (JobTable::PendingNote), as updates.
  using Observer = std::function<void(const WriteBatch&)>;
  void add_observer(Observer observer) { observers_.push_back(std::move(observer)); }
  // Requests a scheduling pass (coalesced and paced: PassRunner).
  void request_pass() { passes_.request(); }
  // The policy every pass schedules with (default: sched::PolicyConfig's). Call before open().
  void set_policy(const sched::PolicyConfig& policy) {
    passes_.set_policy(policy);
    table_.unpark_all();  // parked jobs' reasons were written under the old one (`explain`)
  }
  // Who may submit QoS high besides admins (SubmitIntake::set_high_qos_users).
  Status set_high_qos_users(std::string_view list) { return intake_.set_high_qos_users(list); }
  // Submits of a user the cluster cannot run are refused (SubmitIntake::set_user_check).
  void set_user_check(SubmitIntake::UserCheck check) { intake_.set_user_check(std::move(check)); }
  // The longest a pass's schedule() may take (0: no bound; PassRunner::set_pass_budget, which says when).
  void set_pass_budget(std::chrono::milliseconds budget) { passes_.set_pass_budget(budget); }

  // Bearer tokens (Tokens).
  Result<Authenticated> authenticate(const std::string& token) { return tokens_.authenticate(token); }
  Result<std::pair<std::string, store::TokenRecord>> create_token(const std::string& user, store::Role role,
                                                                  std::optional<int64_t> expires,
                                                                  const Caller& who,
                                                                  const store::AuditRecord* audit = nullptr) {
    return tokens_.create(user, role, expires, who, audit);
  }
  Result<std::vector<store::TokenRecord>> tokens(const Caller& who) { return tokens_.list(who); }
  Status revoke_token(const std::string& id, const Caller& who, const store::AuditRecord* audit = nullptr) {
    return tokens_.revoke(id, who, audit);
  }

  // Audit: the mutators below and the token ones take the row of the request that asks (`audit`, its status
  // already the success status) and write it in the transaction of the change they make, or, when they
  // succeed without a change, as a deferred batch: a caller records only the requests that failed
  // (record_audit). nullptr: not an API request.
  // Writes `row` as a deferred batch (with the loop's next transaction or the delayed sync; no fsync of its
  // own).
  void record_audit(store::AuditRecord row);

  // Submits (SubmitIntake::prepare, SubmitIntake::submit).
  Status prepare(jobs::JobSpec& spec, const Caller& who, std::span<const jobs::JobSpec> earlier = {}) const {
    return intake_.prepare(spec, who, earlier);
  }
  void submit(std::vector<jobs::JobSpec> specs, const Caller& who, SubmitDone done,
              const std::string& idempotency_key = "", const store::AuditRecord* audit = nullptr) {
    intake_.submit(std::move(specs), who, std::move(done), idempotency_key, audit);
  }

  // cancel, hold, release: owner or admin; kConflict when the state forbids it.
  Result<JobRecord> act(JobId id, jobs::JobEvent event, const Caller& who,
                        const store::AuditRecord* audit = nullptr);
  // Admin only (NodeAdmin).
  Status set_node_health(const std::string& name, sched::NodeHealth health, std::string reason,
                         const Caller& who, const store::AuditRecord* audit = nullptr) {
    return nodes_.set_health(name, health, std::move(reason), who, audit);
  }
  Status remove_node(const std::string& name, const Caller& who, const store::AuditRecord* audit = nullptr) {
    return nodes_.remove(name, who, audit);
  }
  Result<std::string> issue_node_key(const std::string& name, bool rotate, int64_t grace_s, bool force,
                                     const Caller& who, const store::AuditRecord* audit = nullptr) {
    return nodes_.issue_key(name, rotate, grace_s, force, who, audit);
  }
  // Quotas (lifecycle::QuotaRecord), admin only: replaces the user's or project's record with `quota` (gpus
  // 0..kMaxQuotaGpus or none, shares in (0, kMaxShares]), or drops it when `quota` is lifted or keeps
  // nothing (no bound, 1 share); dropping what is not there is kNotFound. Written synced, with an event on
  // "quota:<kind>:<name>"; then a pass, so jobs a higher quota lets start do.
  static constexpr int kMaxQuotaGpus = 1'000'000;
  static constexpr double kMaxShares = 1e6;
  Status set_quota(lifecycle::QuotaRecord quota, const Caller& who, const store::AuditRecord* audit = nullptr);
  // Fair share from now on (JobTable::track_usage): passes order jobs by their user's and project's usage
  // decayed by this half-life. Any time; the usage is rebuilt from the runs.
  void track_usage(double half_life_s) { table_.track_usage(half_life_s); }

 private:
  // Adds run changes and the pre-commit hooks' records to `batch`, stamps its events.
  void prepare_write(WriteBatch& batch);
  // prepare_write(), then the commit: nothing applied.
  Status write(WriteBatch& batch);
  // Into the table, and observers told.
  void applied(const WriteBatch& batch);
  // write(), applied(), a pass requested: the path of the service's own changes.
  Status change(WriteBatch& batch);

  JobTable table_;
  Loop loop_;
  Clock clock_;
  Clock clock_ms_;
  JobId next_id_ = 1;  // shared by the intake and the passes (an array's tasks)
  std::vector<Observer> observers_;
  std::vector<PreCommit> pre_commit_;
  // Destroyed in reverse: the passes' thread joined first, the pipeline's threads and stores last.
  CommitPipeline pipeline_;
  Tokens tokens_;
  NodeAdmin nodes_;
  SubmitIntake intake_;
  PassRunner passes_;
};

}  // namespace railyard::daemon
