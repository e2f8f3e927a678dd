// Submit intake: checks a submit against the cluster and the jobs before it, gives it ids, and commits the
// submits that arrive in one turn of the loop together (group commit); each caller hears back only after
// that commit, with its jobs in the table.
//
// A flush yields to the loop until it brings no more submits (kQuietFlushTurns quiet turns in a row, at
// most kMaxFlushTurns) before committing, so requests already sent join the commit. A large commit
// (min_jobs or more, when the commit pipeline commits elsewhere) runs off the loop on the second
// connection: the loop parses and validates the next requests while SQLite writes and fsyncs. One commit is
// in flight at a time; submits that arrive meanwhile wait and form the next one, which starts as soon as
// the last is done. Smaller commits stay on the loop.
//
// Runs on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scheduler/daemon/caller.hpp"
#include "scheduler/daemon/commit_pipeline.hpp"
#include "scheduler/lifecycle/job_table.hpp"

namespace railyard::daemon {

using jobs::JobId;
using lifecycle::job_subject;
using lifecycle::JobTable;
using store::JobRecord;

// Submit commits of fewer jobs than this run on the loop even with a second connection (see above).
inline constexpr size_t kSubmitThreadMinJobs = 256;
// Most turns of the loop a submit flush waits for more submits to join it.
inline constexpr int kMaxFlushTurns = 64;
// ... and it stops waiting after this many turns in a row without one (a pipelined request takes the server
// two or three turns to read: header, body).
inline constexpr int kQuietFlushTurns = 4;

class SubmitIntake {
 public:
  using Clock = std::function<int64_t()>;  // seconds since the epoch
  using SubmitDone = std::function<void(Result<std::vector<JobId>>)>;
  // Where a committed submit goes: `applied` puts its jobs in the table (and tells observers, requests a
  // pass); `audit` records a request's audit row on its own (a retry's, which makes no change).
  struct Sink {
    std::function<void(const WriteBatch&)> applied;
    std::function<void(store::AuditRecord)> audit;
  };

  // `next_id`: the next job id, shared with the pass (an array's tasks take ids too).
  SubmitIntake(const JobTable& table, CommitPipeline& pipeline, Loop loop, Clock clock, JobId& next_id,
               Sink sink);
  ~SubmitIntake();
  SubmitIntake(const SubmitIntake&) = delete;
  SubmitIntake& operator=(const SubmitIntake&) = delete;

  // The idempotency keys of committed submits, from the store's load.
  void load(const std::vector<store::IdempotencyRecord>& keys);
  // How durable a submit is when its caller hears back: kSynced (on disk) or kWritten (in the log); kDeferred
  // is refused.
  Status set_durability(store::Durability durability);
  store::Durability durability() const { return durability_; }
  void set_min_jobs_elsewhere(size_t min_jobs) { min_jobs_elsewhere_ = min_jobs; }
  // Who may submit QoS high besides admins (a high job may preempt scavenger ones and goes before every
  // normal one): user names, comma-separated; "*" = every user; "" = admins only (the default). An empty
  // name is an error.
  Status set_high_qos_users(std::string_view list);
  // Whether the cluster can run a job of `user` at all (AgentHub: not when every connected agent reports
  // it cannot switch users and runs as someone else); prepare() refuses the job with its reason. Unset:
  // every user.
  using UserCheck = std::function<Status(const std::string& user)>;
  void set_user_check(UserCheck check) { user_check_ = std::move(check); }

  // Fills defaults (user, project) and validates against the cluster; kPermission when a user submits
  // for someone else, or submits QoS high without leave (set_high_qos_users). A caller the kernel named
  // (Caller::uid) submits as themself: the spec's user is set to theirs. `earlier`: the specs before this
  // one in the submit() call that follows (a batch's entries so far), which give its id: a dependency may
  // name only a lower one, and may name a task of an array among them.
  Status prepare(jobs::JobSpec& spec, const Caller& who, std::span<const jobs::JobSpec> earlier = {}) const;
  // Queues prepared specs; `done` runs after their commit with their ids, in order.
  // `idempotency_key` (optional, scoped by the caller's user): a submit whose key was seen before makes no
  // job and gets the ids the first one got (or waits for its commit, when that is still in flight); the key
  // is written with the jobs, so a retry after a failover finds it too.
  void submit(std::vector<jobs::JobSpec> specs, const Caller& who, SubmitDone done,
              const std::string& idempotency_key = "", const store::AuditRecord* audit = nullptr);

  int64_t submits() const { return submits_; }  // jobs committed
  int64_t commits() const { return commits_; }  // their commits

 private:
  struct Queued {
    std::vector<JobRecord> jobs;
    std::string actor;
    SubmitDone done;
    std::string idempotency_key;              // scoped ("<user>\n<key>"); "" = none
    std::optional<store::AuditRecord> audit;  // written with the jobs
  };
  struct Work;
  // The spec of a job submitted before one with `earlier` in front of it in its own call: in the table,
  // among `earlier`, or still on its way to disk (queued, or in the commit in flight); nullptr if no such
  // job was submitted.
  const jobs::JobSpec* submitted_spec(JobId id, std::span<const jobs::JobSpec> earlier) const;
  void post_flush(uint64_t seen, int quiet_turns, int turns);
  void flush();
  void committed(const std::shared_ptr<Work>& work);

  const JobTable& table_;
  CommitPipeline& pipeline_;
  Loop loop_;
  Clock clock_;
  JobId& next_id_;
  Sink sink_;
  std::vector<Queued> queue_;
  bool flush_posted_ = false;
  std::shared_ptr<const Work> in_flight_;  // the commit running elsewhere
  size_t queued_jobs_ = 0;                 // jobs in queue_
  uint64_t arrivals_ = 0;                  // submit() calls so far
  size_t min_jobs_elsewhere_ = kSubmitThreadMinJobs;
  store::Durability durability_ = store::Durability::kSynced;
  std::set<std::string, std::less<>> high_qos_users_;
  bool high_qos_anyone_ = false;
  UserCheck user_check_;
  // Idempotency keys (scoped) of committed submits: first id and count; and of submits not committed yet:
  // the retries waiting for them.
  std::unordered_map<std::string, std::pair<JobId, int64_t>> done_keys_;
  std::unordered_map<std::string, std::vector<SubmitDone>> waiting_keys_;
  int64_t submits_ = 0;
  int64_t commits_ = 0;
  std::shared_ptr<char> alive_ = std::make_shared<char>();  // expired once destruction starts
};

}  // namespace railyard::daemon
