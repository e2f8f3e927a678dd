// Parser for the matrix `nvidia-smi topo -m` prints: GPU rows and NIC rows of link kinds (X, NV#, PIX, PXB,
// PHB, NODE, SYS; SOC in old drivers), CPU/NUMA affinity columns (ignored) and the "NIC Legend" that maps
// NIC0 to mlx5_0. Old drivers label NIC columns mlx5_0 directly and print no legend; both are read.
//
// From the matrix it infers what a NodeProfile needs (see topology/README.md, "nvidia-smi"):
//   fabric              every GPU pair on NVLink -> nvswitch; some pairs -> cube-mesh; none -> pcie
//   nvlink_domain_size  size of the largest set of GPUs all linked pairwise by NVLink (1 without NVLink)
//   hcas                NICs with a GPU behind the same PCIe switch (PIX or PXB): the compute rails; storage
//                       and management NICs further away (PHB, NODE, SYS) are listed but not counted
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "topology/profile.hpp"

namespace railyard::topology {

// Ordered from closest to farthest (PCIe kinds); kSelf is the diagonal.
enum class LinkKind { kSelf, kNvLink, kPix, kPxb, kPhb, kNode, kSys };
std::string_view to_string(LinkKind k);

struct GpuLink {
  LinkKind kind = LinkKind::kSys;
  int nvlinks = 0;  // bonded NVLinks for kNvLink ("NV18" -> 18)
};

struct NicInfo {
  std::string label;             // column label: "NIC0", or "mlx5_0" in old output
  std::string device;            // "mlx5_0" from the NIC Legend; the label when there is none
  std::vector<LinkKind> to_gpu;  // link from each GPU
  LinkKind nearest = LinkKind::kSys;
  std::vector<int> nearest_gpus;  // GPUs at the nearest distance
  bool compute = false;           // nearest is PIX or PXB
};

struct NvsmiTopology {
  int gpu_count = 0;
  std::vector<GpuLink> links;  // gpu_count x gpu_count, row-major
  std::vector<NicInfo> nics;
  IntraFabric fabric = IntraFabric::kPcie;
  int nvlink_domain_size = 1;
  int hcas = 0;

  const GpuLink& link(int a, int b) const { return links[static_cast<size_t>(a) * gpu_count + b]; }
};

// Errors name the line: no header, a short row, an unknown cell, a missing GPU row, a GPU pair whose two
// cells disagree, more than 64 GPUs.
Result<NvsmiTopology> parse_nvsmi_topo(std::string_view text);

}  // namespace railyard::topology
