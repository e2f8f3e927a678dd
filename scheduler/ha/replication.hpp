// The leader's state replicated through etcd (issue 46): every write transaction of the leader's database is
// one entry of a log in etcd, numbered 1, 2, ... (store/sqlite_replication.cpp records each as an SQLite
// changeset). The leader appends an entry before its transaction commits, guarded by its term (the leader
// key's create revision, the epoch), so a deposed leader's write fails inside etcd; standbys read the log in
// order and apply it to their own databases. No shared file system.
//
// Keys, under the elector's prefix (default /railyard):
//   log/<seq, 20 digits>.<part, 5 digits>.<parts, 5 digits>   an entry's changeset, in parts of at most
//                                                               kPartBytes (etcd refuses requests over
//                                                               1.5 MiB); the last part is written last
//   applied/<name>                                              the last entry that controller applied
//   log-base                                                    entries up to this one are trimmed away
//                                                               (absent: none)
// A standby takes an entry once it has read all its parts; parts a deposed leader left without their last
// are deleted by the next leader before it writes (clear_after). The leader trims the log (LogTrimmer): a
// controller whose database is older than log-base rebuilds from another controller's snapshot.
//
// Thread safety: none; a LogWriter or LogReader per thread (each has its own etcd client).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/net/http_client.hpp"
#include "common/result.hpp"

namespace railyard::ha {

class EtcdClient;

inline constexpr size_t kPartBytes = 1'000'000;  // base64 and JSON bring it to ~1.34 MB per request
// The largest changeset an entry may inflate to (a bigger claim is refused before anything is allocated).
inline constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

// An entry as etcd stores it: the changeset deflated (JSON specs and names compress ~10x, and etcd's cost per
// transaction grows with its bytes: three members each write it), behind a one-byte tag; decode_entry
// undoes it, and refuses what it cannot read.
std::string encode_entry(const std::string& changeset);
Result<std::string> decode_entry(std::string_view stored);

struct LogEntry {
  int64_t seq = 0;
  std::string changeset;
};

struct LogOptions {
  std::vector<std::string> endpoints;
  net::ClientTls tls;  // https:// endpoints: the CA ("" = the system's trust store), a client certificate
  std::string prefix = "/railyard";
  std::chrono::milliseconds timeout{2000};  // one etcd request (each member tried once per call)
};

std::string log_key(const std::string& prefix, int64_t seq, int part, int parts);

class LogWriter {
 public:
  // Appends under the term `epoch` (the leader key's create revision).
  LogWriter(LogOptions options, int64_t epoch);
  ~LogWriter();
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  // Writes entry `seq`. kConflict: this term is over (another leader key), or the log already holds a
  // different entry `seq` (this database is behind the log); kUnavailable: etcd did not answer (whether the
  // entry is in etcd is not known: a later append of the same `seq` finds out).
  Status append(int64_t seq, const std::string& changeset);
  // Deletes what the log holds past entry `applied` (parts a deposed leader did not finish), under this term.
  Status clear_after(int64_t applied);

 private:
  LogOptions options_;
  int64_t epoch_;
  std::unique_ptr<EtcdClient> etcd_;
};

// How much of the log the leader keeps (LogTrimmer).
struct TrimOptions {
  // Entries kept behind the leader's head even when every live controller has applied them: a controller
  // that restarts within this many entries catches up from the log, without a snapshot.
  int64_t keep = 20000;
  // A live controller further behind than this loses its entries (and rebuilds from a snapshot): one
  // stalled standby cannot fill etcd's quota.
  int64_t keep_max = 80000;
  std::chrono::milliseconds every{5000};
  // etcd's database file is defragmented when it is this much larger than what it uses.
  int64_t defrag_slack_bytes = int64_t{256} << 20;
};

// The entry up to which the log may be trimmed: the least of what the live controllers other than `self`
// applied (`applied`: name -> entry; a live one that published nothing counts 0) and head - keep, but at
// least head - keep_max.
int64_t trim_floor(int64_t head, const std::vector<std::string>& live, const std::string& self,
                   const std::vector<std::pair<std::string, int64_t>>& applied, const TrimOptions& options);

class LogReader {
 public:
  explicit LogReader(LogOptions options);
  ~LogReader();
  LogReader(const LogReader&) = delete;
  LogReader& operator=(const LogReader&) = delete;

  // The complete entries after `after`, in order, at most `max_entries` (all read at one etcd revision);
  // none when the log holds nothing complete past it. kNotFound when the log no longer starts at or before
  // after + 1 (trimmed: this database needs a snapshot).
  Result<std::vector<LogEntry>> read(int64_t after, size_t max_entries);

 private:
  LogOptions options_;
  std::unique_ptr<EtcdClient> etcd_;
};

// The leader's thread: every `every`, trims the log to trim_floor() (log-base and the delete in one
// transaction under the term), compacts etcd's history to that revision, and defragments a member whose file
// has grown defrag_slack_bytes past what it uses.
class LogTrimmer {
 public:
  LogTrimmer(LogOptions options, int64_t epoch, std::string self, std::function<int64_t()> head, TrimOptions trim);
  ~LogTrimmer();
  LogTrimmer(const LogTrimmer&) = delete;
  LogTrimmer& operator=(const LogTrimmer&) = delete;

  // One round, on the caller's thread (the thread runs one per `every`): the log's base after it.
  Result<int64_t> trim_once();
  void stop();

 private:
  LogOptions options_;
  int64_t epoch_;
  std::string self_;
  std::function<int64_t()> head_;
  TrimOptions trim_;
  std::unique_ptr<EtcdClient> etcd_;  // used by trim_once() on one thread at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// The log's base (log-base): entries up to it may be gone.
Result<int64_t> log_base(EtcdClient& etcd, const std::string& prefix);

// A standby's thread: reads the log from `applied` on and hands each run of entries to `apply` (which
// stores them), every `poll` while there is nothing new; publishes the last applied entry under
// applied/<name>. A failed apply stops it (logged; applied() stays where it was).
class LogFollower {
 public:
  using Apply = std::function<Status(std::span<const LogEntry>)>;
  // `failed` hears of the error that stopped it (on its thread); `first` runs on its thread before it reads
  // the log (a standby warms its copy of the state there).
  LogFollower(LogOptions options, std::string name, int64_t applied, Apply apply,
              std::chrono::milliseconds poll = std::chrono::milliseconds(50),
              std::function<void(const Error&)> failed = {}, std::function<void()> first = {});
  ~LogFollower();  // stop()
  LogFollower(const LogFollower&) = delete;
  LogFollower& operator=(const LogFollower&) = delete;

  void stop();
  // After stop(): reads and applies until the log holds nothing more, on the caller's thread (a new leader
  // before it writes: no other leader can append then).
  Status catch_up();
  int64_t applied() const { return applied_.load(); }
  // The error that stopped it, "" while it runs.
  std::string failure() const;

 private:
  void run();
  // One read and apply; the entries applied, or the error.
  Result<size_t> step(LogReader& reader);
  void publish(EtcdClient& etcd);

  LogOptions options_;
  std::string name_;
  Apply apply_;
  std::chrono::milliseconds poll_;
  std::function<void(const Error&)> failed_;
  std::atomic<int64_t> applied_;
  int64_t published_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::string failure_;
  std::thread thread_;
};

// Snapshots, for a controller whose database is older than the log's base (or gone): a copy of another
// controller's database, served by standbys at GET /api/v1/ha/snapshot to whoever shows the snapshot key.
// The key is random, made by the first controller that asks and kept in etcd (<prefix>/snapshot-key): who
// can read etcd can read the state anyway (the log holds it).
Result<std::string> snapshot_key(const LogOptions& options);
// A snapshot from the first registered controller other than `self` that serves one: the database file.
Result<std::string> fetch_snapshot(const LogOptions& options, const std::string& self, const std::string& key);

}  // namespace railyard::ha
