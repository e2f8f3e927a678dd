// Shared by the cgroup drivers (agent/launch/cgroup_v1.cpp, cgroup_v2.cpp); not part of the agent's API.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "common/result.hpp"

namespace railyard::agent::cgroup_detail {

// Writes one value to a control file; the error names the file and the kernel's reason.
Status write_control(const std::filesystem::path& file, const std::string& value);
// The first line of a control file, or nullopt.
std::optional<std::string> read_control(const std::filesystem::path& file);
// The number after `key ` in a "key value" per line file (memory.events, memory.oom_control).
std::optional<long long> keyed_value(const std::filesystem::path& file, const std::string& key);
// mkdir -p; the error names the directory.
Status make_dir(const std::filesystem::path& dir);
// parent/name in each parent (one per hierarchy), or name.1, .2, ... where any of them is taken: a group
// is never shared by two allocations in any hierarchy (one agent process can host several emulated nodes,
// several agents can share a parent, a removed group's sibling in another hierarchy may linger), since
// removing a group kills what is in it.
Result<std::vector<std::filesystem::path>> make_fresh_dirs(const std::vector<std::filesystem::path>& parents,
                                                           const std::string& name);

}  // namespace railyard::agent::cgroup_detail
