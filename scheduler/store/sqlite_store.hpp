// StateStore on one SQLite file: WAL journal, synchronous=FULL (a commit survives power loss), foreign
// writers excluded by BEGIN IMMEDIATE. The schema is versioned: `schema_version` holds one row, and open()
// applies every migration above it, each in its own transaction, so an old database is brought forward
// and a new one is created from nothing by the same path.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "scheduler/store/state_store.hpp"

struct sqlite3;

namespace railyard::store {

// Migration i (0-based) takes the schema from version i to i + 1.
std::span<const std::string_view> schema_migrations();
inline int latest_schema_version() { return static_cast<int>(schema_migrations().size()); }

class LogSyncer;     // sqlite_store.cpp
class Checkpointer;  // sqlite_store.cpp

// One write transaction of the leader as it replicates (sqlite_replication.cpp): its number in the leader's
// sequence (1, 2, ...) and its rows as an SQLite changeset.
struct ReplicatedEntry {
  int64_t seq = 0;
  std::string changeset;
};

// A standby's copy of the jobs table as load() reads it, kept as it applies the leader's entries
// (apply_replicated), so that its takeover's load() need not read and parse every job again (the bulk of
// loading a large state). `complete`: it holds every row (warm_jobs filled it, and each apply since updated
// the rows it changed).
struct WarmJobs {
  std::map<JobId, JobRecord> jobs;
  bool complete = false;
};

// Where a leader's write transactions go before they commit: entry `seq` with its changeset. An error rolls
// the transaction back; kConflict means this store may write nothing more (its on_fenced hook runs).
using Replicator = std::function<Status(int64_t seq, const std::string& changeset)>;

// SQLite's process-wide settings for a program that uses this store: call first thing in main(), before
// any thread uses SQLite (sqlite3_config's contract; a later call changes nothing). Turns SQLite's memory
// statistics off (nothing here reads them): with them on, every allocation inside SQLite takes one global
// mutex, which a standby applying the leader's log does for every row.
void configure_sqlite();

class SqliteStateStore final : public StateStore {
 public:
  // Opens (creating when missing) and migrates up to `target_version` (tests stop early to test upgrades).
  static Result<std::unique_ptr<SqliteStateStore>> open(const std::string& path, int target_version = -1);
  ~SqliteStateStore() override;
  SqliteStateStore(const SqliteStateStore&) = delete;
  SqliteStateStore& operator=(const SqliteStateStore&) = delete;

  int schema_version() const override { return version_; }
  Result<StoredState> load() override;
  // load() taking the jobs from `warm` (moved out of it) when it is complete and as many as the table's.
  Result<StoredState> load(WarmJobs& warm);
  Status commit(const WriteBatch& batch) override;
  Status commit_all(std::span<const WriteBatch* const> batches) override;
  Status sync() override;
  // fdatasync of the log file through a descriptor of its own (SQLite's file object is not to be shared
  // between threads), which it opens on first use and again if the file was replaced; the log's directory
  // is synced once per file opened, as SQLite does after creating the log.
  std::function<Status()> sync_elsewhere() override;
  // The checkpoints through `executor` instead of SQLite's own in the commit (a WAL hook replaces it).
  void checkpoint_on(Executor executor, std::function<void(const Error&)> failed) override;
  Status add_token(const TokenRecord& token) override;
  Result<std::optional<TokenRecord>> find_token(const std::string& hash) override;
  Result<std::vector<TokenRecord>> tokens() override;                       // sqlite_auth.cpp
  Result<std::vector<AuditRecord>> audit(const AuditQuery& query) override;  // sqlite_auth.cpp
  Result<std::vector<EventRecord>> events(const std::string& subject, int limit) override;
  Result<std::vector<MetricSample>> metrics(JobId job, int limit) override;
  Status put_node_key(const NodeKeyRecord& key) override;                            // sqlite_node_keys.cpp
  Result<std::optional<NodeKeyRecord>> find_node_key(const std::string& node) override;  // sqlite_node_keys.cpp

  // Epoch fencing (issue 30, controller high availability). The database keeps the highest leader epoch that
  // claimed it (table ha_epoch). fence(epoch, claim): fails (kConflict) when the stored epoch is newer than
  // `epoch`; with `claim`, stores `epoch`. From then on every commit re-reads the stored epoch inside its
  // transaction (under SQLite's write lock) and refuses to write when a newer leader has claimed the
  // database: `on_fenced` runs (the daemon ends itself) and the commit fails with kConflict. Without a
  // fence (epoch 0, the default) commits do not look.
  Status fence(int64_t epoch, bool claim);
  void set_on_fenced(std::function<void(const std::string&)> on_fenced) { on_fenced_ = std::move(on_fenced); }
  int64_t stored_epoch();

  // Replication (issue 46; sqlite_replication.cpp). With a replicator every write transaction (commits,
  // tokens, node keys) is recorded as a changeset of the replicated tables (all but schema_version, ha_epoch
  // and ha_log) and handed to it, numbered after the last entry this database holds, before it commits; the
  // number is kept in the same transaction (ha_log). Two connections to one database number one sequence
  // (the write lock orders them).
  void replicate_through(Replicator replicator);
  // A first leader's database that holds rows already (tokens made before the cluster started): hands them
  // all to the replicator as entry 1, so standbys that start empty get them. `scratch`: a path for an empty
  // database of the same schema to diff against (removed after). kConflict when entries were written before.
  Status replicate_existing(const std::string& scratch);
  // The number of the last entry this database wrote or applied; 0 for none.
  Result<int64_t> replicated_seq();
  // A standby's side: applies `entries` in one transaction; the first must follow replicated_seq(). Any
  // conflict (a row that is not as the entry expects) refuses them all: kConflict, nothing applied. With
  // `warm`, the jobs the entries change are read into it again (a job's spec, which never changes, is kept).
  Status apply_replicated(std::span<const ReplicatedEntry> entries, WarmJobs* warm = nullptr);
  // Every stored job into `warm`, which is then complete.
  Status warm_jobs(WarmJobs& warm);
  // A job's spec as the jobs table stores it, parsed (throws sql::SqlError when it does not parse).
  static jobs::JobSpec parse_stored_spec(JobId id, const std::string& text);
  // A consistent copy of the database at `db` written to `out` (a file of its own, not in WAL mode), read
  // through a connection of its own while others write: what a standby serves to a controller rebuilding.
  static Status snapshot_to(const std::string& db, const std::string& out);

 private:
  struct Statements;  // the commit path's statements, prepared once
  explicit SqliteStateStore(sqlite3* db);
  void migrate(int target_version);
  Result<StoredState> load_with(WarmJobs* warm);
  // Reads jobs `ids` into `warm` again (erased when gone); inside apply_replicated's transaction.
  void rewarm(const std::vector<JobId>& ids, WarmJobs& warm);
  void write(const WriteBatch& batch);
  // `body`'s writes in one transaction, fenced, recorded and replicated when a replicator is set.
  Status replicated_write(const std::function<void()>& body);
  // kConflict (and on_fenced) when a newer leader has claimed the database; inside a transaction.
  Status check_fence();
  static int log_committed(void* self, sqlite3* db, const char* name, int frames);  // the WAL hook

  sqlite3* db_;
  int version_ = 0;
  Durability mode_ = Durability::kSynced;  // the connection's synchronous setting: FULL, or NORMAL
  std::unique_ptr<Statements> statements_;  // after migrate(): prepared against the latest schema
  std::shared_ptr<LogSyncer> log_syncer_;   // sync_elsewhere()'s, made on its first call
  Executor checkpoint_executor_;            // checkpoint_on()'s
  std::shared_ptr<Checkpointer> checkpointer_;  // its connection, used on the executor only
  int64_t fence_epoch_ = 0;                     // 0: no fencing
  std::function<void(const std::string&)> on_fenced_;
  Replicator replicator_;
};

}  // namespace railyard::store
