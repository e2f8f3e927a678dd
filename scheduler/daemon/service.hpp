// The scheduler daemon's behaviour, free of HTTP: submits with group commit, job and node actions, token
// checks, and the scheduling loop. Runs on one event loop (the `post` function given at construction);
// every method must be called on it.
//
// Submits: validated at once, queued, and committed together by one flush posted on the loop, so the
// submits that arrive in one turn of the loop share one transaction; each caller hears back only after
// that commit.
//
// Scheduling: any change that can alter the plan requests a pass; requests coalesce into one posted pass.
// A pass has three steps, only the first and last on the loop:
//
//   loop: table.snapshot() ──► pass executor: Scheduler::schedule() ──post──► loop: plan_changes(),
//                                                                              commit, apply, observers
//
// The executor is inline by default (tests' fake loops) or a worker thread owned by the service
// (run_passes_on_thread(), the daemon). While a pass is in flight the loop keeps serving requests, and
// the table may change under the plan: plan_changes() re-checks every start against the table of the
// moment (job still PENDING, nodes still up, GPUs still free) and drops the stale ones; a dropped start,
// or any pass request made while the pass was in flight, asks for one more pass once it is applied.
// At most one pass is in flight. Passes are paced: the next one starts no sooner than
// max(kMinPassInterval, last pass's duration (snapshot to applied)) after the last one was applied, so a
// stream of submits is not one fsync'd pass per submit, and passes take at most about half of the time.
// Submit flushes yield to the loop until it brings no more submits (kQuietFlushTurns quiet turns in a
// row, at most kMaxFlushTurns) before committing, so requests already sent join the commit.
//
// In the daemon a large submit commit (kSubmitThreadMinJobs jobs or more) runs off the loop too
// (commit_submits_on_thread), on a second connection: the loop parses and validates the next requests while
// SQLite writes and fsyncs. One commit is in flight at a time; submits that arrive meanwhile wait in the
// queue and form the next one, which starts as soon as the last is done. Smaller commits stay on the loop. A
// job enters the table, and its caller hears back, only once it is on disk. The loop's own commits (actions,
// passes, agents) wait on SQLite's lock while a submit commit writes.
//
// Arrays: an array is submitted (and synced) as one job record; each pass first creates its next tasks as
// jobs, a window at a time, and ends the arrays whose tasks have all ended (JobTable::array_changes).
//
// Durability (store::Durability): submits and API actions commit kSynced, so what a caller hears is done
// is on disk (submits may be set to kWritten instead: set_submit_durability). Passes commit kWritten (in
// SQLite's log: a killed scheduler loses nothing, a crashed machine can lose their last few milliseconds,
// which agents' re-registration reconciles); the next synced commit, or a sync posted kLazySyncDelay after
// the first unsynced one, makes them durable (that sync waits one more kLazySyncDelay when a synced commit
// came meanwhile: what is unsynced then is younger). The reports agents repeat until they are durable (a
// job's launch and its end) are kDeferred: applied at once and written in the loop's next transaction (a
// submit's, a pass's) or by that sync, so a stream of one-job submits writes one transaction per submit and
// one per pass instead of two more per job. In the daemon the delayed sync's fsync runs on a thread of its
// own (sync_log_on_thread) while the loop goes on. when_durable() runs a callback once all of that is on disk
// (the agent hub acks alloc_finished there), so a stream of jobs costs one fsync per submit commit, and the
// delayed sync runs only when no submit came for kLazySyncDelay (with written submits: one fsync per delayed
// sync, at most one each kLazySyncDelay).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/core/cycle.hpp"
#include "scheduler/lifecycle/job_table.hpp"
#include "scheduler/store/state_store.hpp"

namespace railyard::daemon {

using jobs::JobId;
using lifecycle::ArrayProgress;
using lifecycle::job_subject;
using lifecycle::JobTable;
using store::JobRecord;
using store::WriteBatch;

struct Caller {
  std::string user;
  store::Role role = store::Role::kUser;
  // Set when the kernel named the caller (SO_PEERCRED on the Unix socket, api/peer_auth.hpp): their jobs
  // are this user's whatever a spec says, admin or not (prepare()).
  std::optional<uint32_t> uid;
  bool admin() const { return role == store::Role::kAdmin; }
};

// What a bearer token stands for: the caller, or why it is refused (unknown, expired, revoked), which is
// the message of a 401.
struct Authenticated {
  std::optional<Caller> caller;
  std::string refusal;
};

// Tokens made without an expiry last this long (`token create --expires never` for none).
inline constexpr int64_t kDefaultTokenLifetimeS = 90 * 86400;
// A token's last use is written when it moved by at least this much since the last write, so a busy token
// costs one deferred row now and then, not a write per request.
inline constexpr int64_t kTokenUseResolutionS = 60;

struct ServiceStats {
  int64_t submits_total = 0;
  int64_t submit_commits_total = 0;
  int64_t passes_total = 0;
  double last_pass_seconds = 0;  // snapshot to applied, wall time
  double pass_seconds_sum = 0;
  // The last pass's steps: snapshot and apply block the loop, schedule() runs on the executor.
  double last_snapshot_seconds = 0, last_schedule_seconds = 0, last_apply_seconds = 0;
  int64_t stale_starts_total = 0;  // starts dropped because the table changed during the pass
  int64_t log_syncs_total = 0;     // syncs of kWritten commits by the delayed sync (not by a synced commit)
  int64_t deferred_batches_total = 0;  // kDeferred batches written (each in a later transaction)
  int64_t array_tasks_total = 0;   // jobs created as the tasks of arrays
  bool submits_synced = true;      // Service::submit_durability() is kSynced
};

// The event loop the service runs on (the HTTP server's, or a fake in tests).
struct Loop {
  std::function<void(std::function<void()>)> post;
  std::function<void(std::chrono::milliseconds, std::function<void()>)> post_after;
};

inline constexpr std::chrono::milliseconds kMinPassInterval{20};
// Longest a kWritten commit stays unsynced while nothing else syncs the log; twice that at most when a
// synced commit comes in between (see the header comment and Service::sync_log).
inline constexpr std::chrono::milliseconds kLazySyncDelay{10};
// Submit commits of fewer jobs than this run on the loop even with a submit thread (see the header comment).
inline constexpr size_t kSubmitThreadMinJobs = 256;
// Most turns of the loop a submit flush waits for more submits to join it (see Service::post_flush).
inline constexpr int kMaxFlushTurns = 64;
// ... and it stops waiting after this many turns in a row without one (a pipelined request takes the server
// two or three turns to read: header, body).
inline constexpr int kQuietFlushTurns = 4;

class Service {
 public:
  using Clock = std::function<int64_t()>;  // seconds since the epoch
  using SubmitDone = std::function<void(Result<std::vector<JobId>>)>;
  // Runs its argument, on any thread, once; may return before it ran.
  using Executor = std::function<void(std::function<void()>)>;

  Service(const topology::Cluster& cluster, std::unique_ptr<store::StateStore> store, Loop loop, Clock clock);
  ~Service();  // waits for a pass in flight on the worker thread; its result is dropped
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Where schedule() runs (see the header comment). Call before open(). The worker thread is joined by
  // the destructor; a test's executor must run or drop its work before the service is destroyed.
  void run_passes_on_thread();
  void set_pass_executor(Executor executor) { executor_ = std::move(executor); }
  // Where the delayed sync's fsync runs: by default on the loop (store().sync()); with these, on `executor`
  // or a thread of the service's own (StateStore::sync_elsewhere()), while the loop goes on serving; its
  // waiters hear once it is done. Call before open().
  void sync_log_on_thread();
  void set_sync_executor(Executor executor) { sync_executor_ = std::move(executor); }
  // Where submits commit (see the header comment): by default on the loop, through the service's store;
  // with these, through `store` (a second connection to the same database) on `executor` (one task at a
  // time, in order) or on a thread of the service's own. Call before open().
  void commit_submits_on_thread(std::unique_ptr<store::StateStore> store,
                                size_t min_jobs = kSubmitThreadMinJobs);
  // The log's checkpoints on a thread of the service's own (StateStore::checkpoint_on), for the loop's
  // store and the submit store: by default SQLite runs each in the commit that fills the log, on the loop.
  // Call after commit_submits_on_thread(), before open().
  void checkpoint_on_thread();
  void set_submit_committer(std::unique_ptr<store::StateStore> store, Executor executor,
                            size_t min_jobs = kSubmitThreadMinJobs);
  // How durable a submit is when its caller hears back (railyard-scheduler --submit-durability): kSynced, the
  // default, on disk; or kWritten, in the log, which a killed scheduler keeps and a crash of the machine can
  // lose the last 2 x kLazySyncDelay of (the delayed sync makes them durable). kDeferred is refused. Any
  // time.
  Status set_submit_durability(store::Durability durability);
  store::Durability submit_durability() const { return submit_durability_; }

  // Loads the store and requests a first pass.
  Status open();

  const JobTable& table() const { return table_; }
  JobTable& table() { return table_; }
  const ServiceStats& stats() const { return stats_; }
  // The store, to read events and metrics: the deferred batches are written first, so a read sees every
  // applied change.
  store::StateStore& store();
  const Loop& loop() const { return loop_; }
  int64_t now() const { return clock_(); }
  // Milliseconds since the epoch, for event times; by default now() * 1000 (tests' clocks).
  void set_clock_ms(Clock clock_ms) { clock_ms_ = std::move(clock_ms); }
  int64_t now_ms() const { return clock_ms_ ? clock_ms_() : clock_() * 1000; }
  // The monotonic clock that paces passes (kMinPassInterval) and times them; steady_clock by default. Called
  // on the loop and on the pass executor's thread.
  using Monotonic = std::function<std::chrono::steady_clock::time_point()>;
  void set_monotonic_clock(Monotonic clock) { monotonic_ = std::move(clock); }

  // Writes `batch` (with what the pre-commit hooks add), applies it to the table, tells every observer and
  // requests a pass: the one path for state changes made outside the service (the agent hub). Nothing is
  // applied when the commit fails.
  // `batch.durability` says whether it returns once the batch is on disk or once it is in the log, or
  // (kDeferred) at once, the batch written with the next commit or by the delayed sync: the commits that
  // carry it fail while it cannot be written (a full disk), and it stays queued until one succeeds.
  Status commit(WriteBatch batch);
  // Runs `fn` on the loop once every commit made so far is on disk: now when nothing waits for a sync.
  // Dropped if the service is destroyed first.
  void when_durable(std::function<void()> fn);
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
  // Requests a scheduling pass (coalesced and paced; see the header comment).
  void request_pass();
  // The policy every pass schedules with (default: sched::PolicyConfig's). Call before open().
  void set_policy(const sched::PolicyConfig& policy) {
    policy_ = policy;
    table_.unpark_all();  // parked jobs' reasons were written under the old one (`explain`)
  }

  // The caller a bearer token stands for, or the refusal of an unknown, expired or revoked one. Tokens are
  // cached by hash after their first use; a revocation through revoke_token() reaches the cache at once.
  // (service_auth.cpp, as are the token and audit methods below.)
  Result<Authenticated> authenticate(const std::string& token);
  // Admin only: a new token for `user` (the secret, shown once; the store keeps its hash) expiring at
  // `expires` (unix seconds; nullopt: never). Written with `audit` (see "Audit" below).
  Result<std::pair<std::string, store::TokenRecord>> create_token(const std::string& user, store::Role role,
                                                                  std::optional<int64_t> expires,
                                                                  const Caller& who,
                                                                  const store::AuditRecord* audit = nullptr);
  // Admin only: every token, its last use as this process saw it.
  Result<std::vector<store::TokenRecord>> tokens(const Caller& who);
  // Admin only: revokes the token whose id (store::kTokenIdLength characters of its hash) is `id`;
  // kNotFound when none. Revoking a revoked token changes nothing.
  Status revoke_token(const std::string& id, const Caller& who, const store::AuditRecord* audit = nullptr);

  // Audit (issue 32): the mutators below and the token ones take the row of the request that asks
  // (`audit`, its status already the success status) and write it in the transaction of the change they
  // make, or, when they succeed without a change, as a deferred batch: a caller records only the requests
  // that failed (record_audit). nullptr: not an API request.
  // Writes `row` as a deferred batch (with the loop's next transaction or the delayed sync; no fsync of its
  // own).
  void record_audit(store::AuditRecord row);

  // Fills defaults (user, project) and validates against the cluster; kPermission when a user submits
  // for someone else. A caller the kernel named (Caller::uid) submits as themself: the spec's user is set
  // to theirs. `earlier`: the specs before this one in the submit() call that follows (a batch's
  // entries so far), which give its id: a dependency may name only a lower one, and may name a task of
  // an array among them.
  Status prepare(jobs::JobSpec& spec, const Caller& who, std::span<const jobs::JobSpec> earlier = {}) const;
  // Queues prepared specs; `done` runs after their commit with their ids, in order.
  // `idempotency_key` (optional, scoped by the caller's user): a submit whose key was seen before makes no
  // job and gets the ids the first one got (or waits for its commit, when that is still in flight); the key
  // is written with the jobs, so a retry after a failover finds it too (issue 30).
  void submit(std::vector<jobs::JobSpec> specs, const Caller& who, SubmitDone done,
              const std::string& idempotency_key = "", const store::AuditRecord* audit = nullptr);

  // cancel, hold, release: owner or admin; kConflict when the state forbids it.
  Result<JobRecord> act(JobId id, jobs::JobEvent event, const Caller& who,
                        const store::AuditRecord* audit = nullptr);
  // Admin only: drain (health kDrain with a reason) or resume (kUp). A removed node may only be resumed
  // (kConflict otherwise).
  Status set_node_health(const std::string& name, sched::NodeHealth health, std::string reason,
                         const Caller& who, const store::AuditRecord* audit = nullptr);
  // Admin only: health kRemoved (never placed on, not capacity, its agent refused) until resumed.
  // kConflict, naming the job, while a STARTING/RUNNING job or a GPU hold is on the node. Removing a
  // removed node changes nothing.
  Status remove_node(const std::string& name, const Caller& who, const store::AuditRecord* audit = nullptr);

 private:
  struct QueuedSubmit {
    std::vector<JobRecord> jobs;
    std::string actor;
    SubmitDone done;
    std::string idempotency_key;  // scoped ("<user>\n<key>"); "" = none
    std::optional<store::AuditRecord> audit;  // written with the jobs
  };
  struct PassWork;
  struct SubmitWork;
  // The spec of a job submitted before one with `earlier` in front of it in its own call: in the table,
  // among `earlier`, or still on its way to disk (queued, or in the submit commit in flight); nullptr if
  // no such job was submitted.
  const jobs::JobSpec* submitted_spec(JobId id, std::span<const jobs::JobSpec> earlier) const;
  class PassThread;
  void post_flush(uint64_t seen, int quiet_turns, int turns);
  void flush_submits();
  void submits_committed(const std::shared_ptr<SubmitWork>& work);
  void run_pass();
  void tend_arrays();
  void finish_pass(const std::shared_ptr<PassWork>& done);
  void note_compact_waits(const PassWork& work);
  void applied(const WriteBatch& batch);
  // Adds run changes and the pre-commit hooks' records to `batch`, stamps its events, commits it.
  Status write(WriteBatch& batch);
  // write() without the commit.
  void prepare_write(WriteBatch& batch);
  // Commits `batch` through the loop's connection, after the deferred batches in the same transaction. Every
  // commit of the loop's connection goes through here: a synced one makes everything applied durable.
  Status store_commit(const WriteBatch& batch);
  // Writes the deferred batches, if any, in one transaction (kWritten).
  Status write_deferred();
  // Sets time_ms of the events that have none: now_ms(), or time * 1000 when now_ms() is in another second
  // than the event's time (it was made in the second before).
  void stamp_events(WriteBatch& batch) const;
  // After a store commit: a synced one makes everything durable, a written one posts the delayed sync.
  void committed(store::Durability durability);
  void post_sync();
  void sync_log(uint64_t syncs_then);
  void now_durable();
  void log_synced(const Status& status);

  JobTable table_;
  std::unique_ptr<store::StateStore> store_;
  Loop loop_;
  Clock clock_;
  Clock clock_ms_;
  Monotonic monotonic_ = [] { return std::chrono::steady_clock::now(); };
  JobId next_id_ = 1;
  std::vector<QueuedSubmit> queue_;
  bool flush_posted_ = false;
  std::shared_ptr<const SubmitWork> submit_in_flight_;  // the commit running on submit_executor_
  size_t queued_jobs_ = 0;         // jobs in queue_
  uint64_t submit_arrivals_ = 0;   // submit() calls so far
  size_t submit_thread_min_jobs_ = kSubmitThreadMinJobs;
  store::Durability submit_durability_ = store::Durability::kSynced;
  bool pass_posted_ = false;
  bool pass_in_flight_ = false;  // snapshot taken, plan not applied yet
  bool pass_again_ = false;      // a pass was requested while one was in flight
  std::chrono::steady_clock::time_point last_pass_end_{};
  std::chrono::steady_clock::duration last_pass_duration_{};
  std::unordered_map<std::string, store::TokenRecord> token_cache_;  // by hash; last_used as last seen
  std::unordered_map<std::string, int64_t> token_use_written_;      // by hash: the last use written
  // Idempotency keys (scoped) of committed submits: first id and count; and of submits not committed yet:
  // the retries waiting for them.
  std::unordered_map<std::string, std::pair<JobId, int64_t>> idempotent_done_;
  std::unordered_map<std::string, std::vector<SubmitDone>> idempotent_waiting_;
  ServiceStats stats_;
  std::vector<Observer> observers_;
  std::vector<PreCommit> pre_commit_;
  bool unsynced_ = false;  // a kWritten commit is not on disk yet, or a kDeferred batch not written
  std::vector<WriteBatch> deferred_;  // kDeferred batches applied but not written yet, in order
  bool sync_posted_ = false;  // sync_log() is posted
  uint64_t syncs_ = 0;        // times everything committed became durable (synced commits and syncs)
  std::vector<std::function<void()>> durable_waiters_;  // for what is unsynced
  bool sync_in_flight_ = false;  // a sync on sync_executor_ has started and not come back
  std::vector<std::function<void()>> in_flight_waiters_;  // for what that sync covers
  // Used on the executor only, one pass at a time. Its reuse check compares the running jobs' GPU buffers
  // with the last snapshot's, so that snapshot is kept alive (last_work_, also executor-only) until the
  // next one is built: a new buffer can never have an old one's address.
  sched::Scheduler scheduler_;
  std::shared_ptr<PassWork> last_work_;
  sched::PolicyConfig policy_;
  // Loop only. The time of the pass posted for the earliest end of a compact wait (Plan::wake_at), if one
  // is posted. When each wait began is in the job's record (JobRecord::compact_since, persisted).
  std::optional<int64_t> wake_posted_;
  Executor executor_;
  std::shared_ptr<char> alive_ = std::make_shared<char>();  // expired once destruction starts
  std::unique_ptr<store::StateStore> submit_store_;  // used on submit_executor_ only
  Executor submit_executor_;
  Executor sync_executor_;
  std::unique_ptr<PassThread> sync_thread_;                 // joined before store_ closes
  std::unique_ptr<PassThread> checkpoint_thread_;           // joined before store_ and submit_store_ close
  std::unique_ptr<PassThread> submit_thread_;               // joined before submit_store_ closes
  std::unique_ptr<PassThread> thread_;                      // last: joined first
};

}  // namespace railyard::daemon
