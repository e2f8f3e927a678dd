// Test helper: compares two cluster models field by field (profiles by content, not by index).
#pragma once

#include <gtest/gtest.h>

#include "topology/cluster.hpp"

namespace railyard::topology::testing {

inline void expect_same_model(const Cluster& a, const Cluster& b) {
  EXPECT_EQ(a.name(), b.name());
  ASSERT_EQ(a.node_count(), b.node_count());
  ASSERT_EQ(a.domains().size(), b.domains().size());
  EXPECT_EQ(a.gpu_count(), b.gpu_count());
  EXPECT_EQ(a.leaves(), b.leaves());
  EXPECT_EQ(a.roots(), b.roots());
  for (NodeId n = 0; n < a.node_count(); ++n) {
    const Node& x = a.node(n);
    const Node& y = b.node(n);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.first_gpu, y.first_gpu);
    EXPECT_EQ(x.up, y.up) << x.name;
    EXPECT_EQ(x.features, y.features) << x.name;
    EXPECT_TRUE(a.profile_of(n) == b.profile_of(n)) << x.name;
  }
  for (DomainId d = 0; d < static_cast<DomainId>(a.domains().size()); ++d) {
    const Domain& x = a.domain(d);
    const Domain& y = b.domain(d);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.level, y.level) << x.name;
    EXPECT_EQ(x.parent, y.parent) << x.name;
    EXPECT_EQ(x.children, y.children) << x.name;
    EXPECT_EQ(x.first_node, y.first_node) << x.name;
    EXPECT_EQ(x.end_node, y.end_node) << x.name;
    EXPECT_EQ(x.switch_count, y.switch_count) << x.name;
    EXPECT_EQ(x.rail_optimized, y.rail_optimized) << x.name;
    EXPECT_EQ(x.oversubscription, y.oversubscription) << x.name;
    EXPECT_EQ(x.block_gbytes_s, y.block_gbytes_s) << x.name;
  }
}

// A small cluster using what the generators do not: a custom profile, an NVLink block, features,
// an oversubscribed leaf and a node hanging directly off a leaf that also has a block below it.
inline Cluster mixed_cluster() {
  ClusterBuilder b("lab");
  NodeProfile gb{"gb-node", "GB200", 186, true, 4, IntraFabric::kNvSwitch, 4, 400, 400, 400, 4, 400, 1.0};
  EXPECT_TRUE(b.add_profile(gb));
  for (const char* n : {"gb01", "gb02", "gb03", "gb04"}) EXPECT_TRUE(b.add_node(n, "gb-node", {"nvl72"}));
  for (const char* n : {"t4-01", "t4-02"}) EXPECT_TRUE(b.add_node(n, "t4-node"));
  EXPECT_TRUE(b.add_node("login1", "dgx-a100", {"login", "ib"}));
  EXPECT_TRUE(b.add_switch({"rack1", Level::kBlock, 9, false, 1.0, 900}));
  EXPECT_TRUE(b.add_switch({"leafA", Level::kLeaf, 2, true}));
  EXPECT_TRUE(b.add_switch({"leafB", Level::kLeaf, 1, false, 2.0}));
  EXPECT_TRUE(b.add_switch({"top", Level::kSpine}));
  for (const char* n : {"gb01", "gb02", "gb03", "gb04"}) EXPECT_TRUE(b.attach_node("rack1", n));
  EXPECT_TRUE(b.attach_node("leafA", "login1"));
  EXPECT_TRUE(b.attach_switch("leafA", "rack1"));
  for (const char* n : {"t4-02", "t4-01"}) EXPECT_TRUE(b.attach_node("leafB", n));
  EXPECT_TRUE(b.attach_switch("top", "leafA"));
  EXPECT_TRUE(b.attach_switch("top", "leafB"));
  auto c = std::move(b).build();
  EXPECT_TRUE(c) << c.error().message;
  return std::move(c).value();
}

}  // namespace railyard::topology::testing
