// The commit pipeline: every write of the daemon's state database goes through it, on the loop (or, for
// large submits, on a second connection off the loop), and it knows what is durable.
//
// Durability (store::Durability): submits and API actions commit kSynced, so what a caller hears is done
// is on disk. Passes commit kWritten (in SQLite's log: a killed scheduler loses nothing, a crashed machine
// can lose their last few milliseconds, which agents' re-registration reconciles); the next synced commit,
// or a sync posted kLazySyncDelay after the first unsynced one, makes them durable (that sync waits one more
// kLazySyncDelay when a synced commit came meanwhile: what is unsynced then is younger). The reports agents
// repeat until they are durable (a job's launch and its end) are kDeferred: applied at once and written in
// the loop's next transaction or by that sync, so a stream of one-job submits writes one transaction per
// submit and one per pass instead of two more per job. With sync_on_thread() the delayed sync's fsync runs on
// a worker thread while the loop goes on. when_durable() runs a callback once all of that is on disk (the
// agent hub acks alloc_finished there), so a stream of jobs costs one fsync per submit commit, and the
// delayed sync runs only when no synced commit came for kLazySyncDelay.
//
// Everything but the off-loop work runs on the loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "scheduler/daemon/loop.hpp"
#include "scheduler/daemon/worker_thread.hpp"
#include "scheduler/store/state_store.hpp"

namespace railyard::daemon {

using store::WriteBatch;

// Longest a kWritten commit stays unsynced while nothing else syncs the log; twice that at most when a
// synced commit comes in between (see the header comment and CommitPipeline::sync_log).
inline constexpr std::chrono::milliseconds kLazySyncDelay{10};

class CommitPipeline {
 public:
  // `now_ms`: milliseconds since the epoch, for the events' times (stamp_events).
  CommitPipeline(std::unique_ptr<store::StateStore> store, Loop loop, std::function<int64_t()> now_ms);
  // Joins the worker threads, then writes the deferred batches.
  ~CommitPipeline();
  CommitPipeline(const CommitPipeline&) = delete;
  CommitPipeline& operator=(const CommitPipeline&) = delete;

  // Sets time_ms of the events that have none: now_ms, or time * 1000 when now_ms is in another second than
  // the event's time (it was made in the second before).
  void stamp_events(WriteBatch& batch) const;
  // Commits `batch` through the loop's connection, after the deferred batches in the same transaction: a
  // synced one makes everything committed so far durable, a written one posts the delayed sync. On failure
  // nothing is written and the deferred batches stay queued.
  Status commit(const WriteBatch& batch);
  // A kDeferred batch: written with the next commit or by the delayed sync; the commits that carry it fail
  // while it cannot be written (a full disk), and it stays queued until one succeeds.
  void defer(WriteBatch batch);
  // Writes the deferred batches, if any, in one transaction (kWritten).
  Status write_deferred();
  // Runs `fn` on the loop once every commit made so far is on disk: now when nothing waits for a sync.
  // Dropped if the pipeline is destroyed first.
  void when_durable(std::function<void()> fn);

  // The loop's connection, the deferred batches written first, so a read sees every applied change.
  store::StateStore& store();
  // The loop's connection as it is (the load at start, lookups that need no deferred row).
  store::StateStore& connection() { return *store_; }

  // A second connection to the same database for commit_elsewhere(), and where its commits run (one task at
  // a time, in order): `executor`, or a worker thread of the pipeline's own. Call before the first commit.
  void commit_elsewhere_on_thread(std::unique_ptr<store::StateStore> second);
  void set_elsewhere_committer(std::unique_ptr<store::StateStore> second, Executor executor);
  bool commits_elsewhere() const { return static_cast<bool>(elsewhere_executor_); }
  // Commits `batch` through the second connection off the loop, then runs `done` on the loop with the
  // result (not at all if the pipeline is destroyed first). `batch` must live until `done` runs. A kWritten
  // commit there is synced like the loop's own (the delayed sync syncs the one log both write); a kSynced
  // one leaves the loop's unsynced commits as they are: those made while it was in flight may have missed
  // its fsync.
  void commit_elsewhere(const WriteBatch& batch, std::function<void(Status)> done);

  // Where the delayed sync's fsync runs: by default on the loop; with these, on `executor` or a worker thread
  // of the pipeline's own (StateStore::sync_elsewhere()), while the loop goes on; its waiters hear once it is
  // done. Call before the first commit.
  void sync_on_thread();
  void set_sync_executor(Executor executor) { sync_executor_ = std::move(executor); }
  // The log's checkpoints, of both connections, on a worker thread of the pipeline's own
  // (StateStore::checkpoint_on): by default SQLite runs each in the commit that fills the log, on the loop.
  // Call after commit_elsewhere_on_thread(), before the first commit.
  void checkpoint_on_thread();

  int64_t log_syncs() const { return log_syncs_; }                // by the delayed sync
  int64_t deferred_batches() const { return deferred_batches_; }  // kDeferred batches written

 private:
  // commit() without the bookkeeping of durability.
  Status write(const WriteBatch& batch);
  // After a commit: a synced one makes everything durable, a written one posts the delayed sync.
  void committed(store::Durability durability);
  void post_sync();
  void sync_log(uint64_t syncs_then);
  void now_durable();
  void log_synced(const Status& status);

  std::unique_ptr<store::StateStore> store_;
  std::unique_ptr<store::StateStore> second_;  // used on elsewhere_executor_ only
  Loop loop_;
  std::function<int64_t()> now_ms_;
  bool unsynced_ = false;  // a kWritten commit is not on disk yet, or a kDeferred batch not written
  std::vector<WriteBatch> deferred_;  // kDeferred batches applied but not written yet, in order
  bool sync_posted_ = false;          // sync_log() is posted
  uint64_t syncs_ = 0;                // times everything committed became durable (synced commits and syncs)
  std::vector<std::function<void()>> durable_waiters_;    // for what is unsynced
  bool sync_in_flight_ = false;                           // a sync on sync_executor_ has not come back
  std::vector<std::function<void()>> in_flight_waiters_;  // for what that sync covers
  int64_t log_syncs_ = 0;
  int64_t deferred_batches_ = 0;
  Executor sync_executor_;
  Executor elsewhere_executor_;
  std::shared_ptr<char> alive_ = std::make_shared<char>();  // expired once destruction starts
  std::unique_ptr<WorkerThread> checkpoint_thread_;  // joined after the last commit, before the stores close
  std::unique_ptr<WorkerThread> sync_thread_;
  std::unique_ptr<WorkerThread> elsewhere_thread_;
};

}  // namespace railyard::daemon
