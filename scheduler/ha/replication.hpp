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
// A standby takes an entry once it has read all its parts; parts a deposed leader left without their last
// are deleted by the next leader before it writes (clear_after).
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
#include <thread>
#include <vector>

#include "common/result.hpp"

namespace railyard::ha {

class EtcdClient;

inline constexpr size_t kPartBytes = 1'000'000;  // base64 and JSON bring it to ~1.34 MB per request

struct LogEntry {
  int64_t seq = 0;
  std::string changeset;
};

struct LogOptions {
  std::vector<std::string> endpoints;
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

// A standby's thread: reads the log from `applied` on and hands each run of entries to `apply` (which
// stores them), every `poll` while there is nothing new; publishes the last applied entry under
// applied/<name>. A failed apply stops it (logged; applied() stays where it was).
class LogFollower {
 public:
  using Apply = std::function<Status(std::span<const LogEntry>)>;
  LogFollower(LogOptions options, std::string name, int64_t applied, Apply apply,
              std::chrono::milliseconds poll = std::chrono::milliseconds(50));
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
  std::atomic<int64_t> applied_;
  int64_t published_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::string failure_;
  std::thread thread_;
};

}  // namespace railyard::ha
