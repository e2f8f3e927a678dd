// Node profiles: what one node of a given kind brings (GPUs, NVLink, HCAs) and the link figures the cost
// model uses. Figures and their public sources are in topology/README.md ("Profiles").
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace railyard::topology {

// How the GPUs inside one node talk to each other.
enum class IntraFabric {
  kNvSwitch,  // all-to-all NVLink through NVSwitch (DGX-2, A100, H100, H200)
  kCubeMesh,  // DGX-1 hybrid cube-mesh: two fully linked 4-GPU halves, sparse links between them
  kPcie,      // no NVLink (T4 inference nodes)
};

std::string_view to_string(IntraFabric f);
// "nvswitch", "cube-mesh", "pcie"; nullopt when unknown.
std::optional<IntraFabric> parse_fabric(std::string_view s);

struct NodeProfile {
  std::string name;              // "dgx-h100"
  std::string gpu_type;          // "H100"; what jobs ask for with gpu_type
  int gpu_memory_gb = 0;
  bool mig_capable = false;
  int gpus = 0;                  // GPUs per node
  IntraFabric fabric = IntraFabric::kNvSwitch;
  int nvlink_domain_size = 0;    // GPUs per all-to-all NVLink group inside the node (8, 4 on cube-mesh, 1 on PCIe)
  double intra_gbytes_s = 0;     // ring bus bandwidth inside one NVLink domain, GB/s per direction
  double cross_gbytes_s = 0;     // ring bus bandwidth for a set spanning the node's domains (all GPUs excepted)
  double full_node_gbytes_s = 0; // ring bus bandwidth over all GPUs of the node
  int hcas = 0;                  // InfiniBand HCAs (rails) per node
  double hca_gbits_s = 0;        // per HCA, Gb/s per direction
  double intra_latency_us = 0;   // per ring step inside the node

  // Local NVLink domain of local GPU index g.
  int nvlink_domain_of(int local_gpu) const { return local_gpu / (nvlink_domain_size > 0 ? nvlink_domain_size : 1); }
  // Rail (HCA) that local GPU g uses: GPUs share HCAs when there are fewer HCAs than GPUs.
  int rail_of(int local_gpu) const { return hcas > 0 ? local_gpu * hcas / gpus : 0; }

  bool operator==(const NodeProfile&) const = default;
};

// The built-in profiles: dgx-1-v100, dgx-2h, dgx-a100, dgx-h100, dgx-h200, t4-node.
std::span<const NodeProfile> builtin_profiles();
const NodeProfile* find_builtin_profile(std::string_view name);

}  // namespace railyard::topology
