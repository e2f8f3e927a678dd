#include "topology/generator.hpp"

#include <algorithm>

namespace railyard::topology {
namespace {

std::string numbered(std::string_view prefix, int i, int total) {
  std::string digits = std::to_string(i);
  size_t width = std::max<size_t>(3, std::to_string(total).size());
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return std::string(prefix) + digits;
}

// Adds spine groups over `leaves` (in order) and a core over the spine groups when there is more than one.
Status add_upper_levels(ClusterBuilder& b, const std::vector<std::string>& leaves, int per_spine) {
  int groups = (static_cast<int>(leaves.size()) + per_spine - 1) / per_spine;
  if (groups <= 1 && leaves.size() == 1) return ok();  // a single leaf group needs nothing above it
  for (int g = 0; g < groups; ++g) {
    std::string spine = groups == 1 ? "spine" : "spine" + std::to_string(g + 1);
    if (auto s = b.add_switch({spine, Level::kSpine}); !s) return s;
    for (size_t i = g * per_spine; i < std::min(leaves.size(), static_cast<size_t>((g + 1) * per_spine)); ++i)
      if (auto s = b.attach_switch(spine, leaves[i]); !s) return s;
  }
  if (groups > 1) {
    if (auto s = b.add_switch({"core", Level::kCore}); !s) return s;
    for (int g = 0; g < groups; ++g)
      if (auto s = b.attach_switch("core", "spine" + std::to_string(g + 1)); !s) return s;
  }
  return ok();
}

}  // namespace

const std::vector<SuperpodPreset>& superpod_presets() {
  static const std::vector<SuperpodPreset> presets = {
      {"dgx-a100-superpod", "dgx-a100", 20, 8,
       "DGX A100 SuperPOD: 20 nodes per SU, 8 HDR 200 Gb/s rails per node (RA-10059)"},
      {"dgx-h100-superpod", "dgx-h100", 32, 8,
       "DGX H100 SuperPOD: 32 nodes per SU, 8 NDR 400 Gb/s rails per node (RA-11333)"},
      {"dgx-h200-superpod", "dgx-h200", 32, 8, "DGX H200 SuperPOD: as the H100 one, with H200 GPUs"},
  };
  return presets;
}

Result<Cluster> generate_superpod(std::string_view preset, int sus) {
  const SuperpodPreset* p = nullptr;
  for (const auto& candidate : superpod_presets())
    if (candidate.name == preset) p = &candidate;
  if (!p) {
    std::string known;
    for (const auto& c : superpod_presets()) known += (known.empty() ? "" : ", ") + c.name;
    return invalid("unknown preset \"" + std::string(preset) + "\" (known: " + known + ")");
  }
  if (sus < 1 || sus > 1000) return invalid("--sus must be between 1 and 1000, got " + std::to_string(sus));
  const NodeProfile* profile = find_builtin_profile(p->profile);
  ClusterBuilder b(std::string(preset) + "-" + std::to_string(sus) + "su");
  int total = sus * p->nodes_per_su;
  std::vector<std::string> leaves;
  for (int su = 0; su < sus; ++su) {
    std::string leaf = "su" + std::to_string(su + 1);
    if (auto s = b.add_switch({leaf, Level::kLeaf, profile->hcas, true}); !s) return s.error();
    leaves.push_back(leaf);
    for (int i = 0; i < p->nodes_per_su; ++i) {
      std::string node = numbered("dgx", su * p->nodes_per_su + i + 1, total);
      if (auto s = b.add_node(node, p->profile); !s) return s.error();
      if (auto s = b.attach_node(leaf, node); !s) return s.error();
    }
  }
  if (auto s = add_upper_levels(b, leaves, p->sus_per_spine); !s) return s.error();
  return std::move(b).build();
}

Result<Cluster> generate_fat_tree(const FatTreeSpec& spec) {
  if (spec.nodes < 1 || spec.nodes > 200'000)
    return invalid("--nodes must be between 1 and 200000, got " + std::to_string(spec.nodes));
  if (spec.leaf_size < 1) return invalid("--leaf-size must be at least 1");
  if (spec.spine_size < 1) return invalid("--spine-size must be at least 1");
  if (!find_builtin_profile(spec.profile)) return invalid("unknown profile \"" + spec.profile + "\"");
  ClusterBuilder b("fat-tree-" + std::to_string(spec.nodes));
  std::vector<std::string> leaves;
  int leaf_count = (spec.nodes + spec.leaf_size - 1) / spec.leaf_size;
  for (int l = 0; l < leaf_count; ++l) {
    std::string leaf = numbered("leaf", l + 1, leaf_count);
    if (auto s = b.add_switch({leaf, Level::kLeaf, 1, false, spec.leaf_oversubscription}); !s) return s.error();
    leaves.push_back(leaf);
    for (int i = l * spec.leaf_size; i < std::min(spec.nodes, (l + 1) * spec.leaf_size); ++i) {
      std::string node = numbered(spec.node_prefix, i + 1, spec.nodes);
      if (auto s = b.add_node(node, spec.profile); !s) return s.error();
      if (auto s = b.attach_node(leaf, node); !s) return s.error();
    }
  }
  if (auto s = add_upper_levels(b, leaves, spec.spine_size); !s) return s.error();
  return std::move(b).build();
}

}  // namespace railyard::topology
