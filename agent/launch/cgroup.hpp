// Per-allocation control groups: one group per allocation on a node, named <job>-<alloc>-<node> (".N" added
// when taken, so no two allocations ever share one), under
// <parent>/railyard/ in each hierarchy the mechanism uses, with the allocation's limits written before any
// worker joins (workers join between fork and exec, so no job code runs outside its group).
//
//   detect_cgroup_driver(setup) --> CgroupV2Driver  (unified hierarchy: memory.max, memory.swap.max,
//                               |                    cpu.max / cpu.weight, pids.max, BPF device filter)
//                               --> CgroupV1Driver  (memory, cpu, pids, devices hierarchies:
//                                                    memory.limit_in_bytes + memsw, cpu.cfs_quota_us /
//                                                    cpu.shares, pids.max, devices.deny per foreign GPU)
//   driver.create(name, limits, gpus) --> the group's directories (recorded in the allocation's state file)
//   cgroup_oom_kills(dirs), cgroup_memory_limit(dirs), remove_cgroup(dirs): by path, for any mechanism,
//   so the Supervisor and a restarted agent need no driver.
//
// The parent is the agent's own group (from /proc/self/cgroup) unless configured, so an agent inside a
// container or a systemd unit with Delegate=yes stays inside what it was given. Optional by design: where
// no hierarchy is usable (not root, read-only mount, no memory controller) detection says why, the
// launcher refuses jobs (isolation required, the default) or logs it and runs them without limits
// (--isolation best-effort).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/launch/request.hpp"
#include "common/result.hpp"

namespace railyard::agent {

// What a job gets when the cgroup its allocation is owed (limits, GPU device rules) cannot be made.
enum class IsolationMode {
  kRequired,    // the launch fails, saying why: isolation fails closed (the default)
  kBestEffort,  // the job starts without it, with a note (labs that accept that)
};

// Device access of one job's group: where `restrict` is set, the GPUs of the node other than `own`
// (/dev/nvidiaN, N = the local GPU index, which is NVML's minor number on the nodes we target) are denied.
struct GpuAccess {
  bool restrict = false;
  std::vector<int> own;
};

class CgroupDriver {
 public:
  virtual ~CgroupDriver() = default;
  // "cgroup v1 (memory at /sys/fs/cgroup/memory/x/railyard, ...)": for logs and the agent's start-up line.
  virtual std::string describe() const = 0;
  // Creates the group in every hierarchy and writes the limits; returns its directories, the one holding
  // the memory controller first. A limit that cannot be written is an error (the group is removed again):
  // a job is not silently run without the limit it was promised.
  virtual Result<std::vector<std::string>> create(const std::string& name, const ResourceLimits& limits,
                                                  const GpuAccess& gpus) const = 0;
};

struct CgroupSetup {
  std::filesystem::path root = "/sys/fs/cgroup";
  std::filesystem::path self_cgroup = "/proc/self/cgroup";  // the agent's membership, per hierarchy
  std::string parent;  // a path inside each hierarchy ("/railyard-jobs"); "" = the agent's own group
  std::filesystem::path dev = "/dev";  // where /dev/nvidiaN are looked for (GPU device rules)
};

// The usable mechanism, or why there is none (kUnavailable-like message, for a log line and a test skip).
Result<std::unique_ptr<CgroupDriver>> detect_cgroup_driver(const CgroupSetup& setup);

// Drivers over given directories (tests point them at plain directories, where writes just create files).
// v2: `parent` is the directory under which railyard/<name> is made. v1: one parent per controller
// ("memory", "cpu", "pids", "devices"); memory is required.
std::unique_ptr<CgroupDriver> make_cgroup_v2(std::filesystem::path parent, std::filesystem::path dev = "/dev");
std::unique_ptr<CgroupDriver> make_cgroup_v1(
    std::vector<std::pair<std::string, std::filesystem::path>> parents, std::filesystem::path dev = "/dev");

// Kernel OOM kills inside the group so far: memory.events "oom_kill" (v2) or memory.oom_control
// "oom_kill" (v1, kernel 4.13+); 0 when neither file is readable.
long long cgroup_oom_kills(const std::vector<std::string>& dirs);
// Whether the group's peak memory use reached its limit (memory.peak, memory.max_usage_in_bytes). On v1 an
// OOM kill is counted only in the group of the process killed (the kernel does not propagate v1 memory
// events up), and a container engine's group below the allocation's is gone by the time the allocation
// ends: a rank killed by SIGKILL whose group reached its limit was the kernel's OOM kill.
bool cgroup_peak_reached_limit(const std::vector<std::string>& dirs);
// The memory limit in force (memory.max or memory.limit_in_bytes); nullopt when unlimited or unreadable.
std::optional<long long> cgroup_memory_limit(const std::vector<std::string>& dirs);
// SIGKILLs what is still in the group and in the groups below it (processes that left their process group;
// a container engine's group of an image job), then removes each
// directory. True when every directory is gone; false while killed processes have not exited yet (the
// kernel refuses to remove a group with members): call it again later.
bool remove_cgroup(const std::vector<std::string>& dirs);

// devices.deny lines ("c 195:3 rwm") for the /dev/nvidiaN character devices under `dev` not in `own`.
std::vector<std::string> gpu_deny_rules(const std::filesystem::path& dev, const std::vector<int>& own);

// "250000 100000" style cpu.max for a number of cores: quota per 100 ms period (at least 1 ms).
std::string cpu_max_value(double cpus);

}  // namespace railyard::agent
