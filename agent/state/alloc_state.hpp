// Per-allocation state: what an agent that restarts needs to find the workers it started and reattach to
// them. Kept in <state_dir>/allocs.journal (journal.hpp: one line per change, rewritten when mostly dead).
//
// Durability: not fsynced. The records exist to find living workers again, and workers do not outlive the
// machine: after an agent crash (or kill -9) every appended line is in the page cache, so a restarted agent
// reads each record whole; after a power loss or kernel crash every worker is gone too, so a record that is
// missing or stale is harmless (recover() drops those whose processes are dead). An fsync per launch cost a
// disk flush on the agent's only thread for nothing it can use.
//
// A record: {"job_id": 7, "alloc_id": "a7", "node": "node0", "started_unix_ms": ..., "deadline_unix_ms": 0,
//  "user": "alice", "gpus": [0, 1], "cgroups": [], "ranks": [{"rank": 0, "pid": 123, "pgid": 123, "start_ticks": 456,
//                           "stdout": ".../rank-0.out", "stderr": ".../rank-0.err"}]}
// Agents before the journal kept one file per allocation, <state_dir>/allocs/<alloc>.json; AllocStore reads
// those into the journal and deletes them, so an upgraded agent still adopts what the old one started.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "agent/state/journal.hpp"
#include "common/result.hpp"

namespace railyard::agent {

struct RankRecord {
  int rank = 0;
  pid_t pid = 0;
  pid_t pgid = 0;
  unsigned long long start_ticks = 0;  // /proc/<pid>/stat field 22: tells our process from a reused pid
  std::string stdout_path;
  std::string stderr_path;
  bool operator==(const RankRecord&) const = default;
};

struct AllocRecord {
  long long job_id = 0;
  std::string alloc_id;
  std::string node;
  long long started_unix_ms = 0;
  long long deadline_unix_ms = 0;  // 0 = no time limit
  // The allocation's cgroup, one directory per hierarchy (memory's first; agent/launch/cgroup.hpp); empty
  // = none. Older records' single "cgroup" path is read into it.
  std::vector<std::string> cgroups;
  std::vector<RankRecord> ranks;
  // Who the job runs as and its GPUs on this node: a restarted agent runs later remote launches (exec orders)
  // of an adopted allocation with these, never as root or with no GPUs. Records of older agents have none,
  // and such an allocation takes no exec order.
  std::string user;
  std::vector<int> gpus;
  bool operator==(const AllocRecord&) const = default;
};

struct Recovery {
  std::vector<AllocRecord> alive;    // some rank's process group still has living members
  std::vector<std::string> removed;  // alloc ids whose records were dropped (all dead, or unreadable)
};

// One node's allocation records. The node's Launcher (put) and Supervisor (remove) share one store.
class AllocStore {
 public:
  explicit AllocStore(const std::filesystem::path& state_dir);

  Status put(const AllocRecord& record);
  void remove(const std::string& alloc_id);
  std::vector<AllocRecord> records() const;  // in alloc id order; unreadable records are left out
  // The records a store opened on `state_dir` would hold, read without writing (tests, inspection).
  static std::vector<AllocRecord> read(const std::filesystem::path& state_dir);
  // Keeps allocations with a living process group, drops the others' records.
  Recovery recover();

  const std::filesystem::path& file() const { return journal_.file(); }

 private:
  Journal journal_;
};

// One record from its JSON form (the journal's, or an old agent's allocs/<alloc>.json file).
Result<AllocRecord> read_state(const std::filesystem::path& file);

}  // namespace railyard::agent
