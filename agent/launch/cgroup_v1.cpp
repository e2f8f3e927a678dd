// cgroup v1: one directory per allocation in each controller's hierarchy (memory, and cpu, pids, devices
// where mounted). Memory is the one that must work; the others are best effort only in that a hierarchy
// that is absent is skipped — a limit that cannot be written where the hierarchy exists is an error.
#include <algorithm>
#include <cmath>

#include "agent/launch/cgroup.hpp"
#include "agent/launch/cgroup_internal.hpp"
#include "agent/launch/device_filter.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;
using namespace cgroup_detail;

namespace {

class CgroupV1Driver final : public CgroupDriver {
 public:
  CgroupV1Driver(std::vector<std::pair<std::string, fs::path>> parents, fs::path dev)
      : parents_(std::move(parents)), dev_(std::move(dev)) {}

  std::string describe() const override {
    std::string out = "cgroup v1 (";
    for (const auto& [c, p] : parents_)
      out += (out.back() == '(' ? "" : ", ") + c + " at " + (p / "railyard").string();
    return out + ")";
  }

  Result<std::vector<std::string>> create(const std::string& name, const ResourceLimits& limits,
                                          const GpuAccess& gpus) const override {
    const bool has_devices = std::any_of(parents_.begin(), parents_.end(), [](const auto& p) { return p.first == "devices"; });
    if (gpus.restrict && !has_devices)
      return internal_error("cannot keep the job to its GPUs: no cgroup v1 devices hierarchy is mounted");
    std::vector<fs::path> bases;
    for (const auto& [controller, parent] : parents_) bases.push_back(parent / "railyard");
    auto made = make_fresh_dirs(bases, name);
    if (!made) return made.error();
    std::vector<std::string> dirs;
    for (const auto& d : *made) dirs.push_back(d.string());
    for (size_t i = 0; i < parents_.size(); ++i) {
      if (auto s = write_limits(parents_[i].first, (*made)[i], limits, gpus); !s) {
        remove_cgroup(dirs);
        return s.error();
      }
    }
    return dirs;
  }

 private:
  Status write_limits(const std::string& controller, const fs::path& group, const ResourceLimits& limits,
                      const GpuAccess& gpus) const {
    if (controller == "memory" && limits.memory_bytes) {
      const std::string bytes = std::to_string(*limits.memory_bytes);
      if (auto s = write_control(group / "memory.limit_in_bytes", bytes); !s) return s;
      // memory+swap at the same value: no swapping past the limit (absent without swap accounting).
      if (fs::exists(group / "memory.memsw.limit_in_bytes"))
        if (auto s = write_control(group / "memory.memsw.limit_in_bytes", bytes); !s) return s;
    }
    if (controller == "cpu" && limits.cpus) {
      constexpr long kPeriodUs = 100000;
      if (auto s = write_control(group / "cpu.cfs_period_us", std::to_string(kPeriodUs)); !s) return s;
      const long quota = std::max(1000L, std::lround(*limits.cpus * kPeriodUs));
      if (auto s = write_control(group / "cpu.cfs_quota_us", std::to_string(quota)); !s) return s;
    }
    if (controller == "cpu" && limits.cpu_share) {
      const long shares = std::max(2L, std::lround(*limits.cpu_share * 1024));  // 1024 = one core
      if (auto s = write_control(group / "cpu.shares", std::to_string(shares)); !s) return s;
    }
    if (controller == "pids" && limits.pids)
      if (auto s = write_control(group / "pids.max", std::to_string(*limits.pids)); !s) return s;
    if (controller == "devices" && gpus.restrict)
      for (const auto& rule : gpu_deny_rules(dev_, gpus.own))
        if (auto s = write_control(group / "devices.deny", rule); !s) return s;
    return ok();
  }

  std::vector<std::pair<std::string, fs::path>> parents_;
  fs::path dev_;
};

}  // namespace

std::vector<std::string> gpu_deny_rules(const fs::path& dev, const std::vector<int>& own) {
  std::vector<std::string> rules;
  for (const auto& d : foreign_gpu_devices(dev, own))
    rules.push_back("c " + std::to_string(d.major) + ":" + std::to_string(d.minor) + " rwm");
  return rules;
}

std::unique_ptr<CgroupDriver> make_cgroup_v1(std::vector<std::pair<std::string, fs::path>> parents,
                                             fs::path dev) {
  return std::make_unique<CgroupV1Driver>(std::move(parents), std::move(dev));
}

}  // namespace railyard::agent
