#include "topology/io_slurm.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "topology/generator.hpp"
#include "topology/io_test_util.hpp"

namespace railyard::topology {
namespace {

using testing::expect_same_model;

TEST(SlurmIo, ReadsAHandWrittenTree) {
  const char* conf = R"(# Two racks under a spine, two spines under a core
SwitchName=s0 Nodes=dgx[001-004] LinkSpeed=400   # rack 1
switchname=s1 nodes=dgx[005-008]
SWITCHNAME=s2 Nodes=dgx[009-010],login01
SwitchName=spine0 Switches=s[0-1]
SwitchName=spine1 \
    Switches=s2

SwitchName=core Switches=spine[0-1]
)";
  auto c = read_topology_conf(conf, {"dgx-a100", "lab"});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->name(), "lab");
  EXPECT_EQ(c->node_count(), 11);
  EXPECT_EQ(c->profile_of(0).name, "dgx-a100");
  EXPECT_EQ(c->domain(c->find_domain("s2")).level, Level::kLeaf);
  EXPECT_EQ(c->domain(c->find_domain("spine1")).level, Level::kSpine);
  EXPECT_EQ(c->domain(c->find_domain("core")).level, Level::kCore);
  EXPECT_EQ(c->leaves().size(), 3u);
  EXPECT_EQ(c->node(c->find_node("login01")).leaf(), c->find_domain("s2"));
}

TEST(SlurmIo, TreesWithNoCommonRootAreAcceptedWithSlurmsWarning) {
  // Two spines and no core: accepted, as Slurm accepts it, and said, as slurmctld says it.
  auto split = read_topology_conf("SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=b[1-2]\n"
                                  "SwitchName=spine0 Switches=s0\nSwitchName=spine1 Switches=s1\n");
  ASSERT_TRUE(split) << split.error().message;
  const auto warnings = topology_conf_warnings(*split);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("no switch can reach all nodes through its descendants (2 trees, topped by spine0, spine1)"),
            std::string::npos) << warnings[0];
  // Disconnected leaves, no spine at all: the same.
  auto leaves = read_topology_conf("SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=b[1-2]\n");
  ASSERT_TRUE(leaves) << leaves.error().message;
  EXPECT_EQ(topology_conf_warnings(*leaves).size(), 1u);
  // One tree: nothing to say.
  auto whole = read_topology_conf("SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=b[1-2]\nSwitchName=top Switches=s[0-1]\n");
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_TRUE(topology_conf_warnings(*whole).empty());
}

TEST(SlurmIo, GeneratedSuperpodRoundTripsToTheSameModel) {
  auto pod = generate_superpod("dgx-a100-superpod", 9);
  ASSERT_TRUE(pod);
  std::string conf = write_topology_conf(*pod);
  EXPECT_NE(conf.find("SwitchName=su1 Nodes=dgx[001-020]  #railyard switch_count=8 rail_optimized=true"),
            std::string::npos)
      << conf;
  EXPECT_NE(conf.find("SwitchName=spine1 Switches=su[1-8]"), std::string::npos) << conf;
  EXPECT_NE(conf.find("SwitchName=core Switches=spine[1-2]"), std::string::npos) << conf;
  auto back = read_topology_conf(conf);  // the reader's default profile (dgx-h100) is overridden by comments
  ASSERT_TRUE(back) << back.error().message;
  expect_same_model(*pod, *back);
  EXPECT_EQ(write_topology_conf(*back), conf);
}

TEST(SlurmIo, CustomProfilesBlocksAndFeaturesRoundTrip) {
  Cluster lab = testing::mixed_cluster();
  std::string conf = write_topology_conf(lab);
  auto back = read_topology_conf(conf);
  ASSERT_TRUE(back) << back.error().message << "\n" << conf;
  expect_same_model(lab, *back);
  EXPECT_EQ(write_topology_conf(*back), conf);
}

TEST(SlurmIo, WithoutRailyardCommentsSlurmSeesThePlainTree) {
  auto tree = generate_fat_tree({.nodes = 100, .leaf_size = 32, .spine_size = 2, .profile = "dgx-a100"});
  ASSERT_TRUE(tree);
  std::istringstream lines(write_topology_conf(*tree));
  std::string plain, line;
  while (std::getline(lines, line))
    if (line.rfind("#railyard", 0) != 0) plain += line + "\n";
  auto back = read_topology_conf(plain, {"t4-node", "x"});
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->node_count(), 100);
  EXPECT_EQ(back->leaves().size(), 4u);
  EXPECT_EQ(back->profile_of(0).name, "t4-node");
  EXPECT_EQ(back->domain(back->find_domain("core")).level, Level::kCore);
}

struct BadConf {
  std::string name;
  std::string conf;
  std::string expected;
};

void PrintTo(const BadConf& c, std::ostream* os) { *os << c.name; }

class SlurmIoErrors : public ::testing::TestWithParam<BadConf> {};

TEST_P(SlurmIoErrors, NameTheLine) {
  auto r = read_topology_conf(GetParam().conf);
  ASSERT_FALSE(r) << GetParam().name;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find(GetParam().expected), std::string::npos) << r.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SlurmIoErrors,
    ::testing::Values(
        BadConf{"empty", "# nothing\n\n", "no SwitchName lines"},
        BadConf{"unknown key", "SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodez=b1\n",
                "line 2: unknown key \"Nodez\""},
        BadConf{"no equals", "SwitchName=s0 Nodes=a1 fast\n", "line 1: expected Key=Value, got \"fast\""},
        BadConf{"no name", "\n\nNodes=a1\n", "line 3: missing SwitchName"},
        BadConf{"empty value", "SwitchName=s0 Nodes=\n", "line 1: Nodes has no value"},
        BadConf{"twice", "SwitchName=s0 Nodes=a1 nodes=a2\n", "line 1: nodes given twice"},
        BadConf{"bad hostlist", "SwitchName=s0 Nodes=a[1-2\n", "line 1: Nodes: unbalanced '['"},
        BadConf{"undefined", "SwitchName=s0 Nodes=a1\nSwitchName=s1 Switches=s[0,2]\n",
                "line 2: switch \"s1\" names undefined switch \"s2\""},
        BadConf{"undefined other", "SwitchName=s0 Nodes=a1\n# c\nSwitchName=top Switches=s0,s9\n",
                "line 3: switch \"top\" names undefined switch \"s9\""},
        BadConf{"loop", "SwitchName=s0 Nodes=a1\nSwitchName=x Switches=s0,y\nSwitchName=y Switches=x\n",
                "line 2: switches form a loop: x -> y -> x"},
        BadConf{"two switches", "SwitchName=s0 Nodes=a[1-4]\nSwitchName=s1 Nodes=a[4-6]\n",
                "line 2: node \"a4\" is under two switches: \"s0\" (line 1) and \"s1\""},
        BadConf{"listed twice", "SwitchName=s0 Nodes=a[1-4],a2\n", "line 1: node \"a2\" is listed twice"},
        BadConf{"duplicate switch", "SwitchName=s0 Nodes=a1\nSwitchName=s0 Nodes=a2\n",
                "line 2: switch \"s0\" is defined twice (first on line 1)"},
        BadConf{"too deep",
                "SwitchName=l Nodes=a1\nSwitchName=s Switches=l\nSwitchName=c Switches=s\nSwitchName=x "
                "Switches=c\n",
                "line 4: switch \"x\" sits above a core switch"},
        BadConf{"block plugin", "BlockName=b1 Nodes=a[1-4]\n",
                "line 1: BlockName: topology/block is not supported"},
        BadConf{"nodes above", "SwitchName=l Nodes=a1\nSwitchName=s Switches=l Nodes=a2\n",
                "line 2: node \"a2\" hangs off spine switch \"s\""},
        BadConf{"directive", "#railyard colour blue\nSwitchName=l Nodes=a1\n",
                "line 1: unknown #railyard comment"},
        BadConf{"attribute", "SwitchName=l Nodes=a1 #railyard speed=9\n",
                "line 1: #railyard: unknown switch attribute"},
        BadConf{"bad profile", "#railyard nodes a1 profile=dgx-z9\nSwitchName=l Nodes=a1\n",
                "line 1: node \"a1\": unknown profile \"dgx-z9\""},
        BadConf{"profile json", "#railyard profile {\"name\": \"p\", \"gpus\": 8\nSwitchName=l Nodes=a1\n",
                "line 1: #railyard profile: line 1, column"}),
    [](const auto& info) {
      std::string name = info.param.name;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

}  // namespace
}  // namespace railyard::topology
