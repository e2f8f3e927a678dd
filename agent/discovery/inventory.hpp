// Node inventory: what the agent reports about its node (GPUs, NVLink, HCAs) and how it found out.
//
// discover() tries, in order: an emulated built-in profile when asked (--emulate dgx-h100); NVML through
// dlopen("libnvidia-ml.so.1"); `nvidia-smi topo -m` through topology/io_nvsmi.hpp; and finally the
// fallback profile (when set) or an empty inventory. HCAs come from <sysfs>/class/infiniband/* for the
// nvml and nvidia-smi sources; an emulated node invents mlx5_0..mlx5_{n-1} from its profile. Nothing here
// throws; every fallback is explained in Inventory::notes.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace railyard::agent {

struct Hca {
  std::string name;       // "mlx5_0"
  double rate_gbits = 0;  // ports/1/rate, "400 Gb/sec (4X NDR)" -> 400
  std::string state;      // ports/1/state, "4: ACTIVE"; empty when unknown
  bool operator==(const Hca&) const = default;
};

struct GpuInfo {
  int index = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  long long memory_bytes = 0;
  bool mig_enabled = false;
  std::vector<bool> nvlinks;  // state of each NVLink link (NVML), true = active
  int nvlinks_active = 0;     // how many of them are active
};

struct Inventory {
  std::string node;      // node name the agent reports
  std::string profile;   // built-in profile name when known ("dgx-h100"), else ""
  std::string gpu_type;  // "H100"
  int gpu_count = 0;
  long long gpu_memory_bytes = 0;  // per GPU
  int nvlink_domain_size = 1;
  std::vector<Hca> hcas;           // the compute rails, in rail order
  std::vector<GpuInfo> gpus;       // per GPU detail (nvml, nvidia-smi, emulated)
  std::string source;              // "nvml", "nvidia-smi", "emulated" or "none"
  std::vector<std::string> notes;  // why a source was skipped, in the order tried

  // HCA of the rail local GPU `gpu` uses (GPUs share rails when there are fewer HCAs); "" without HCAs.
  std::string rail_hca(int gpu) const;
};

struct DiscoveryOptions {
  std::string node_name;         // "" = gethostname()
  std::string emulate;           // built-in profile name; skips hardware probing
  std::string fallback_profile;  // emulated profile used when no GPU is found; "" = none
  std::filesystem::path sysfs_root = "/sys";
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string nvidia_smi = "nvidia-smi";  // a name looked up in PATH, or a path
};

Result<Inventory> discover(const DiscoveryOptions& options);

// The inventory as the agent reports it (registration message, `railyard-agent --inventory`).
nlohmann::json to_json(const Inventory& inventory);

// Pieces of discover(), public for tests and for `railyard-agent --inventory`.
Result<Inventory> emulated_inventory(const std::string& profile, const std::string& node);
std::vector<Hca> read_sysfs_hcas(const std::filesystem::path& sysfs_root);

}  // namespace railyard::agent
