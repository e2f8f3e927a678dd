// cgroup v2 (unified hierarchy): one directory per allocation. Controllers must be enabled in the
// cgroup.subtree_control of every level above it, and the kernel refuses that (EBUSY) in a non-root group
// that holds processes: an agent started in its own leaf group must be given a parent it does not live in
// (--cgroup-parent, or systemd's Delegate=yes with the agent in a sub-group).
// Device rules: a BPF device program on the group (device_filter.hpp) refuses the node's other GPUs.
#include <algorithm>
#include <cmath>

#include "agent/launch/cgroup.hpp"
#include "agent/launch/cgroup_internal.hpp"
#include "agent/launch/device_filter.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;
using namespace cgroup_detail;

namespace {

class CgroupV2Driver final : public CgroupDriver {
 public:
  CgroupV2Driver(fs::path parent, fs::path dev) : parent_(std::move(parent)), dev_(std::move(dev)) {}

  std::string describe() const override {
    return "cgroup v2 at " + (parent_ / "railyard").string() +
           " (memory.max, cpu.max/cpu.weight, pids.max, a BPF device filter for GPUs)";
  }

  Result<std::vector<std::string>> create(const std::string& name, const ResourceLimits& limits,
                                          const GpuAccess& gpus) const override {
    const fs::path base = parent_ / "railyard";
    if (auto s = make_dir(base); !s) return s.error();
    for (const fs::path& level : {parent_, base}) {
      // Each controller alone, so a missing cpu or pids controller costs only its own limit.
      for (const char* c : {"+memory", "+cpu", "+pids"})
        (void)write_control(level / "cgroup.subtree_control", c);
    }
    auto made = make_fresh_dirs({base}, name);
    if (!made) return made.error();
    const fs::path group = made->front();
    if (auto s = write_limits(group, limits); !s) {
      remove_cgroup({group.string()});
      return internal_error(s.error().message + " (are the controllers enabled in " + parent_.string() +
                            "/cgroup.subtree_control? a group that holds processes cannot enable them)");
    }
    if (gpus.restrict)
      if (auto s = attach_device_deny(group, foreign_gpu_devices(dev_, gpus.own)); !s) {
        remove_cgroup({group.string()});
        return s.error();
      }
    return std::vector<std::string>{group.string()};
  }

 private:
  static Status write_limits(const fs::path& group, const ResourceLimits& limits) {
    if (limits.memory_bytes) {
      if (auto s = write_control(group / "memory.max", std::to_string(*limits.memory_bytes)); !s) return s;
      // No swap past the limit (absent without swap accounting).
      if (fs::exists(group / "memory.swap.max")) (void)write_control(group / "memory.swap.max", "0");
    }
    if (limits.cpus)
      if (auto s = write_control(group / "cpu.max", cpu_max_value(*limits.cpus)); !s) return s;
    if (limits.cpu_share) {
      const long weight = std::clamp(std::lround(*limits.cpu_share * 100), 1L, 10000L);  // 100 = one core
      if (auto s = write_control(group / "cpu.weight", std::to_string(weight)); !s) return s;
    }
    if (limits.pids)
      if (auto s = write_control(group / "pids.max", std::to_string(*limits.pids)); !s) return s;
    return ok();
  }

  fs::path parent_;
  fs::path dev_;
};

}  // namespace

std::unique_ptr<CgroupDriver> make_cgroup_v2(fs::path parent, fs::path dev) {
  return std::make_unique<CgroupV2Driver>(std::move(parent), std::move(dev));
}

}  // namespace railyard::agent
