#include "agent/streams/telemetry.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "agent/launch/proc.hpp"

namespace railyard::agent {

ProcessTelemetry sample_groups(const std::vector<pid_t>& pgids, const std::filesystem::path& proc) {
  ProcessTelemetry t;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::atoi(name.c_str()));
    auto st = read_proc_stat(pid, proc);
    if (!st || st->state == 'Z' || std::find(pgids.begin(), pgids.end(), st->pgrp) == pgids.end()) continue;
    t.cpu_seconds += static_cast<double>(st->utime + st->stime) / ticks;
    t.rss_bytes += read_proc_rss(pid, proc);
    ++t.processes;
  }
  return t;
}

}  // namespace railyard::agent
