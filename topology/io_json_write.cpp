// The JSON cluster file writer (the reader is in io_json.cpp).
#include "topology/io_json.hpp"

#include <nlohmann/json.hpp>

#include "common/hostlist.hpp"

namespace railyard::topology {
namespace {

using OrderedJson = nlohmann::ordered_json;  // keeps fields in the order written

OrderedJson profile_object(const NodeProfile& p) {
  return OrderedJson{{"name", p.name},
                     {"gpu_type", p.gpu_type},
                     {"gpu_memory_gb", p.gpu_memory_gb},
                     {"mig_capable", p.mig_capable},
                     {"gpus", p.gpus},
                     {"fabric", std::string(to_string(p.fabric))},
                     {"nvlink_domain_size", p.nvlink_domain_size},
                     {"intra_gbytes_s", p.intra_gbytes_s},
                     {"cross_gbytes_s", p.cross_gbytes_s},
                     {"full_node_gbytes_s", p.full_node_gbytes_s},
                     {"hcas", p.hcas},
                     {"hca_gbits_s", p.hca_gbits_s},
                     {"intra_latency_us", p.intra_latency_us}};
}

// A compressed host list when it expands back to exactly `names`, else the plain array.
OrderedJson name_list(const std::vector<std::string>& names) {
  std::string compressed = compress_hostlist(names);
  auto back = expand_hostlist(compressed);
  if (back && *back == names) return compressed;
  return names;
}

std::vector<OrderedJson> node_entries(const Cluster& c) {
  std::vector<OrderedJson> out;
  for (NodeId n = 0; n < c.node_count();) {
    const Node& first = c.node(n);
    std::vector<std::string> names;
    for (; n < c.node_count() && c.node(n).profile == first.profile && c.node(n).features == first.features;
         ++n)
      names.push_back(c.node(n).name);
    OrderedJson e;
    if (names.size() == 1) {
      e["name"] = names.front();
    } else {
      e["names"] = name_list(names);
    }
    e["profile"] = c.profiles()[first.profile].name;
    if (!first.features.empty()) e["features"] = first.features;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<OrderedJson> switch_entries(const Cluster& c) {
  std::vector<OrderedJson> out;
  for (const Domain& d : c.domains()) {
    OrderedJson e{{"name", d.name}, {"level", std::string(to_string(d.level))}};
    // Nodes attached directly come before those of child switches in the depth-first layout.
    NodeId direct_end = d.children.empty() ? d.end_node : c.domain(d.children.front()).first_node;
    std::vector<std::string> nodes;
    for (NodeId n = d.first_node; n < direct_end; ++n) nodes.push_back(c.node(n).name);
    if (!nodes.empty()) e["nodes"] = name_list(nodes);
    if (!d.children.empty()) {
      e["children"] = OrderedJson::array();
      for (DomainId child : d.children) e["children"].push_back(c.domain(child).name);
    }
    if (d.switch_count != 1) e["switch_count"] = d.switch_count;
    if (d.rail_optimized) e["rail_optimized"] = true;
    if (d.oversubscription != 1.0) e["oversubscription"] = d.oversubscription;
    if (d.block_gbytes_s != 0) e["block_gbytes_s"] = d.block_gbytes_s;
    out.push_back(std::move(e));
  }
  return out;
}

void append_array(std::string& out, const char* key, const std::vector<OrderedJson>& items) {
  if (items.empty()) return;
  out += ",\n  \"" + std::string(key) + "\": [";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ",\n    " : "\n    ") + items[i].dump();
  out += "\n  ]";
}

}  // namespace

std::string write_cluster_json(const Cluster& cluster) {
  std::string out = "{\n  \"version\": 1,\n  \"name\": " + OrderedJson(cluster.name()).dump();
  std::vector<OrderedJson> profiles;
  for (const NodeProfile& p : cluster.profiles()) {
    const NodeProfile* builtin = find_builtin_profile(p.name);
    if (!builtin || !(*builtin == p)) profiles.push_back(profile_object(p));
  }
  append_array(out, "profiles", profiles);
  append_array(out, "nodes", node_entries(cluster));
  append_array(out, "switches", switch_entries(cluster));
  out += "\n}\n";
  return out;
}

std::string profile_to_json(const NodeProfile& profile) { return profile_object(profile).dump(); }

}  // namespace railyard::topology
