// Placement stages after the filter (request.hpp): candidates -> score -> select.
//
//   single node (k <= node size): best fit over free-count buckets (the node left with the fewest free GPUs, lowest id first),
//     breaking a whole node only when no partly used one has room, then in the leaf with the fewest whole
//     free nodes; inside the node, one NVLink domain when possible (a DGX-1 cube-mesh half).
//   several nodes: qualifying nodes (whole free nodes, or nodes where the same k GPU indices are free so the
//     job stays on its rails) -> the smallest domain (block, leaf, spine, core) holding n of them, best fit
//     (fewest qualifying nodes) -> inside it, the fewest leaf groups, largest first, the last one best fit.
//   MIG: a GPU already split with a valid free slot (most used first), else split a free GPU (best fit node).
//   first-fit (baseline only): lowest node ids first, any GPUs, no topology.
// Placers never modify the usage; the cycle takes the GPUs it is given.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scheduler/model/usage.hpp"
#include "scheduler/placement/request.hpp"

namespace railyard::sched {

struct Choice {
  std::vector<GpuId> gpus;       // sorted; empty for MIG
  std::vector<MigSlice> slices;  // MIG only
};

// One replica of the request's shape, in the request's window. A multi-node request fails exactly when
// fewer than its n nodes have k usable GPUs in the window (k: its largest share); with `short_by`, such a
// failure sets it to n less that count, or to a lower bound of that (0 when the placer does not know).
std::optional<Choice> place_topology(const ClusterUsage& usage, const Request& req, int* short_by = nullptr);
std::optional<Choice> place_first_fit(const ClusterUsage& usage, const Request& req);

// Why the shape does not fit now, in words ("needs 32 whole free nodes; 19 free in the cluster").
std::string explain_no_fit(const ClusterUsage& usage, const Request& req);

}  // namespace railyard::sched
