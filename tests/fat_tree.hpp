// A generated fat tree for tests: `nodes` nodes in leaf groups of `leaf` (a failed generation fails the test).
#pragma once

#include <gtest/gtest.h>

#include <utility>

#include "topology/generator.hpp"

namespace railyard::test_clusters {

inline topology::Cluster fat_tree(int nodes, int leaf) {
  topology::FatTreeSpec spec;
  spec.nodes = nodes;
  spec.leaf_size = leaf;
  auto c = topology::generate_fat_tree(spec);
  EXPECT_TRUE(c) << c.error().message;
  return std::move(c).value();
}

}  // namespace railyard::test_clusters
