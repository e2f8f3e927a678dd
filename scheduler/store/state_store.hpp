// The daemon's durable state, behind a role interface so the daemon can be tested with other stores.
//
// Contract: commit() writes a whole WriteBatch in one transaction and returns only after it is durable (or
// failed, in which case nothing of it was written). load() returns everything a restart needs. Thread
// safety: none; one owner (the daemon's event loop, or the `token create` command) calls it at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "jobs/spec.hpp"
#include "scheduler/lifecycle/records.hpp"
#include "scheduler/model/snapshot.hpp"

namespace railyard::store {

using jobs::JobId;
using lifecycle::EventRecord;
using lifecycle::GpuHold;
using lifecycle::JobRecord;
using lifecycle::NodeRecord;
using lifecycle::RunRecord;

enum class Role { kUser, kAdmin };
std::string_view to_string(Role r);
std::optional<Role> parse_role(std::string_view s);

// Characters of a token's hash that name it in lists and `token revoke` (its id). The hash of a 256-bit
// random secret gives nothing of the secret away.
inline constexpr size_t kTokenIdLength = 12;

// A bearer token, known only by its SHA-256 (hex); the token itself is never stored. Times are unix seconds.
struct TokenRecord {
  TokenRecord() = default;
  TokenRecord(std::string hash, std::string user, Role role)
      : hash(std::move(hash)), user(std::move(user)), role(role) {}
  std::string hash;
  std::string user;
  Role role = Role::kUser;
  int64_t created = 0;                // 0: made before schema 10, when creation times were not kept
  std::optional<int64_t> expires;     // refused from this second on; nullopt: never expires
  std::optional<int64_t> last_used;   // the last request it authenticated (Service keeps it coarse)
  std::optional<int64_t> revoked;     // when an admin revoked it; refused from then on
  std::string id() const { return hash.substr(0, kTokenIdLength); }
};

// A token's revocation or use at `time`, written with a batch (WriteBatch::token_revokes, token_uses).
struct TokenStamp {
  std::string hash;
  int64_t time = 0;
};

// One mutating API request as the audit log keeps it (issue 32): who (the token's user, "" without a valid
// token), from where (the peer's address), what (method and path; the query is left out), and the answer's
// HTTP status.
struct AuditRecord {
  int64_t time_ms = 0;
  std::string actor;
  std::string source;
  std::string method;
  std::string target;
  int status = 0;
};

// A read of the audit log: rows of `actor` ("" for all) at or after `since_ms`, the newest `limit`, oldest
// first.
struct AuditQuery {
  std::string actor;
  int64_t since_ms = 0;
  int limit = 1000;
};

// A node's agent credential (scheduler/PROTOCOL.md "Node keys"). HMAC verification recomputes the MAC, so
// the scheduler keeps the key itself, not a hash: the database file is mode 0600 (SqliteStateStore::open).
// After a rotation the previous key keeps working until `previous_until` (unix seconds) or until the agent
// registers with the new key, whichever comes first; then `previous_key` is emptied.
struct NodeKeyRecord {
  std::string node;
  std::string key;
  int64_t created = 0;
  std::optional<int64_t> rotated_at;
  std::string previous_key;  // "" = none
  std::optional<int64_t> previous_until;
};

// One MLLOG event or telemetry sample an agent reported for a job (`data` is the event's JSON).
struct MetricSample {
  JobId job = 0;
  std::string alloc;
  std::string key;  // "run_start", "eval_accuracy", "telemetry", ...
  double time = 0;  // unix seconds
  std::string data;
};

// A submit that carried an idempotency key (scoped by user: "<user>\n<key>"): it made the jobs
// first_id .. first_id + count - 1, so a retry of it is answered with the same ids (issue 30).
struct IdempotencyRecord {
  std::string key;
  JobId first_id = 0;
  int64_t count = 0;
};

// The lifecycle's state (jobs, nodes, holds, runs) and the submits' idempotency keys.
struct StoredState : lifecycle::State {
  std::vector<IdempotencyRecord> idempotency;
};

// How durable a commit is when commit() returns:
//   kSynced  on disk (the log is fsynced): for what a caller is told is done (submits, API actions);
//   kWritten in the log, which survives a crash or kill of the process but not yet of the machine; it
//            becomes synced with the next kSynced commit or sync(). The scheduler's own transitions
//            (passes, agent reports) commit this way and are synced within 2 × kLazySyncDelay
//            (daemon/commit_pipeline.hpp).
//   kDeferred (Service::commit; a store writes it as kWritten) applied at once, written with the next
//            commit of the loop's connection or by the delayed sync, whichever comes first (so a stream of
//            jobs writes their launch and end reports with its submits instead of in transactions of their
//            own); a killed scheduler can lose the last 2 × kLazySyncDelay of them. Only for reports an agent
//            repeats until they are durable: alloc_finished (acked once synced) and launched (answered
//            again when the agent re-registers).
enum class Durability { kSynced, kWritten, kDeferred };

// Everything one commit writes: the lifecycle's Changes (see lifecycle/records.hpp), and what only the
// daemon keeps.
struct WriteBatch : lifecycle::Changes {
  WriteBatch() = default;
  explicit WriteBatch(lifecycle::Changes changes, Durability d = Durability::kSynced)
      : lifecycle::Changes(std::move(changes)), durability(d) {}
  Durability durability = Durability::kSynced;
  std::vector<MetricSample> metrics;
  std::vector<IdempotencyRecord> idempotency;  // written with the inserts they name
  // The audit rows of the requests that made this change (in its transaction, so no fsync of their own),
  // tokens created, revoked and used.
  std::vector<AuditRecord> audit;
  std::vector<TokenRecord> tokens;
  std::vector<TokenStamp> token_revokes;
  std::vector<TokenStamp> token_uses;
  std::vector<NodeKeyRecord> node_keys;  // issued or rotated through the API: each replaces the node's row
  bool empty() const {
    return lifecycle::Changes::empty() && metrics.empty() && idempotency.empty() && audit.empty() &&
           tokens.empty() && token_revokes.empty() && token_uses.empty() && node_keys.empty();
  }
};

class StateStore {
 public:
  virtual ~StateStore() = default;
  virtual int schema_version() const = 0;
  virtual Result<StoredState> load() = 0;
  virtual Status commit(const WriteBatch& batch) = 0;
  // `batches` in order in one transaction, kSynced when any of them is (kDeferred counts as kWritten).
  virtual Status commit_all(std::span<const WriteBatch* const> batches) = 0;
  // Makes every earlier commit of this store kSynced (fsyncs the log).
  virtual Status sync() = 0;
  // The same as a function that may run on another thread while this store goes on committing: what was
  // committed before it starts is synced when it returns (later commits may or may not be). nullptr where
  // the store has none; then sync() on the store's own thread.
  virtual std::function<Status()> sync_elsewhere() { return nullptr; }
  // Takes the log's checkpoints (copying the write-ahead log into the database file, with its fsyncs) out of
  // the commits: once a commit leaves the log as long as SQLite's automatic checkpoint waits for (1,000
  // frames), `executor` is handed one to run, on a connection of its own and one at a time, where SQLite
  // would run it inside that commit (a copy of the whole log and its fsyncs, on the committing thread).
  // `failed` hears of a checkpoint that failed (on the executor's thread); the next commit asks again. Stores
  // without a log ignore it.
  using Executor = std::function<void(std::function<void()>)>;
  virtual void checkpoint_on(Executor /*executor*/, std::function<void(const Error&)> /*failed*/) {}
  // Outside any batch: `railyard-scheduler token create` on the database (the first admin token).
  virtual Status add_token(const TokenRecord& token) = 0;
  virtual Result<std::optional<TokenRecord>> find_token(const std::string& hash) = 0;
  // Every token, revoked and expired ones included, oldest first.
  virtual Result<std::vector<TokenRecord>> tokens() = 0;
  virtual Result<std::vector<AuditRecord>> audit(const AuditQuery& query) = 0;
  // Newest last; at most `limit`; subject "" for all.
  virtual Result<std::vector<EventRecord>> events(const std::string& subject, int limit) = 0;
  // A job's metric samples in arrival order, at most `limit` (the newest).
  virtual Result<std::vector<MetricSample>> metrics(JobId job, int limit) = 0;
  // Node keys: insert or replace the node's row; read it (nullopt: no key issued). Stores without them
  // (fakes) have none.
  virtual Status put_node_key(const NodeKeyRecord& /*key*/) { return internal_error("this store keeps no node keys"); }
  virtual Result<std::optional<NodeKeyRecord>> find_node_key(const std::string& /*node*/) {
    return std::optional<NodeKeyRecord>();
  }
};

}  // namespace railyard::store
