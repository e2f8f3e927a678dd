// SqliteStateStore: its write-ahead log made durable: sync() on the store's thread, sync_elsewhere() on
// another connection, and the log's checkpoints handed to an executor (state_store.hpp).
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "scheduler/store/sqlite_store.hpp"
#include "scheduler/store/sqlite_util.hpp"

namespace railyard::store {
namespace {

// Frames in the write-ahead log at which a commit asks for a checkpoint (SQLite's automatic default).
constexpr int kCheckpointFrames = 1000;

}  // namespace

Status SqliteStateStore::sync() {
  // The log's file as SQLite opened it, synced the way SQLite syncs it at a FULL commit.
  sqlite3_file* wal = nullptr;
  if (sqlite3_file_control(db_, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) != SQLITE_OK || !wal ||
      !wal->pMethods)
    return ok();  // no log open: nothing was written through this connection
  if (const int rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL); rc != SQLITE_OK)
    return Error{ErrorCode::kUnavailable, std::string("syncing the write-ahead log: ") + sqlite3_errstr(rc)};
  return ok();
}

// The log file seen through a descriptor of its own: see SqliteStateStore::sync_elsewhere.
class LogSyncer {
 public:
  explicit LogSyncer(std::string path) : path_(std::move(path)) {}
  ~LogSyncer() {
    if (fd_ >= 0) ::close(fd_);
  }
  LogSyncer(const LogSyncer&) = delete;
  LogSyncer& operator=(const LogSyncer&) = delete;

  Status sync() {
    struct stat now {};
    if (::stat(path_.c_str(), &now) != 0) return failed("stat");  // gone: SQLite writes where this cannot see
    if (fd_ < 0 || now.st_ino != ino_ || now.st_dev != dev_) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) return failed("open");
      struct stat opened {};
      if (::fstat(fd_, &opened) != 0) return failed("fstat");
      ino_ = opened.st_ino;
      dev_ = opened.st_dev;
      const auto dir = std::filesystem::path(path_).parent_path();
      const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd < 0) return failed("open the directory of");
      const int rc = ::fsync(dfd);
      const int err = errno;
      ::close(dfd);
      errno = err;
      if (rc != 0) return failed("sync the directory of");
    }
    if (::fdatasync(fd_) != 0) return failed("fdatasync");
    return ok();
  }

 private:
  Status failed(const char* what) {
    const int err = errno;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    return Error{ErrorCode::kUnavailable, std::string("syncing the write-ahead log: ") + what + " " + path_ +
                                              ": " + std::strerror(err)};
  }
  std::string path_;
  int fd_ = -1;
  ino_t ino_ = 0;
  dev_t dev_ = 0;
};

std::function<Status()> SqliteStateStore::sync_elsewhere() {
  const char* db = sqlite3_db_filename(db_, "main");
  if (!db || !*db) return nullptr;  // in memory
  const char* wal = sqlite3_filename_wal(db);
  if (!wal || !*wal) return nullptr;
  if (!log_syncer_) log_syncer_ = std::make_shared<LogSyncer>(wal);
  return [syncer = log_syncer_] { return syncer->sync(); };
}

// A connection of its own to the database, for checkpoints on the executor's thread (SQLite connections are
// not shared between threads here: SQLITE_OPEN_NOMUTEX).
class Checkpointer {
 public:
  Checkpointer(std::string path, std::function<void(const Error&)> failed)
      : path_(std::move(path)), failed_(std::move(failed)) {}
  ~Checkpointer() { sqlite3_close(db_); }
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // PASSIVE: copies the frames no reader still needs into the database and syncs it; never waits for a lock,
  // and the writer goes on committing meanwhile (the next write transaction after a complete one starts the
  // log over).
  void run() {
    if (auto s = checkpoint(); !s && failed_) failed_(s.error());
    in_flight = false;
  }
  std::atomic<bool> in_flight{false};

 private:
  Status checkpoint() {
    if (!db_) {
      if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
          SQLITE_OK)
        return failed("open");
      sqlite3_busy_timeout(db_, 5000);
      // SQLite 3.40 opens the log on a connection's first read; a checkpoint before any does nothing.
      if (sqlite3_exec(db_, "SELECT 1 FROM sqlite_schema LIMIT 1", nullptr, nullptr, nullptr) != SQLITE_OK)
        return failed("first read");
    }
    const int rc = sqlite3_wal_checkpoint_v2(db_, "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) return failed("checkpoint");  // BUSY: another one runs
    return ok();
  }
  Status failed(const char* what) {
    Error e{ErrorCode::kUnavailable,
            "checkpoint of " + path_ + ": " + what + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory")};
    sqlite3_close(db_);
    db_ = nullptr;
    return e;
  }
  std::string path_;
  std::function<void(const Error&)> failed_;
  sqlite3* db_ = nullptr;
};

void SqliteStateStore::checkpoint_on(Executor executor, std::function<void(const Error&)> failed) {
  const char* path = sqlite3_db_filename(db_, "main");
  if (!executor || !path || !*path) return;  // in memory: no log
  checkpointer_ = std::make_shared<Checkpointer>(path, std::move(failed));
  checkpoint_executor_ = std::move(executor);
  sqlite3_wal_hook(db_, &SqliteStateStore::log_committed, this);  // SQLite's automatic checkpoint off
}

int SqliteStateStore::log_committed(void* self, sqlite3*, const char*, int frames) {
  auto& store = *static_cast<SqliteStateStore*>(self);
  if (frames < kCheckpointFrames || store.checkpointer_->in_flight.exchange(true)) return SQLITE_OK;
  store.checkpoint_executor_([c = store.checkpointer_] { c->run(); });
  return SQLITE_OK;
}

}  // namespace railyard::store
