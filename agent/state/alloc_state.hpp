// Per-allocation state files: <state_dir>/allocs/<alloc>.json, written atomically (temp file, rename), so
// an agent that restarts finds the workers it started and reattaches to them.
//
// Durability: the files are not fsynced. They exist to find living workers again, and workers do not
// outlive the machine: after an agent crash (or kill -9) the written file is in the page cache and the
// rename is atomic, so a restarted agent reads the whole record or none; after a power loss or kernel
// crash every worker is gone too, so a file that is missing, empty or stale is harmless (recover()
// deletes unreadable files and those whose processes are dead). An fsync per launch cost a disk flush on
// the agent's only thread for nothing it can use.
//
// {"job_id": 7, "alloc_id": "a7", "node": "node0", "started_unix_ms": ..., "deadline_unix_ms": 0,
//  "cgroup": "", "ranks": [{"rank": 0, "pid": 123, "pgid": 123, "start_ticks": 456,
//                           "stdout": ".../rank-0.out", "stderr": ".../rank-0.err"}]}
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

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
  std::string cgroup;              // "" = none
  std::vector<RankRecord> ranks;
  bool operator==(const AllocRecord&) const = default;
};

std::filesystem::path state_file(const std::filesystem::path& state_dir, const std::string& alloc_id);
Status write_state(const std::filesystem::path& state_dir, const AllocRecord& record);
Result<AllocRecord> read_state(const std::filesystem::path& file);
void remove_state(const std::filesystem::path& state_dir, const std::string& alloc_id);

struct Recovery {
  std::vector<AllocRecord> alive;    // some rank's process group still has living members
  std::vector<std::string> removed;  // alloc ids whose files were deleted (all dead, or unreadable)
};

// Reads every state file; keeps allocations with a living process group, deletes the others' files.
Recovery recover(const std::filesystem::path& state_dir);

}  // namespace railyard::agent
