// cgroup v2 limits for one allocation: <root>/railyard/<job>-<alloc> with memory.max and cpu.max.
// Optional by design: on cgroup v1 hosts, in containers with a read-only or hybrid /sys/fs/cgroup, or
// without limits in the request, the launcher skips cgroups and logs why; the job still runs.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "agent/launch/request.hpp"
#include "common/result.hpp"

namespace railyard::agent {

// Empty when root is a writable cgroup2 mount; otherwise the reason it cannot be used.
std::optional<std::string> cgroup2_unusable(const std::filesystem::path& root);

// Creates the group (and railyard/ with the controllers enabled) and writes the limits. Does not check
// the mount: callers ask cgroup2_unusable() first (tests point root at a plain directory).
Result<std::filesystem::path> create_cgroup(const std::filesystem::path& root, const std::string& name,
                                            const ResourceLimits& limits);

// "max 100000" style cpu.max for a number of cores: quota per 100 ms period.
std::string cpu_max_value(double cpus);

// Removes an (empty) allocation group; harmless when it is gone.
void remove_cgroup(const std::filesystem::path& group);

}  // namespace railyard::agent
