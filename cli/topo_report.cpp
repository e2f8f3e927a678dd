// `railyard topo show`, `cost` and `table`: read-only reports on a cluster file or a preset.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/topo_cmd.hpp"
#include "common/hostlist.hpp"
#include "topology/cost.hpp"

namespace railyard::cli {
namespace {

using Json = nlohmann::ordered_json;
using topology::Cluster;
using topology::Domain;
using topology::DomainId;
using topology::GpuId;
using topology::Level;
using topology::NodeId;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string names_of(const Cluster& c, NodeId first, NodeId end) {
  std::vector<std::string> names;
  for (NodeId n = first; n < end; ++n) names.push_back(c.node(n).name);
  return compress_hostlist(names);
}

// "dgx[001-020]: 20 x dgx-a100 (8 x A100)" for each run of nodes of one profile in [first, end).
std::string describe_nodes(const Cluster& c, NodeId first, NodeId end) {
  std::string out;
  for (NodeId n = first; n < end;) {
    NodeId run = n;
    while (run < end && c.node(run).profile == c.node(n).profile) ++run;
    const auto& p = c.profile_of(n);
    out += (out.empty() ? "" : "; ") + names_of(c, n, run) + ": " + std::to_string(run - n) + " x " + p.name +
           " (" + std::to_string(p.gpus) + " x " + p.gpu_type + ")";
    n = run;
  }
  return out;
}

std::string describe_domain(const Domain& d) {
  std::string out = d.name + "  [" + std::string(to_string(d.level));
  if (d.switch_count != 1) out += ", " + std::to_string(d.switch_count) + " switches";
  if (d.rail_optimized) out += ", rail-optimized";
  if (d.oversubscription != 1.0) out += ", " + fmt("%g", d.oversubscription) + ":1 oversubscribed";
  if (d.block_gbytes_s > 0) out += ", NVLink " + fmt("%g", d.block_gbytes_s) + " GB/s";
  return out + ", " + std::to_string(d.node_count()) + " nodes, " + std::to_string(d.gpu_count()) + " GPUs]";
}

void print_tree(const Cluster& c, DomainId id, int depth) {
  const Domain& d = c.domain(id);
  std::string indent(2 * depth, ' ');
  std::cout << indent << describe_domain(d) << "\n";
  NodeId direct_end = d.children.empty() ? d.end_node : c.domain(d.children.front()).first_node;
  if (direct_end > d.first_node)
    std::cout << indent << "  " << describe_nodes(c, d.first_node, direct_end) << "\n";
  for (DomainId child : d.children) print_tree(c, child, depth + 1);
}

void print_show_text(const Cluster& c) {
  std::cout << "cluster " << c.name() << ": " << c.node_count() << " nodes, " << c.gpu_count() << " GPUs, "
            << c.leaves().size() << " leaf groups, " << c.domains().size() << " switch groups\n\n";
  for (DomainId root : c.roots()) print_tree(c, root, 0);
  std::cout << "\nprofiles:\n";
  for (size_t i = 0; i < c.profiles().size(); ++i) {
    const auto& p = c.profiles()[i];
    int count = 0;
    for (const auto& n : c.nodes()) count += n.profile == static_cast<int>(i);
    std::printf("  %-12s %6d nodes  %2d x %s %d GB  %s, NVLink domain %d  %d x %g Gb/s HCAs\n",
                p.name.c_str(), count, p.gpus, p.gpu_type.c_str(), p.gpu_memory_gb,
                std::string(to_string(p.fabric)).c_str(), p.nvlink_domain_size, p.hcas, p.hca_gbits_s);
  }
  std::cout << "\ntotals: " << c.node_count() << " nodes, " << c.gpu_count() << " GPUs\n";
}

Json show_json(const Cluster& c) {
  Json nodes = Json::array(), leaves = Json::array(), switches = Json::array();
  for (const auto& n : c.nodes()) {
    const auto& p = c.profiles()[n.profile];
    nodes.push_back({{"name", n.name},
                     {"gpus", n.gpus},
                     {"leaf", c.domain(n.leaf()).name},
                     {"profile", p.name},
                     {"gpu_type", p.gpu_type},
                     {"features", n.features}});
  }
  for (DomainId l : c.leaves()) {
    const Domain& d = c.domain(l);
    leaves.push_back({{"name", d.name},
                      {"nodes", names_of(c, d.first_node, d.end_node)},
                      {"node_count", d.node_count()},
                      {"gpus", d.gpu_count()},
                      {"parent", d.parent >= 0 ? Json(c.domain(d.parent).name) : Json()}});
  }
  for (const Domain& d : c.domains())
    switches.push_back({{"name", d.name},
                        {"level", std::string(to_string(d.level))},
                        {"parent", d.parent >= 0 ? Json(c.domain(d.parent).name) : Json()},
                        {"node_count", d.node_count()},
                        {"gpus", d.gpu_count()}});
  return {{"name", c.name()}, {"node_count", c.node_count()}, {"gpus", c.gpu_count()}, {"nodes", nodes},
          {"leaves", leaves}, {"switches", switches}};
}

struct ShowOptions {
  std::string file;
  std::string url;
  bool json = false;
  std::string profile = "dgx-h100";
};

}  // namespace

void add_show_command(CLI::App& topo) {
  auto o = std::make_shared<ShowOptions>();
  auto* cmd = topo.add_subcommand("show", "Print a cluster file as a tree of switch groups and nodes");
  cmd->add_option("file", o->file, "Cluster file, JSON or topology.conf (detected)");
  cmd->add_option("--url", o->url, "Instead of a file: the live cluster of this scheduler, with occupancy");
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->add_option("--profile", o->profile, "Profile of topology.conf nodes without one")
      ->capture_default_str();
  cmd->callback([o] {
    if (!o->url.empty()) return show_live_topology(o->url, o->json);
    if (o->file.empty()) fail_usage("give a cluster file, or --url for the live cluster");
    Cluster c = load_or_fail(o->file, o->profile);
    if (o->json) {
      std::cout << show_json(c).dump(2) << std::endl;
    } else {
      print_show_text(c);
    }
  });
}

}  // namespace railyard::cli
