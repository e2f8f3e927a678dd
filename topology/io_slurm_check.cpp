// What Slurm's topology/tree plugin warns of when it reads a topology.conf, said for Railyard's reading of
// one (topology_conf_warnings in io_slurm.hpp).
#include <string>
#include <vector>

#include "topology/io_slurm.hpp"

namespace railyard::topology {

std::vector<std::string> topology_conf_warnings(const Cluster& cluster) {
  std::vector<std::string> out;
  const auto& roots = cluster.roots();
  if (roots.size() > 1) {
    std::string names;
    for (size_t i = 0; i < roots.size() && i < 8; ++i) names += (i ? ", " : "") + cluster.domain(roots[i]).name;
    if (roots.size() > 8) names += ", ...";
    out.push_back("no switch can reach all nodes through its descendants (" + std::to_string(roots.size()) +
                  " trees, topped by " + names +
                  "): jobs never span them; if this is not intentional, fix the topology.conf file");
  }
  int loose = 0;
  std::string first;
  for (const auto& node : cluster.nodes()) {
    bool under_a_switch = false;
    for (const DomainId d : node.up) under_a_switch = under_a_switch || d >= 0;
    if (!under_a_switch && loose++ == 0) first = node.name;
  }
  if (loose > 0)
    out.push_back(std::to_string(loose) + " node(s) under no switch (first: " + first +
                  "): Slurm's tree plugin schedules no multi-node job onto them");
  return out;
}

}  // namespace railyard::topology
