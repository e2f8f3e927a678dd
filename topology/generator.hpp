// Reference clusters: DGX SuperPODs by scalable unit, and plain fat trees of any size.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "topology/cluster.hpp"

namespace railyard::topology {

struct SuperpodPreset {
  std::string name;          // "dgx-h100-superpod"
  std::string profile;       // node profile
  int nodes_per_su = 0;      // 20 (A100), 32 (H100)
  int sus_per_spine = 0;     // SUs under one spine group before a core level is added
  std::string description;
};
const std::vector<SuperpodPreset>& superpod_presets();

// A rail-optimized SuperPOD: each SU is one leaf group of `profile.hcas` rail leaf switches; SUs hang under
// spine groups of `sus_per_spine`; a core joins the spine groups when there are several.
// Node names are dgx001.. (zero padded to at least three digits). Errors: unknown preset, sus < 1.
Result<Cluster> generate_superpod(std::string_view preset, int sus);

struct FatTreeSpec {
  int nodes = 0;
  int leaf_size = 32;        // nodes per leaf switch
  int spine_size = 16;       // leaves per spine group; a core joins several spine groups
  std::string profile = "dgx-h100";
  std::string node_prefix = "node";
  double leaf_oversubscription = 1.0;  // leaf -> spine uplinks: 2.0 means 2:1 blocking
};
// A plain (not rail-optimized) fat tree: all HCAs of a node go to one leaf switch.
Result<Cluster> generate_fat_tree(const FatTreeSpec& spec);

}  // namespace railyard::topology
