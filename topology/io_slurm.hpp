// Slurm topology.conf, topology/tree flavour: "SwitchName=s0 Nodes=dgx[001-032]", "SwitchName=s1 Switches=s[0-3]".
//
// Reading: keys are case-insensitive as in Slurm, '#' starts a comment, a trailing '\' continues a line.
// Switches with Nodes are leaves; a switch with child switches sits one level above the highest of them
// (leaf -> spine -> core; a fourth level is an error). Nodes get the caller's profile. Errors name the line:
// unknown key, bad host list, undefined switch, loop, a node under two switches, duplicate switch.
//
// Writing: one SwitchName line per switch group, in tree order. What Slurm's tree cannot say (cluster name,
// node profiles and features, rail optimization, switch counts, oversubscription, NVLink blocks) goes into
// "#railyard" comments, which Slurm ignores and this reader understands, so Railyard's own files round-trip
// exactly. Slurm itself sees a block as one more switch level (topology/block is not written).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "topology/cluster.hpp"

namespace railyard::topology {

struct SlurmReadOptions {
  std::string default_profile = "dgx-h100";  // for nodes no "#railyard nodes" comment gives a profile
  std::string cluster_name = "cluster";      // unless a "#railyard name" comment gives one
};

Result<Cluster> read_topology_conf(std::string_view text, const SlurmReadOptions& options = {});
// What Slurm's tree plugin warns of in a file it still accepts, for a cluster read from one: switches with
// no common root (several trees: no job spans two of them), nodes under no switch. Empty when all is well.
std::vector<std::string> topology_conf_warnings(const Cluster& cluster);
std::string write_topology_conf(const Cluster& cluster);

}  // namespace railyard::topology
