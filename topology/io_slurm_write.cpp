// The topology.conf writer (the reader is in io_slurm.cpp).
#include <algorithm>
#include <charconv>

#include "common/hostlist.hpp"
#include "topology/io_json.hpp"
#include "topology/io_slurm.hpp"

namespace railyard::topology {
namespace {

// A Slurm host list for `names`; a plain comma list when compression would not expand back exactly.
std::string host_list(const std::vector<std::string>& names) {
  std::string compressed = compress_hostlist(names);
  auto back = expand_hostlist(compressed);
  if (back && *back == names) return compressed;
  std::string joined;
  for (const auto& n : names) joined += (joined.empty() ? "" : ",") + n;
  return joined;
}

std::string number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

// The level the reader infers: leaf without child switches, else one above the highest child.
Level inferred_level(const Cluster& c, const Domain& d) {
  if (d.children.empty()) return Level::kLeaf;
  Level highest = Level::kBlock;
  for (DomainId child : d.children) highest = std::max(highest, c.domain(child).level);
  return highest == Level::kCore ? Level::kCore : static_cast<Level>(static_cast<int>(highest) + 1);
}

std::string attributes(const Cluster& c, const Domain& d) {
  std::string out;
  if (d.level != inferred_level(c, d)) out += " level=" + std::string(to_string(d.level));
  if (d.switch_count != 1) out += " switch_count=" + std::to_string(d.switch_count);
  if (d.rail_optimized) out += " rail_optimized=true";
  if (d.oversubscription != 1.0) out += " oversubscription=" + number(d.oversubscription);
  if (d.block_gbytes_s != 0) out += " block_gbytes_s=" + number(d.block_gbytes_s);
  return out.empty() ? out : "  #railyard" + out;
}

void write_node_groups(const Cluster& c, std::string& out) {
  for (NodeId n = 0; n < c.node_count();) {
    const Node& first = c.node(n);
    std::vector<std::string> names;
    for (; n < c.node_count() && c.node(n).profile == first.profile && c.node(n).features == first.features;
         ++n)
      names.push_back(c.node(n).name);
    out += "#railyard nodes " + host_list(names) + " profile=" + c.profiles()[first.profile].name;
    for (size_t i = 0; i < first.features.size(); ++i) out += (i ? "," : " features=") + first.features[i];
    out += "\n";
  }
}

}  // namespace

std::string write_topology_conf(const Cluster& cluster) {
  std::string out =
      "# Slurm topology.conf (topology/tree), written by railyard.\n"
      "# \"#railyard\" comments carry what the tree cannot say; Slurm ignores them.\n";
  out += "#railyard name " + cluster.name() + "\n";
  for (const NodeProfile& p : cluster.profiles()) {
    const NodeProfile* builtin = find_builtin_profile(p.name);
    if (!builtin || !(*builtin == p)) out += "#railyard profile " + profile_to_json(p) + "\n";
  }
  write_node_groups(cluster, out);
  for (const Domain& d : cluster.domains()) {
    out += "SwitchName=" + d.name;
    NodeId direct_end = d.children.empty() ? d.end_node : cluster.domain(d.children.front()).first_node;
    std::vector<std::string> names;
    for (NodeId n = d.first_node; n < direct_end; ++n) names.push_back(cluster.node(n).name);
    if (!names.empty()) out += " Nodes=" + host_list(names);
    names.clear();
    for (DomainId child : d.children) names.push_back(cluster.domain(child).name);
    if (!names.empty()) out += " Switches=" + host_list(names);
    out += attributes(cluster, d) + "\n";
  }
  return out;
}

}  // namespace railyard::topology
