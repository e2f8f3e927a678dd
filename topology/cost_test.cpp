#include <gtest/gtest.h>

#include <numeric>

#include "topology/cost.hpp"
#include "topology/generator.hpp"

namespace railyard::topology {
namespace {

class CostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = generate_superpod("dgx-h100-superpod", 4);
    ASSERT_TRUE(r);
    cluster_ = std::make_unique<Cluster>(std::move(r).value());
  }
  std::vector<GpuId> whole(std::initializer_list<const char*> names) {
    std::vector<NodeId> ids;
    for (auto n : names) ids.push_back(cluster_->find_node(n));
    return gpus_of_nodes(*cluster_, ids);
  }
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(CostTest, OneNvSwitchNodeRunsNearNvlinkSpeed) {
  auto e = estimate_allreduce(*cluster_, whole({"dgx001"}), 1e9);
  const double nvlink = cluster_->profile_of(0).full_node_gbytes_s;
  EXPECT_GT(e.bus_gbytes_s, 0.95 * nvlink);
  EXPECT_LE(e.bus_gbytes_s, nvlink);
  EXPECT_EQ(e.span, Level::kNode);
}

TEST_F(CostTest, TwoNodesRunNearAggregateIb) {
  auto e = estimate_allreduce(*cluster_, whole({"dgx001", "dgx002"}), 1e9);
  const double ib = 8 * 400.0 / 8;  // 8 rails x 400 Gb/s = 400 GB/s
  EXPECT_GT(e.bus_gbytes_s, 0.9 * ib);
  EXPECT_LE(e.bus_gbytes_s, ib);
  EXPECT_EQ(e.leaves_spanned, 1);
  EXPECT_DOUBLE_EQ(e.bottleneck_gbits_s, 400.0);
}

TEST_F(CostTest, MonotonicInBytes) {
  auto gpus = whole({"dgx001", "dgx040", "dgx090"});
  double prev = 0;
  for (double bytes = 8; bytes <= 4e9; bytes *= 4) {
    double t = estimate_allreduce(*cluster_, gpus, bytes).seconds;
    EXPECT_GT(t, prev) << bytes;
    prev = t;
  }
}

TEST_F(CostTest, NeverFasterAcrossMoreSwitches) {
  for (double bytes : {1e3, 1e6, 1e9}) {
    auto same_leaf = estimate_allreduce(*cluster_, whole({"dgx001", "dgx002"}), bytes);
    auto two_leaves = estimate_allreduce(*cluster_, whole({"dgx001", "dgx033"}), bytes);
    EXPECT_LT(same_leaf.seconds, two_leaves.seconds) << bytes;
    EXPECT_EQ(two_leaves.leaves_spanned, 2);
    EXPECT_EQ(two_leaves.span, Level::kSpine);
  }
}

TEST_F(CostTest, WithinNodeFasterThanAcrossNodes) {
  std::vector<GpuId> in_node = whole({"dgx001"});
  std::vector<GpuId> spread;
  for (int i = 0; i < 8; ++i) spread.push_back(cluster_->node(i).first_gpu);  // GPU 0 of 8 nodes
  for (double bytes : {1e3, 1e9}) {
    EXPECT_LT(estimate_allreduce(*cluster_, in_node, bytes).seconds,
              estimate_allreduce(*cluster_, spread, bytes).seconds);
  }
}

TEST_F(CostTest, CrossingRailsCostsTheSpinePath) {
  // 4 GPUs on each of two nodes of one SU: same indices stay on their rails, shifted indices do not.
  std::vector<GpuId> aligned = {0, 1, 2, 3, 8, 9, 10, 11};
  std::vector<GpuId> shifted = {0, 1, 2, 3, 12, 13, 14, 15};
  auto a = estimate_allreduce(*cluster_, aligned, 1e6);
  auto s = estimate_allreduce(*cluster_, shifted, 1e6);
  EXPECT_TRUE(a.rail_aligned);
  EXPECT_FALSE(s.rail_aligned);
  EXPECT_LT(a.seconds, s.seconds);
}

TEST(CostOversubscription, SlowerBandwidthAboveAnOversubscribedLeaf) {
  auto blocking = generate_fat_tree({.nodes = 64, .leaf_size = 32, .spine_size = 16, .leaf_oversubscription = 2.0});
  auto clean = generate_fat_tree({.nodes = 64, .leaf_size = 32, .spine_size = 16});
  ASSERT_TRUE(blocking && clean);
  std::vector<NodeId> two = {0, 40};
  auto b = estimate_allreduce(*blocking, gpus_of_nodes(*blocking, two), 1e9);
  auto c = estimate_allreduce(*clean, gpus_of_nodes(*clean, two), 1e9);
  EXPECT_EQ(c.span, Level::kSpine);
  EXPECT_DOUBLE_EQ(c.bottleneck_gbits_s, 400.0);
  EXPECT_DOUBLE_EQ(b.bottleneck_gbits_s, 200.0);
  EXPECT_GT(b.seconds, 1.5 * c.seconds);
}

TEST(CostCubeMesh, FourGpusInOneHalfBeatFourAcrossHalves) {
  ClusterBuilder builder;
  ASSERT_TRUE(builder.add_node("v1", "dgx-1-v100"));
  auto c = std::move(builder).build();
  ASSERT_TRUE(c);
  std::vector<GpuId> half = {0, 1, 2, 3}, split = {0, 1, 4, 5};
  EXPECT_LT(estimate_allreduce(*c, half, 1e8).seconds, estimate_allreduce(*c, split, 1e8).seconds);
}

TEST_F(CostTest, OrderOfGpusAndPartialNodesDoNotMatter) {
  // Whole nodes, a partial node and GPUs out of order: the estimate works on the set, not the sequence.
  std::vector<GpuId> sorted = whole({"dgx001", "dgx002", "dgx040"});
  sorted.push_back(cluster_->node(cluster_->find_node("dgx090")).first_gpu + 3);
  std::vector<GpuId> shuffled(sorted.rbegin(), sorted.rend());
  std::swap(shuffled[3], shuffled[11]);
  for (double bytes : {1e3, 1e9}) {
    auto a = estimate_allreduce(*cluster_, sorted, bytes);
    auto b = estimate_allreduce(*cluster_, shuffled, bytes);
    EXPECT_EQ(a.seconds, b.seconds);
    EXPECT_EQ(a.nodes, 4);
    EXPECT_EQ(b.leaves_spanned, 3);
    EXPECT_EQ(a.span, b.span);
    EXPECT_FALSE(b.rail_aligned);
  }
}

TEST_F(CostTest, SingleGpuCostsNothing) {
  std::vector<GpuId> one = {5};
  EXPECT_EQ(estimate_allreduce(*cluster_, one, 1e9).seconds, 0.0);
}

}  // namespace
}  // namespace railyard::topology
