#include "topology/profile.hpp"

#include <array>

namespace railyard::topology {

std::string_view to_string(IntraFabric f) {
  switch (f) {
    case IntraFabric::kNvSwitch: return "nvswitch";
    case IntraFabric::kCubeMesh: return "cube-mesh";
    case IntraFabric::kPcie: return "pcie";
  }
  return "unknown";
}

std::optional<IntraFabric> parse_fabric(std::string_view s) {
  for (IntraFabric f : {IntraFabric::kNvSwitch, IntraFabric::kCubeMesh, IntraFabric::kPcie})
    if (to_string(f) == s) return f;
  return std::nullopt;
}

namespace {

// Sources (see topology/README.md for the full list):
//  V100 SXM2: NVLink 2.0, 6 links x 25 GB/s per direction; DGX-1 hybrid cube-mesh, 4x EDR 100 Gb/s
//    (NVIDIA DGX-1 with Tesla V100 System Architecture white paper, WP-08437-002).
//  DGX-2H: 16 V100 on 12 NVSwitches, 300 GB/s bidirectional per GPU, 8x EDR 100 Gb/s (DGX-2 data sheet).
//  DGX A100: NVLink 3, 600 GB/s bidirectional per GPU, 8x HDR 200 Gb/s ConnectX-6 compute rails
//    (DGX A100 User Guide; DGX SuperPOD with DGX A100 Reference Architecture, RA-10059).
//  DGX H100/H200: NVLink 4, 900 GB/s bidirectional per GPU, 8x NDR 400 Gb/s ConnectX-7
//    (DGX H100 User Guide; DGX SuperPOD with DGX H100 Reference Architecture, RA-11333).
//  T4: PCIe Gen3 x16, 16 GB/s per direction peak (~12 GB/s achieved), 70 W, no NVLink (T4 data sheet).
// Ring bus bandwidths are per direction and a little below the link peak, as NCCL measures them.
const std::array<NodeProfile, 6> kProfiles = {{
    {"dgx-1-v100", "V100", 32, false, 8, IntraFabric::kCubeMesh, 4, 100.0, 25.0, 130.0, 4, 100.0, 2.0},
    {"dgx-2h", "V100", 32, false, 16, IntraFabric::kNvSwitch, 16, 135.0, 135.0, 135.0, 8, 100.0, 2.0},
    {"dgx-a100", "A100", 80, true, 8, IntraFabric::kNvSwitch, 8, 240.0, 240.0, 240.0, 8, 200.0, 1.5},
    {"dgx-h100", "H100", 80, true, 8, IntraFabric::kNvSwitch, 8, 370.0, 370.0, 370.0, 8, 400.0, 1.2},
    {"dgx-h200", "H200", 141, true, 8, IntraFabric::kNvSwitch, 8, 370.0, 370.0, 370.0, 8, 400.0, 1.2},
    {"t4-node", "T4", 16, false, 4, IntraFabric::kPcie, 1, 12.0, 12.0, 12.0, 1, 100.0, 4.0},
}};

}  // namespace

std::span<const NodeProfile> builtin_profiles() { return kProfiles; }

const NodeProfile* find_builtin_profile(std::string_view name) {
  for (const auto& p : kProfiles)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace railyard::topology
