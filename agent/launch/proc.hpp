// Reading /proc: process state, process groups, liveness. Used by the supervisor (is a group empty?),
// recovery (is this pid still the process we started?) and telemetry (CPU time, RSS).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
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

std::optional<ProcStat> read_proc_stat(pid_t pid, const std::filesystem::path& proc = "/proc");
// VmRSS in bytes; 0 for zombies and kernel threads.
long long read_proc_rss(pid_t pid, const std::filesystem::path& proc = "/proc");

// Living (non-zombie) members of a process group.
std::vector<ProcStat> group_members(pid_t pgid, const std::filesystem::path& proc = "/proc");
bool group_alive(pid_t pgid);

// True while pid runs and is not a zombie; when start_ticks is non-zero it must also match, so a reused
// pid does not pass for the process we started.
bool process_alive(pid_t pid, unsigned long long start_ticks = 0);

}  // namespace railyard::agent
