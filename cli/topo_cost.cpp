// `railyard topo cost` and `railyard topo table`: allreduce estimates (topology/cost.hpp) for a chosen set of
// nodes, and for compact versus scattered placements of growing jobs.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "cli/cli_util.hpp"
#include "cli/topo_cmd.hpp"
#include "common/hostlist.hpp"
#include "topology/cost.hpp"

namespace railyard::cli {
namespace {

using Json = nlohmann::ordered_json;
using topology::AllreduceEstimate;
using topology::Cluster;
using topology::GpuId;
using topology::NodeId;

double bytes_or_fail(const std::string& text) {
  auto bytes = parse_byte_size(text);
  if (!bytes) fail_usage("--bytes: " + bytes.error().message);
  return *bytes;
}

std::vector<NodeId> nodes_or_fail(const Cluster& c, const std::string& expr, const std::string& file) {
  auto names = expand_hostlist(expr);
  if (!names) fail_usage("--nodes: " + names.error().message);
  std::vector<NodeId> ids;
  std::unordered_set<NodeId> seen;
  for (const auto& name : *names) {
    NodeId id = c.find_node(name);
    if (id < 0) fail_usage("--nodes: unknown node \"" + name + "\" (not in " + file + ")");
    if (!seen.insert(id).second) fail_usage("--nodes: node \"" + name + "\" is given twice");
    ids.push_back(id);
  }
  return ids;
}

// The first `per_node` GPUs of each node (all of them when per_node is 0).
std::vector<GpuId> gpus_or_fail(const Cluster& c, const std::vector<NodeId>& nodes, int per_node) {
  std::vector<GpuId> gpus;
  for (NodeId n : nodes) {
    const auto& node = c.node(n);
    if (per_node > node.gpus)
      fail_usage("--gpus-per-node " + std::to_string(per_node) + ": node \"" + node.name + "\" has " +
                 std::to_string(node.gpus) + " GPUs");
    for (int g = 0; g < (per_node > 0 ? per_node : node.gpus); ++g) gpus.push_back(node.first_gpu + g);
  }
  return gpus;
}

Json finite_or_null(double v) { return std::isfinite(v) ? Json(v) : Json(); }
Json byte_count(double bytes) {
  return bytes == std::floor(bytes) ? Json(static_cast<uint64_t>(bytes)) : Json(bytes);
}

Json estimate_json(const AllreduceEstimate& e, const Cluster& c, double bytes) {
  return {{"bytes", byte_count(bytes)},
          {"gpus", e.gpus},
          {"nodes", e.nodes},
          {"seconds", e.seconds},
          {"ring_seconds", e.ring_seconds},
          {"tree_seconds", e.tree_seconds},
          {"algorithm", e.ring_seconds <= e.tree_seconds ? "ring" : "tree"},
          {"bus_gbytes_s", e.bus_gbytes_s},
          {"bottleneck_gbits_s", finite_or_null(e.bottleneck_gbits_s)},
          {"leaves_spanned", e.leaves_spanned},
          {"min_leaves", c.min_leaves_for_nodes(e.nodes)},
          {"span", std::string(to_string(e.span))},
          {"rail_aligned", e.rail_aligned}};
}

void print_estimate(const AllreduceEstimate& e, const Cluster& c, double bytes, const std::string& nodes) {
  const bool ring = e.ring_seconds <= e.tree_seconds;
  std::cout << "allreduce of " << format_bytes(bytes) << " over " << e.gpus << " GPUs on " << e.nodes
            << " nodes (" << nodes << ")\n"
            << "  ring           " << format_seconds(e.ring_seconds) << "\n"
            << "  tree           " << format_seconds(e.tree_seconds) << "\n"
            << "  chosen         " << (ring ? "ring" : "tree") << ", " << format_seconds(e.seconds) << "\n"
            << "  bus bandwidth  " << std::round(e.bus_gbytes_s * 10) / 10 << " GB/s\n"
            << "  bottleneck     "
            << (std::isfinite(e.bottleneck_gbits_s)
                    ? std::to_string(std::lround(e.bottleneck_gbits_s)) + " Gb/s"
                    : std::string("none (one GPU)"))
            << "\n"
            << "  leaves         " << e.leaves_spanned << " spanned, " << c.min_leaves_for_nodes(e.nodes)
            << " at least\n"
            << "  span           " << to_string(e.span) << "\n"
            << "  rail aligned   " << (e.rail_aligned ? "yes" : "no") << std::endl;
}

struct CostOptions {
  std::string file;
  std::string nodes;
  int gpus_per_node = 0;
  std::string bytes = "1G";
  bool json = false;
  std::string profile = "dgx-h100";
};

// Nodes taken in `order`, whole, until `gpus` GPUs are reached (the last node may be used in part).
std::vector<GpuId> take_gpus(const Cluster& c, const std::vector<NodeId>& order, int gpus) {
  std::vector<GpuId> out;
  for (NodeId n : order) {
    for (int g = 0; g < c.node(n).gpus && static_cast<int>(out.size()) < gpus; ++g)
      out.push_back(c.node(n).first_gpu + g);
    if (static_cast<int>(out.size()) == gpus) break;
  }
  return out;
}

// Nodes dealt round-robin over the leaf groups: the first node of each leaf, then the second of each...
std::vector<NodeId> round_robin_nodes(const Cluster& c) {
  std::vector<NodeId> order;
  for (int round = 0; static_cast<int>(order.size()) < c.node_count(); ++round)
    for (topology::DomainId l : c.leaves())
      if (c.domain(l).first_node + round < c.domain(l).end_node)
        order.push_back(c.domain(l).first_node + round);
  return order;
}

struct TableOptions {
  std::string file;
  std::string preset;
  int sus = 4;
  std::string bytes = "1G";
  bool json = false;
  std::string profile = "dgx-h100";
};

void run_table(const TableOptions& o) {
  if (o.file.empty() == o.preset.empty()) fail_usage("give either a cluster FILE or --preset (with --sus)");
  const double bytes = bytes_or_fail(o.bytes);
  Cluster c = o.file.empty() ? superpod_or_fail(o.preset, o.sus) : load_or_fail(o.file, o.profile);
  std::vector<NodeId> compact(c.node_count());
  for (NodeId n = 0; n < c.node_count(); ++n) compact[n] = n;
  const std::vector<NodeId> scattered = round_robin_nodes(c);
  Json rows = Json::array();
  if (!o.json) {
    std::cout
        << "allreduce of " << format_bytes(bytes) << " on " << c.name() << ": " << c.node_count()
        << " nodes, " << c.gpu_count() << " GPUs, " << c.leaves().size() << " leaf groups\n"
        << "compact: consecutive nodes from the first leaf group; scattered: nodes dealt round-robin over "
           "the leaf groups\n\n";
    std::printf("%6s %6s %12s %7s %12s %7s %9s\n", "GPUs", "nodes", "compact", "leaves", "scattered",
                "leaves", "slowdown");
  }
  for (int gpus : {8, 16, 64, 256, 512}) {
    if (gpus > c.gpu_count()) continue;
    auto a = topology::estimate_allreduce(c, take_gpus(c, compact, gpus), bytes);
    auto b = topology::estimate_allreduce(c, take_gpus(c, scattered, gpus), bytes);
    const double slowdown = b.seconds / a.seconds;
    rows.push_back({{"gpus", gpus},
                    {"compact", estimate_json(a, c, bytes)},
                    {"scattered", estimate_json(b, c, bytes)},
                    {"slowdown", slowdown}});
    if (!o.json)
      std::printf("%6d %6d %12s %7d %12s %7d %8.2fx\n", gpus, a.nodes, format_seconds(a.seconds).c_str(),
                  a.leaves_spanned, format_seconds(b.seconds).c_str(), b.leaves_spanned, slowdown);
  }
  if (o.json)
    std::cout << Json{{"name", c.name()}, {"bytes", byte_count(bytes)}, {"rows", rows}}.dump(2) << std::endl;
}

}  // namespace

void add_cost_command(CLI::App& topo) {
  auto o = std::make_shared<CostOptions>();
  auto* cmd = topo.add_subcommand("cost", "Estimate an allreduce over the GPUs of some nodes");
  cmd->add_option("file", o->file, "Cluster file, JSON or topology.conf (detected)")->required();
  cmd->add_option("--nodes", o->nodes, "Nodes as a host list, e.g. dgx[001-004]")->required();
  cmd->add_option("--gpus-per-node", o->gpus_per_node, "GPUs used on each node (default: all)");
  cmd->add_option("--bytes", o->bytes, "Message size: 8, 64K, 1M, 1G (binary multiples)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->add_option("--profile", o->profile, "Profile of topology.conf nodes without one")
      ->capture_default_str();
  cmd->callback([o] {
    if (o->gpus_per_node < 0) fail_usage("--gpus-per-node must be positive");
    const double bytes = bytes_or_fail(o->bytes);
    Cluster c = load_or_fail(o->file, o->profile);
    auto nodes = nodes_or_fail(c, o->nodes, o->file);
    auto e = topology::estimate_allreduce(c, gpus_or_fail(c, nodes, o->gpus_per_node), bytes);
    if (o->json) {
      std::cout << estimate_json(e, c, bytes).dump(2) << std::endl;
    } else {
      std::vector<std::string> names;
      for (NodeId n : nodes) names.push_back(c.node(n).name);
      print_estimate(e, c, bytes, compress_hostlist(names));
    }
  });
}

void add_table_command(CLI::App& topo) {
  auto o = std::make_shared<TableOptions>();
  auto* cmd =
      topo.add_subcommand("table", "Allreduce cost of compact versus scattered placements, by job size");
  cmd->add_option("file", o->file, "Cluster file, JSON or topology.conf (detected)");
  auto* preset = cmd->add_option("--preset", o->preset, "SuperPOD preset instead of a file");
  cmd->add_option("--sus", o->sus, "Scalable units of the preset")->capture_default_str()->needs(preset);
  cmd->add_option("--bytes", o->bytes, "Message size: 8, 64K, 1M, 1G (binary multiples)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->add_option("--profile", o->profile, "Profile of topology.conf nodes without one")
      ->capture_default_str();
  cmd->callback([o] { run_table(*o); });
}

}  // namespace railyard::cli
