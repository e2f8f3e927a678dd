// Reading /proc: process state, process groups, liveness. Used by the supervisor (is a group empty?),
// recovery (is this pid still the process we started?) and telemetry (CPU time, RSS).
//
// A scan of /proc reads every process's stat file (hundreds of opens on a busy node), so the agent makes
// at most one per supervision tick, shared by every allocation of every node it hosts (GroupLiveness),
// and only when kill(-pgid, 0) cannot answer alone.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace railyard::agent {

struct ProcStat {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;
  char state = '?';              // R, S, D, Z, T, ...
  unsigned long long utime = 0;  // clock ticks
  unsigned long long stime = 0;
  unsigned long long start_ticks = 0;  // since boot; with pid, identifies a process across pid reuse
};

// The whole of a small /proc file of `pid` (stat, status, cmdline), or nullopt when it cannot be read, e.g.
// because the process exited meanwhile (read() then fails with ESRCH, which std::ifstream turns into an
// exception). Never throws.
std::optional<std::string> read_proc_file(pid_t pid, const char* name,
                                          const std::filesystem::path& proc = "/proc");
std::optional<ProcStat> read_proc_stat(pid_t pid, const std::filesystem::path& proc = "/proc");
// VmRSS in bytes; 0 for zombies and kernel threads.
long long read_proc_rss(pid_t pid, const std::filesystem::path& proc = "/proc");

// Every process of one /proc scan, by process group: the living (non-zombie) members, and the groups
// that had zombies only.
class ProcessTable {
 public:
  static ProcessTable scan(const std::filesystem::path& proc = "/proc");
  const std::vector<ProcStat>& members(pid_t pgid) const;  // living members; empty when none
  // The group had a process at the scan (living or zombie): a group not seen at all may be newer.
  bool seen(pid_t pgid) const { return groups_.count(pgid) > 0 || zombie_only_.count(pgid) > 0; }

 private:
  std::unordered_map<pid_t, std::vector<ProcStat>> groups_;
  std::unordered_set<pid_t> zombie_only_;
};

// "Does process group G still have a living (non-zombie) member?" for any number of groups, with at most
// one /proc scan between two refresh() calls:
//  - kill(-G, 0) fails with ESRCH: no process at all is in G (the usual answer: the supervisor reaps its
//    ranks with waitpid, so a finished group disappears). No scan.
//  - otherwise G exists but may hold zombies only (processes not yet reaped by their parent): the scan
//    decides, made once and shared by every group asked until the next refresh(). A group the scan did not
//    see (created after it) counts as alive: the next tick asks again.
// A zombie-only group is not alive: the supervisor needs living processes to wait for or SIGKILL, and a
// zombie is gone once its parent (the agent, as subreaper, or init) reaps it.
// Pid reuse: a group id is a pid, and the kernel does not hand out a pid still used as a group id, so G
// cannot be reused while any member lives; callers check start_ticks for single processes
// (process_alive). Not thread safe: one per supervision loop.
class GroupLiveness {
 public:
  explicit GroupLiveness(std::filesystem::path proc = "/proc") : proc_(std::move(proc)) {}
  bool alive(pid_t pgid);
  const ProcessTable& table();  // this refresh's scan, made now if there is none yet
  void refresh() { table_.reset(); }
  int scans() const { return scans_; }  // /proc scans made so far

 private:
  std::filesystem::path proc_;
  std::optional<ProcessTable> table_;
  int scans_ = 0;
};

// One-off questions (each may scan /proc): living members of a group; GroupLiveness::alive.
std::vector<ProcStat> group_members(pid_t pgid, const std::filesystem::path& proc = "/proc");
bool group_alive(pid_t pgid);

// True while pid runs and is not a zombie; when start_ticks is non-zero it must also match, so a reused
// pid does not pass for the process we started.
bool process_alive(pid_t pid, unsigned long long start_ticks = 0);


}  // namespace railyard::agent
