#include "agent/launch/cgroup.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "agent/launch/cgroup_internal.hpp"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

namespace railyard::agent {

namespace fs = std::filesystem;
using namespace cgroup_detail;

namespace cgroup_detail {

Status write_control(const fs::path& file, const std::string& value) {
  std::ofstream out(file);
  out << value;
  out.flush();
  if (!out)
    return internal_error("cannot write '" + value + "' to " + file.string() + ": " + std::strerror(errno));
  return ok();
}

std::optional<std::string> read_control(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<long long> keyed_value(const fs::path& file, const std::string& key) {
  std::ifstream in(file);
  std::string k;
  long long v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return std::nullopt;
}

Status make_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return internal_error("cannot create " + dir.string() + ": " + ec.message());
  return ok();
}

Result<std::vector<fs::path>> make_fresh_dirs(const std::vector<fs::path>& parents, const std::string& name) {
  for (const auto& p : parents)
    if (auto s = make_dir(p); !s) return s.error();
  for (int n = 0; n < 1000; ++n) {
    const std::string leaf = n == 0 ? name : name + "." + std::to_string(n);
    std::vector<fs::path> made;
    int err = 0;
    for (const auto& p : parents) {
      if (mkdir((p / leaf).c_str(), 0755) != 0) {
        err = errno;
        break;
      }
      made.push_back(p / leaf);
    }
    if (made.size() == parents.size()) return made;
    for (const auto& d : made) rmdir(d.c_str());
    if (err != EEXIST)
      return internal_error("cannot create " + (parents[made.size()] / leaf).string() + ": " +
                            std::strerror(err));
  }
  return internal_error("no free group name for " + name + " under " + parents.front().string());
}

}  // namespace cgroup_detail

std::string cpu_max_value(double cpus) {
  constexpr long kPeriodUs = 100000;
  const long quota = std::lround(cpus * kPeriodUs);
  return std::to_string(quota < 1000 ? 1000 : quota) + " " + std::to_string(kPeriodUs);
}

namespace {

Error unavailable(std::string message) { return {ErrorCode::kUnavailable, std::move(message)}; }

unsigned long fs_type(const fs::path& p) {
  struct statfs st {};
  return statfs(p.c_str(), &st) == 0 ? static_cast<unsigned long>(st.f_type) : 0;
}

// /proc/self/cgroup: "hierarchy-id:controller,list:path"; v2 is "0::path". Keyed by each controller
// name ("" for v2), valued by (the comma list as mounted, the path).
std::map<std::string, std::pair<std::string, std::string>> memberships(const fs::path& file) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string list = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (list.empty()) out[""] = {"", path};
    std::stringstream ss(list);
    for (std::string c; std::getline(ss, c, ',');) out[c] = {list, path};
  }
  return out;
}

fs::path relative(const std::string& path) { return fs::path(path).relative_path(); }

Result<std::unique_ptr<CgroupDriver>> try_v2(const CgroupSetup& s, const fs::path& mount,
                                             const std::string& own) {
  const auto controllers = read_control(mount / "cgroup.controllers").value_or("");
  if (controllers.find("memory") == std::string::npos)
    return unavailable(mount.string() + " is cgroup2 without the memory controller (it is bound to v1)");
  if (access(mount.c_str(), W_OK) != 0) return unavailable(mount.string() + " is not writable");
  const fs::path parent = mount / relative(s.parent.empty() ? own : s.parent);
  // The kernel refuses controllers below a non-root group that holds processes (EBUSY): the agent's own
  // group usually does, so say how to give it one that does not instead of failing every launch.
  if (auto made = make_dir(parent); !made) return unavailable(made.error().message);
  if (auto on = write_control(parent / "cgroup.subtree_control", "+memory"); !on)
    return unavailable(on.error().message +
                       " (a group holding processes cannot delegate controllers: run the agent in a leaf "
                       "group, e.g. systemd DelegateSubgroup=agent, and pass --cgroup-parent)");
  return make_cgroup_v2(parent, s.dev);
}

Result<std::unique_ptr<CgroupDriver>> try_v1(
    const CgroupSetup& s, const std::map<std::string, std::pair<std::string, std::string>>& m) {
  std::vector<std::pair<std::string, fs::path>> parents;
  for (const std::string c : {"memory", "cpu", "pids", "devices"}) {
    auto it = m.find(c);
    if (it == m.end()) continue;
    fs::path mount = s.root / it->second.first;  // "cpu,cpuacct" (Debian also links "cpu" to it)
    if (fs_type(mount) != CGROUP_SUPER_MAGIC) mount = s.root / c;
    if (fs_type(mount) != CGROUP_SUPER_MAGIC || access(mount.c_str(), W_OK) != 0) {
      if (c == "memory") return unavailable(mount.string() + " is not a writable cgroup v1 hierarchy");
      continue;
    }
    parents.emplace_back(c, mount / relative(s.parent.empty() ? it->second.second : s.parent));
  }
  if (parents.empty() || parents.front().first != "memory")
    return unavailable("no cgroup v1 memory hierarchy under " + s.root.string());
  return make_cgroup_v1(std::move(parents), s.dev);
}

}  // namespace

Result<std::unique_ptr<CgroupDriver>> detect_cgroup_driver(const CgroupSetup& s) {
  if (fs_type(s.root) == 0) return unavailable(s.root.string() + " does not exist");
  const auto m = memberships(s.self_cgroup);
  const std::string own_v2 = m.count("") ? m.at("").second : "/";
  if (fs_type(s.root) == CGROUP2_SUPER_MAGIC) return try_v2(s, s.root, own_v2);
  // Hybrid: v1 controllers under root, cgroup2 at root/unified (usually without memory, then v1 it is).
  if (fs_type(s.root / "unified") == CGROUP2_SUPER_MAGIC) {
    auto v2 = try_v2(s, s.root / "unified", own_v2);
    if (v2 || !m.count("memory")) return v2;
  }
  if (!m.count("memory"))
    return unavailable("the agent is in no memory cgroup (" + s.self_cgroup.string() + ")");
  return try_v1(s, m);
}

long long cgroup_oom_kills(const std::vector<std::string>& dirs) {
  long long n = 0;
  for (const auto& d : dirs) {
    if (auto v = keyed_value(fs::path(d) / "memory.events", "oom_kill")) n += *v;
    if (auto v = keyed_value(fs::path(d) / "memory.oom_control", "oom_kill")) n += *v;
  }
  return n;
}

bool cgroup_peak_reached_limit(const std::vector<std::string>& dirs) {
  const auto limit = cgroup_memory_limit(dirs);
  if (!limit) return false;
  for (const auto& d : dirs)
    for (const char* f : {"memory.peak", "memory.max_usage_in_bytes"})
      if (auto v = read_control(fs::path(d) / f)) {
        constexpr long long kSlack = 1 << 20;  // charges are refused within a few pages of the limit
        return std::strtoll(v->c_str(), nullptr, 10) + kSlack >= *limit;
      }
  return false;
}

std::optional<long long> cgroup_memory_limit(const std::vector<std::string>& dirs) {
  for (const auto& d : dirs) {
    for (const char* f : {"memory.max", "memory.limit_in_bytes"}) {
      auto v = read_control(fs::path(d) / f);
      if (!v) continue;
      if (*v == "max") return std::nullopt;
      char* end = nullptr;
      const long long bytes = std::strtoll(v->c_str(), &end, 10);
      if (end == v->c_str()) return std::nullopt;
      // v1 reports "unlimited" as the largest page-aligned long
      return bytes >= (1LL << 62) ? std::nullopt : std::optional<long long>(bytes);
    }
  }
  return std::nullopt;
}

namespace {

// Child groups first (a container engine makes its own below the allocation's: --cgroup-parent), so each
// directory is empty of groups when its turn comes.
void groups_below(const fs::path& dir, std::vector<fs::path>& out) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec)) groups_below(it->path(), out);
  out.push_back(dir);
}

}  // namespace

bool remove_cgroup(const std::vector<std::string>& dirs) {
  std::vector<fs::path> all;
  for (const auto& d : dirs) groups_below(d, all);
  for (const auto& d : all) {
    std::ifstream procs(d / "cgroup.procs");
    for (pid_t pid = 0; procs >> pid;)
      if (pid > 1) kill(pid, SIGKILL);
  }
  bool gone = true;
  for (const auto& d : all)  // a cgroup directory goes once empty; its files are virtual
    if (rmdir(d.c_str()) != 0 && errno != ENOENT) gone = false;
  return gone;
}

}  // namespace railyard::agent
