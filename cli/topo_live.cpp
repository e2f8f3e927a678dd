// `railyard topo show --url URL`: the scheduler's own cluster as a tree of switch groups, with the GPUs in
// use and the health of every node (GET /api/v1/topology and /api/v1/nodes).
#include <iostream>
#include <map>

#include "cli/api.hpp"
#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "common/hostlist.hpp"
#include "topology/io.hpp"

namespace railyard::cli {
namespace {

using Json = nlohmann::json;
using topology::Cluster;
using topology::DomainId;
using topology::NodeId;

struct NodeUse {
  int gpus = 0, used = 0;
  std::string health = "?";
};

std::string bar(int used, int total, int width) {
  const int filled = total > 0 ? (used * width + total - 1) / total : 0;
  return "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
}

void print_domain(const Cluster& c, DomainId id, const std::vector<NodeUse>& use, int depth) {
  const auto& d = c.domain(id);
  int used = 0, total = 0, unhealthy = 0;
  for (NodeId n = d.first_node; n < d.end_node; ++n) {
    used += use[n].used;
    total += use[n].gpus;
    unhealthy += use[n].health != "up";
  }
  const std::string indent(2 * depth, ' ');
  std::cout << indent << d.name << "  [" << topology::to_string(d.level) << "]  " << bar(used, total, 20) << " "
            << used << "/" << total << " GPUs used";
  if (unhealthy > 0) std::cout << ", " << paint(std::to_string(unhealthy) + " nodes not up", Color::kYellow);
  std::cout << "\n";
  if (!d.children.empty()) {
    for (DomainId child : d.children) print_domain(c, child, use, depth + 1);
    return;
  }
  for (NodeId n = d.first_node; n < d.end_node; ++n) {
    const auto& u = use[n];
    std::cout << indent << "  " << c.node(n).name << "  " << bar(u.used, u.gpus, 8) << " " << u.used << "/"
              << u.gpus << "  " << paint(u.health, state_color(u.health)) << "\n";
  }
}

}  // namespace

void show_live_topology(const std::string& url, bool json) {
  ServerOptions options;
  options.url = url;
  Api api(options);
  const Json topo = api.get("/topology");
  const Json nodes = api.get("/nodes");
  if (json) return print_json({{"topology", topo}, {"nodes", nodes["nodes"]}});
  auto cluster = topology::parse_cluster(topo.dump(), "scheduler", "dgx-h100");
  if (!cluster) fail(internal_error("the scheduler's topology does not parse: " + cluster.error().message));
  std::vector<NodeUse> use(cluster->node_count());
  for (const auto& n : nodes["nodes"]) {
    const NodeId id = cluster->find_node(n.value("name", ""));
    if (id < 0) continue;
    use[id] = {n.value("gpus", 0), n.value("gpus_allocated", 0), n.value("health", "?")};
  }
  std::cout << "cluster " << cluster->name() << " at " << url << ": " << cluster->node_count() << " nodes, "
            << cluster->gpu_count() << " GPUs\n";
  for (DomainId root : cluster->roots()) print_domain(*cluster, root, use, 0);
}

}  // namespace railyard::cli
