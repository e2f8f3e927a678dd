// Per-allocation process telemetry without NVML: CPU time and resident memory of every living process
// in the allocation's process groups (grandchildren included), from /proc/<pid>/stat and /status.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <vector>

namespace railyard::agent {

class ProcessTable;

struct ProcessTelemetry {
  double cpu_seconds = 0;  // user + system, summed
  long long rss_bytes = 0;
  int processes = 0;
};

// From a scan already made (the agent shares one per tick between every allocation): reads only the
// members' /proc/<pid>/status for their RSS.
ProcessTelemetry sample_groups(const std::vector<pid_t>& pgids, const ProcessTable& table,
                               const std::filesystem::path& proc = "/proc");
// Scans /proc itself.
ProcessTelemetry sample_groups(const std::vector<pid_t>& pgids, const std::filesystem::path& proc = "/proc");

}  // namespace railyard::agent
