// Device access on cgroup v2. The unified hierarchy has no devices.deny file: the kernel asks a
// BPF_PROG_TYPE_CGROUP_DEVICE program attached to the group on every open or mknod of a device node by a
// member, as runc and systemd do. Ours refuses the listed character devices (the node's GPUs the job was not
// given) and allows every other device, so it changes nothing but those.
#pragma once

#include <filesystem>
#include <vector>

#include "common/result.hpp"

namespace railyard::agent {

struct DeviceNumber {
  unsigned major = 0;
  unsigned minor = 0;
  bool operator==(const DeviceNumber&) const = default;
  auto operator<=>(const DeviceNumber&) const = default;
};

// The character devices /dev/nvidiaN under `dev` whose N is not in `own`: the GPUs a job must not open.
std::vector<DeviceNumber> foreign_gpu_devices(const std::filesystem::path& dev, const std::vector<int>& own);

// Loads the program refusing `deny` (libbpf) and attaches it to the cgroup v2 directory `group`. It stays in
// force while the group exists (the kernel holds it); an error names the step and the kernel's reason (no
// CAP_BPF or CAP_SYS_ADMIN, a kernel without cgroup BPF, a directory that is not a cgroup v2 group).
Status attach_device_deny(const std::filesystem::path& group, const std::vector<DeviceNumber>& deny);

}  // namespace railyard::agent
