#include "agent/launch/cgroup.hpp"

#include <sys/statfs.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

namespace railyard::agent {

namespace fs = std::filesystem;

std::optional<std::string> cgroup2_unusable(const fs::path& root) {
  struct statfs st {};
  if (statfs(root.c_str(), &st) != 0) return root.string() + " does not exist";
  if (static_cast<unsigned long>(st.f_type) != CGROUP2_SUPER_MAGIC)
    return root.string() + " is not a cgroup2 mount";
  if (access(root.c_str(), W_OK) != 0) return root.string() + " is not writable";
  return std::nullopt;
}

std::string cpu_max_value(double cpus) {
  constexpr long kPeriodUs = 100000;
  const long quota = std::lround(cpus * kPeriodUs);
  return std::to_string(quota < 1000 ? 1000 : quota) + " " + std::to_string(kPeriodUs);
}

namespace {

Status write_file(const fs::path& p, const std::string& value) {
  std::ofstream out(p);
  out << value;
  out.flush();
  if (!out) return internal_error("cannot write " + value + " to " + p.string());
  return ok();
}

}  // namespace

Result<fs::path> create_cgroup(const fs::path& root, const std::string& name, const ResourceLimits& limits) {
  std::error_code ec;
  const fs::path parent = root / "railyard";
  fs::create_directories(parent, ec);
  if (ec) return internal_error("cannot create " + parent.string() + ": " + ec.message());
  // Controllers must be enabled on every level above the group that uses them; failures are left to the
  // limit writes below, which name the file.
  (void)write_file(root / "cgroup.subtree_control", "+memory +cpu");
  (void)write_file(parent / "cgroup.subtree_control", "+memory +cpu");
  const fs::path group = parent / name;
  fs::create_directories(group, ec);
  if (ec) return internal_error("cannot create " + group.string() + ": " + ec.message());
  if (limits.memory_bytes)
    if (auto s = write_file(group / "memory.max", std::to_string(*limits.memory_bytes)); !s) return s.error();
  if (limits.cpus)
    if (auto s = write_file(group / "cpu.max", cpu_max_value(*limits.cpus)); !s) return s.error();
  return group;
}

void remove_cgroup(const fs::path& group) {
  std::error_code ec;
  fs::remove(group, ec);  // rmdir: a cgroup directory is removable once empty, its files are virtual
}

}  // namespace railyard::agent
