#include "agent/streams/telemetry.hpp"

#include <unistd.h>

#include <algorithm>

#include "agent/launch/proc.hpp"

namespace railyard::agent {

ProcessTelemetry sample_groups(const std::vector<pid_t>& pgids, const ProcessTable& table,
                               const std::filesystem::path& proc) {
  ProcessTelemetry t;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::vector<pid_t> groups = pgids;
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());  // a group counts once
  for (pid_t g : groups) {
    for (const ProcStat& st : table.members(g)) {
      t.cpu_seconds += static_cast<double>(st.utime + st.stime) / ticks;
      t.rss_bytes += read_proc_rss(st.pid, proc);
      ++t.processes;
    }
  }
  return t;
}

ProcessTelemetry sample_groups(const std::vector<pid_t>& pgids, const std::filesystem::path& proc) {
  return sample_groups(pgids, ProcessTable::scan(proc), proc);
}

}  // namespace railyard::agent
