#include <gtest/gtest.h>

#include "topology/cluster.hpp"
#include "topology/generator.hpp"

namespace railyard::topology {
namespace {

TEST(Generator, SuperpodCountsPerPreset) {
  struct Case { const char* preset; int sus, nodes, leaves; bool core; };
  for (const Case& c : {Case{"dgx-a100-superpod", 7, 140, 7, false}, Case{"dgx-h100-superpod", 4, 128, 4, false},
                        Case{"dgx-h100-superpod", 9, 288, 9, true}}) {
    auto r = generate_superpod(c.preset, c.sus);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->node_count(), c.nodes) << c.preset;
    EXPECT_EQ(r->gpu_count(), c.nodes * 8);
    EXPECT_EQ(static_cast<int>(r->leaves().size()), c.leaves);
    const Domain& leaf = r->domain(r->leaves().front());
    EXPECT_TRUE(leaf.rail_optimized);
    EXPECT_EQ(leaf.switch_count, 8);  // one rail leaf switch per HCA
    EXPECT_EQ(r->find_domain("core") >= 0, c.core);
    ASSERT_EQ(r->roots().size(), 1u);
    EXPECT_EQ(r->domain(r->roots().front()).node_count(), c.nodes);
  }
}

TEST(Generator, RejectsUnknownPresetAndBadSizes) {
  auto r = generate_superpod("dgx-z900-superpod", 4);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("dgx-z900-superpod"), std::string::npos);
  EXPECT_FALSE(generate_superpod("dgx-h100-superpod", 0));
  EXPECT_FALSE(generate_fat_tree({.nodes = 0}));
  EXPECT_FALSE(generate_fat_tree({.nodes = 10, .leaf_size = 0}));
}

TEST(Generator, FatTreeOf10kNodesHasCoreAndContiguousDomains) {
  auto r = generate_fat_tree({.nodes = 10'000, .leaf_size = 32, .spine_size = 16});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->gpu_count(), 80'000);
  EXPECT_EQ(static_cast<int>(r->leaves().size()), 313);
  EXPECT_GE(r->find_domain("core"), 0);
  // Each leaf covers a contiguous node range and its nodes point back at it.
  for (DomainId l : r->leaves()) {
    const Domain& d = r->domain(l);
    for (NodeId n = d.first_node; n < d.end_node; ++n) EXPECT_EQ(r->node(n).leaf(), l);
  }
}

TEST(Cluster, SmallestDomainWalksUpTheTree) {
  auto c = generate_superpod("dgx-h100-superpod", 9);  // 2 spine groups + core
  ASSERT_TRUE(c);
  auto gpu = [&](const char* node, int local) { return c->node(c->find_node(node)).first_gpu + local; };
  std::vector<GpuId> one = {gpu("dgx001", 3)};
  EXPECT_EQ(c->smallest_domain(one).level, Level::kGpu);
  std::vector<GpuId> in_node = {gpu("dgx001", 0), gpu("dgx001", 7)};
  EXPECT_EQ(c->smallest_domain(in_node).level, Level::kNode);
  std::vector<GpuId> in_su = {gpu("dgx001", 0), gpu("dgx032", 0)};
  auto d = c->smallest_domain(in_su);
  EXPECT_EQ(d.level, Level::kLeaf);
  EXPECT_EQ(c->domain(d.id).name, "su1");
  std::vector<GpuId> in_spine = {gpu("dgx001", 0), gpu("dgx033", 0)};
  EXPECT_EQ(c->smallest_domain(in_spine).level, Level::kSpine);
  std::vector<GpuId> across = {gpu("dgx001", 0), gpu("dgx288", 0)};
  EXPECT_EQ(c->smallest_domain(across).level, Level::kCore);
}

TEST(Cluster, CubeMeshHalvesAreNvlinkDomains) {
  ClusterBuilder b;
  ASSERT_TRUE(b.add_node("v1", "dgx-1-v100"));
  auto c = std::move(b).build();
  ASSERT_TRUE(c) << c.error().message;
  std::vector<GpuId> half = {0, 1, 2, 3};
  std::vector<GpuId> split = {2, 3, 4, 5};
  EXPECT_EQ(c->smallest_domain(half).level, Level::kNvlDomain);
  EXPECT_EQ(c->smallest_domain(split).level, Level::kNode);
}

TEST(Cluster, LeavesSpannedAndMinimum) {
  auto c = generate_superpod("dgx-a100-superpod", 4);  // 4 SUs of 20 nodes
  ASSERT_TRUE(c);
  std::vector<NodeId> nodes = {0, 1, 19, 20, 79};
  EXPECT_EQ(c->leaves_spanned(nodes), 3);
  std::vector<NodeId> unsorted = {79, 1, 20, 0, 19, 79};
  EXPECT_EQ(c->leaves_spanned(unsorted), 3);
  EXPECT_EQ(c->min_leaves_for_nodes(1), 1);
  EXPECT_EQ(c->min_leaves_for_nodes(20), 1);
  EXPECT_EQ(c->min_leaves_for_nodes(21), 2);
  EXPECT_EQ(c->min_leaves_for_nodes(80), 4);
}

TEST(Builder, ReportsStructuralErrorsByName) {
  {
    ClusterBuilder b;
    ASSERT_TRUE(b.add_node("n1", "dgx-h100"));
    auto dup = b.add_node("n1", "dgx-h100");
    ASSERT_FALSE(dup);
    EXPECT_NE(dup.error().message.find("duplicate node name \"n1\""), std::string::npos);
    EXPECT_FALSE(b.add_node("n2", "no-such-profile"));
  }
  {
    ClusterBuilder b;
    ASSERT_TRUE(b.add_switch({"a", Level::kSpine}));
    ASSERT_TRUE(b.add_switch({"b", Level::kLeaf}));
    auto bad = b.attach_switch("b", "a");  // a spine under a leaf
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("levels must rise"), std::string::npos);
    auto undefined = b.attach_switch("a", "zz");
    ASSERT_FALSE(undefined);
    EXPECT_NE(undefined.error().message.find("undefined switch \"zz\""), std::string::npos);
  }
  {
    ClusterBuilder b;
    ASSERT_TRUE(b.add_node("n1", "dgx-h100"));
    ASSERT_TRUE(b.add_node("n2", "dgx-h100"));
    ASSERT_TRUE(b.add_switch({"l1", Level::kLeaf}));
    ASSERT_TRUE(b.attach_node("l1", "n1"));
    EXPECT_FALSE(b.attach_node("l1", "n1"));  // twice
    auto r = std::move(b).build();
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("\"n2\" is attached to no switch"), std::string::npos);
  }
}

}  // namespace
}  // namespace railyard::topology
