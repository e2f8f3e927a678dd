// SqliteStateStore's replication (issue 46, controller high availability without shared storage): the leader's
// every write transaction is recorded with SQLite's session extension and handed, as one changeset, to the
// replicator (ha/replication.hpp writes it to etcd) before it commits; a standby applies the same changesets
// to its own database in the same order. The tables that say where a database stands (schema_version,
// ha_epoch, ha_log) are each database's own and never travel.
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "scheduler/store/sqlite_store.hpp"
#include "scheduler/store/sqlite_util.hpp"

namespace railyard::store {
namespace {

// The session's table filter: 1 for the tables whose rows replicate.
int replicated_table(void* /*ctx*/, const char* table) {
  for (const char* own : {"schema_version", "ha_epoch", "ha_log"})
    if (std::strcmp(table, own) == 0) return 0;
  return 1;
}

// Any difference between a changeset and the database it is applied to means the two histories differ: the
// whole apply is refused, never half-done.
int refuse_conflict(void* /*ctx*/, int /*kind*/, sqlite3_changeset_iter* /*it*/) {
  return SQLITE_CHANGESET_ABORT;
}

int64_t read_applied(sqlite3* db) {
  sql::Stmt q(db, "SELECT applied FROM ha_log");
  return q.step() ? q.int64(0) : 0;
}

void write_applied(sqlite3* db, int64_t seq) {
  sql::Stmt(db, "UPDATE ha_log SET applied = ?").bind(1, seq).run();
}

// The column of the jobs table's id, -1 when none. A changeset's columns are in the table's order, which both
// databases share (the same schema version).
int job_id_column(sqlite3* db) {
  sql::Stmt q(db, "SELECT cid FROM pragma_table_info('jobs') WHERE name = 'id'");
  return q.step() ? static_cast<int>(q.int64(0)) : -1;
}

// The id of every job a changeset inserts, updates or deletes, appended to `out`; false when the changeset
// cannot be read (the caller's copy of the jobs can no longer be trusted).
bool changed_jobs(int id_column, const std::string& changeset, std::vector<JobId>& out) {
  if (id_column < 0) return false;
  sqlite3_changeset_iter* it = nullptr;
  if (sqlite3changeset_start(&it, static_cast<int>(changeset.size()), const_cast<char*>(changeset.data())) !=
      SQLITE_OK)
    return false;
  while (sqlite3changeset_next(it) == SQLITE_ROW) {
    const char* table = nullptr;
    int columns = 0, op = 0, indirect = 0;
    if (sqlite3changeset_op(it, &table, &columns, &op, &indirect) != SQLITE_OK ||
        std::strcmp(table, "jobs") != 0 || id_column >= columns)
      continue;
    // An insert has only new values; an update or a delete has the key among its old ones.
    sqlite3_value* id = nullptr;
    const int rc = op == SQLITE_INSERT ? sqlite3changeset_new(it, id_column, &id)
                                       : sqlite3changeset_old(it, id_column, &id);
    if (rc == SQLITE_OK && id) out.push_back(sqlite3_value_int64(id));
  }
  return sqlite3changeset_finalize(it) == SQLITE_OK;
}

}  // namespace

// A session on the replicated tables from construction to changeset(); none when not replicating.
class ChangeRecorder {
 public:
  ChangeRecorder(sqlite3* db, bool on) {
    if (!on) return;
    if (sqlite3session_create(db, "main", &session_) != SQLITE_OK)
      throw sql::SqlError(std::string("recording changes: ") + sqlite3_errmsg(db));
    sqlite3session_table_filter(session_, replicated_table, nullptr);
    if (sqlite3session_attach(session_, nullptr) != SQLITE_OK) {
      sqlite3session_delete(session_);
      throw sql::SqlError("recording changes: cannot attach the tables");
    }
  }
  ~ChangeRecorder() {
    if (session_) sqlite3session_delete(session_);
  }
  ChangeRecorder(const ChangeRecorder&) = delete;
  ChangeRecorder& operator=(const ChangeRecorder&) = delete;

  // Records the changes that would turn `table` of database `from` into main's.
  int diff(const char* from, const std::string& table, char** err) {
    return sqlite3session_diff(session_, from, table.c_str(), err);
  }

  // The changes since construction, "" when none.
  std::string changeset() {
    if (!session_ || sqlite3session_isempty(session_)) return {};
    int n = 0;
    void* p = nullptr;
    if (sqlite3session_changeset(session_, &n, &p) != SQLITE_OK) throw sql::SqlError("recording changes: out of memory");
    std::string out(static_cast<const char*>(p), static_cast<size_t>(n));
    sqlite3_free(p);
    return out;
  }

 private:
  sqlite3_session* session_ = nullptr;
};

void SqliteStateStore::replicate_through(Replicator replicator) { replicator_ = std::move(replicator); }

Status SqliteStateStore::replicated_write(const std::function<void()>& body) {
  try {
    sql::Transaction tx(db_);
    if (auto s = check_fence(); !s) return s;
    ChangeRecorder recorder(db_, static_cast<bool>(replicator_));
    body();
    if (replicator_) {
      const std::string changes = recorder.changeset();
      if (!changes.empty()) {
        const int64_t seq = read_applied(db_) + 1;
        if (Status s = replicator_(seq, changes); !s) {
          // The leader's write was refused where it replicates (a newer leader, or a history that is not
          // this database's): nothing more may be written under this epoch.
          if (s.error().code == ErrorCode::kConflict && on_fenced_) on_fenced_(s.error().message);
          return s;  // the transaction rolls back: the database holds only what was replicated
        }
        // Should the commit below fail (a full disk), etcd holds entry `seq` and this database does not: the
        // next append of `seq` finds another entry there (kConflict), which ends this leader, and its restart
        // applies the entry from the log.
        write_applied(db_, seq);
      }
    }
    tx.commit();
    return ok();
  } catch (const std::exception& e) {
    return internal_error(std::string("state store: ") + e.what());
  }
}

Status SqliteStateStore::replicate_existing(const std::string& scratch) {
  if (!replicator_) return invalid("replicate_existing: no replicator");
  try {
    // An empty database of the same schema to diff against: every row here becomes an insert.
    std::filesystem::remove(scratch);
    if (auto empty = SqliteStateStore::open(scratch); !empty) return empty.error();
    struct Cleanup {
      sqlite3* db;
      std::string path;
      ~Cleanup() {
        sqlite3_exec(db, "DETACH DATABASE seed", nullptr, nullptr, nullptr);
        std::error_code ec;
        for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix, ec);
      }
    } cleanup{db_, scratch};
    sql::Stmt(db_, "ATTACH DATABASE ? AS seed").bind(1, scratch).run();
    sql::Transaction tx(db_);
    if (read_applied(db_) != 0) return Error{ErrorCode::kConflict, "this database already holds replicated entries"};
    std::vector<std::string> tables;
    {
      sql::Stmt q(db_, "SELECT name FROM main.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
      while (q.step()) tables.push_back(q.text(0));
    }
    ChangeRecorder recorder(db_, true);
    for (const auto& t : tables) {
      if (!replicated_table(nullptr, t.c_str())) continue;
      char* err = nullptr;
      if (recorder.diff("seed", t, &err) != SQLITE_OK) {
        std::string why = err ? err : "unknown";
        sqlite3_free(err);
        throw sql::SqlError("replicating table " + t + ": " + why);
      }
    }
    const std::string changes = recorder.changeset();
    if (changes.empty()) return ok();
    if (Status s = replicator_(1, changes); !s) {
      if (s.error().code == ErrorCode::kConflict && on_fenced_) on_fenced_(s.error().message);
      return s;
    }
    write_applied(db_, 1);
    tx.commit();
    return ok();
  } catch (const std::exception& e) {
    return internal_error(std::string("state store: ") + e.what());
  }
}

Result<int64_t> SqliteStateStore::replicated_seq() {
  try {
    return read_applied(db_);
  } catch (const std::exception& e) {
    return internal_error(std::string("state store: ") + e.what());
  }
}

Status SqliteStateStore::apply_replicated(std::span<const ReplicatedEntry> entries, WarmJobs* warm) {
  if (entries.empty()) return ok();
  try {
    sql::Transaction tx(db_);
    int64_t applied = read_applied(db_);
    std::vector<JobId> changed;  // the jobs the entries insert, update or delete
    const int id_column = warm ? job_id_column(db_) : -1;
    for (const auto& e : entries) {
      if (e.seq != applied + 1)
        return Error{ErrorCode::kConflict, "replicated entry " + std::to_string(e.seq) + " does not follow " +
                                               std::to_string(applied) + ", the last this database applied"};
      // No savepoint of its own: a conflict aborts the apply, and this transaction rolls back as a whole.
      const int rc = sqlite3changeset_apply_v2(db_, static_cast<int>(e.changeset.size()),
                                               const_cast<char*>(e.changeset.data()), nullptr, refuse_conflict,
                                               nullptr, nullptr, nullptr, SQLITE_CHANGESETAPPLY_NOSAVEPOINT);
      if (rc != SQLITE_OK)
        return Error{ErrorCode::kConflict, "replicated entry " + std::to_string(e.seq) +
                                               " does not apply to this database (" + sqlite3_errstr(rc) +
                                               "): its history differs from the leader's"};
      if (warm && !changed_jobs(id_column, e.changeset, changed)) *warm = {};  // not complete: the load reads
      applied = e.seq;
    }
    write_applied(db_, applied);
    if (warm) rewarm(changed, *warm);  // before the commit: no other writer between
    tx.commit();
    return ok();
  } catch (const std::exception& e) {
    if (warm) *warm = {};  // it may hold rows of the transaction that rolled back
    return internal_error(std::string("state store: ") + e.what());
  }
}

Status SqliteStateStore::snapshot_to(const std::string& db, const std::string& out) {
  sqlite3* conn = nullptr;
  if (sqlite3_open_v2(db.c_str(), &conn, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    std::string why = conn ? sqlite3_errmsg(conn) : "out of memory";
    sqlite3_close(conn);
    return Error{ErrorCode::kUnavailable, db + ": " + why};
  }
  try {
    sqlite3_busy_timeout(conn, 5000);
    // The copy holds node keys and token hashes: an empty file of mode 0600 first (VACUUM INTO writes into
    // an empty file as it finds it), so it is never readable by others.
    std::error_code ec;
    std::filesystem::remove(out, ec);
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) throw sql::SqlError("cannot create " + out);
    ::close(fd);
    sql::Stmt(conn, "VACUUM INTO ?").bind(1, out).run();  // one read transaction: a consistent copy
    sqlite3_close(conn);
    return ok();
  } catch (const std::exception& e) {
    sqlite3_close(conn);
    return internal_error(std::string("snapshot of ") + db + ": " + e.what());
  }
}

}  // namespace railyard::store
