#include "topology/io_json.hpp"

#include <gtest/gtest.h>

#include "topology/generator.hpp"
#include "topology/io_test_util.hpp"

namespace railyard::topology {
namespace {

using testing::expect_same_model;

TEST(JsonIo, GeneratedSuperpodRoundTripsToTheSameModel) {
  auto pod = generate_superpod("dgx-h100-superpod", 9);  // 9 SUs: two spine groups and a core
  ASSERT_TRUE(pod) << pod.error().message;
  std::string text = write_cluster_json(*pod);
  EXPECT_NE(text.find(R"("names":"dgx[001-288]")"), std::string::npos) << text.substr(0, 400);
  EXPECT_NE(text.find(R"("nodes":"dgx[001-032]")"), std::string::npos);
  EXPECT_EQ(text.find("\"profiles\""), std::string::npos) << "built-in profiles are known by name";
  EXPECT_EQ(text.find("oversubscription"), std::string::npos) << "defaults are left out";
  auto back = read_cluster_json(text);
  ASSERT_TRUE(back) << back.error().message;
  expect_same_model(*pod, *back);
  EXPECT_EQ(write_cluster_json(*back), text);
}

TEST(JsonIo, CustomProfilesBlocksAndFeaturesRoundTrip) {
  Cluster lab = testing::mixed_cluster();
  std::string text = write_cluster_json(lab);
  EXPECT_NE(text.find(R"("name":"gb-node")"), std::string::npos);
  auto back = read_cluster_json(text);
  ASSERT_TRUE(back) << back.error().message << "\n" << text;
  expect_same_model(lab, *back);
  EXPECT_EQ(write_cluster_json(*back), text);
}

TEST(JsonIo, ReadsTheDocumentedExample) {
  const char* text = R"({"version": 1, "name": "example",
  // comments are allowed
  "profiles": [{"name": "my-node", "gpu_type": "H100", "gpus": 8, "intra_gbytes_s": 370, "hcas": 8,
                "hca_gbits_s": 400}],
  "nodes": [{"names": "dgx[001-004]", "profile": "dgx-h100", "features": ["ib"]},
            {"name": "t4-01", "profile": "t4-node"},
            {"names": ["my1", "my2"], "profile": "my-node"}],
  "switches": [{"name": "su1", "level": "leaf", "nodes": "dgx[001-004]", "switch_count": 8, "rail_optimized": true},
               {"name": "misc", "level": "leaf", "nodes": "t4-01,my[1-2]", "oversubscription": 2.0},
               {"name": "spine", "level": "spine", "children": ["su1", "misc"]}]})";
  auto c = read_cluster_json(text);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->name(), "example");
  EXPECT_EQ(c->node_count(), 7);
  EXPECT_EQ(c->gpu_count(), 4 * 8 + 4 + 2 * 8);
  EXPECT_EQ(c->node(0).features, std::vector<std::string>{"ib"});
  const NodeProfile& mine = c->profile_of(c->find_node("my2"));
  EXPECT_EQ(mine.gpu_type, "H100");
  EXPECT_EQ(mine.nvlink_domain_size, 8);  // defaults: the whole node on NVSwitch
  EXPECT_EQ(mine.cross_gbytes_s, 370);
  EXPECT_EQ(c->domain(c->find_domain("misc")).oversubscription, 2.0);
  EXPECT_TRUE(c->domain(c->find_domain("su1")).rail_optimized);
  EXPECT_EQ(c->domain(c->roots().front()).name, "spine");
}

TEST(JsonIo, NodesWithoutAProfileGetTheDefault) {
  auto c = read_cluster_json(R"({"nodes": [{"names": "n[1-2]"}]})", {"dgx-a100"});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->profile_of(0).name, "dgx-a100");
  EXPECT_EQ(c->domains().size(), 1u);  // a flat cluster gets one leaf
}

TEST(JsonIo, MalformedJsonNamesLineAndColumn) {
  // The position is that of the last byte read, as nlohmann reports it: the end of the unexpected token.
  auto r =
      read_cluster_json("{\n  \"name\": \"x\",\n  \"nodes\": [ {\"name\": \"a\"} \n  \"switches\": []\n}");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("line 4, column 12"), std::string::npos) << r.error().message;
  auto truncated = read_cluster_json("{\"nodes\": [");
  ASSERT_FALSE(truncated);
  EXPECT_NE(truncated.error().message.find("line 1"), std::string::npos) << truncated.error().message;
}

struct BadCase {
  std::string name;
  std::string json;
  std::string expected;  // a substring of the error message
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class JsonIoErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(JsonIoErrors, NameTheProblem) {
  auto r = read_cluster_json(GetParam().json);
  ASSERT_FALSE(r) << GetParam().name;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find(GetParam().expected), std::string::npos) << r.error().message;
}

constexpr const char* kTwoLeaves = R"("nodes": [{"names": "n[1-4]"}], "switches": [
    {"name": "a", "level": "leaf", "nodes": "n[1-2]"}, {"name": "b", "level": "leaf", "nodes": "n[3-4]"}, )";

INSTANTIATE_TEST_SUITE_P(
    Cases, JsonIoErrors,
    ::testing::Values(
        BadCase{"top", "[1, 2]", "top level must be an object"},
        BadCase{"version", R"({"version": 2, "nodes": []})", "version: unsupported version 2"},
        BadCase{"no nodes", R"({"name": "x"})", "nodes: missing"},
        BadCase{"unknown top", R"({"nodes": [{"name": "a"}], "nodez": 1})", "nodez: unknown field"},
        BadCase{"unknown switch field",
                R"({"nodes": [{"name": "a"}], "switches": [{"name": "s", "level": "leaf"},
          {"name": "t", "level": "leaf"}, {"name": "u", "level": "leaf"}, {"name": "v", "level": "leaf", "nodez": "a"}]})",
                "switches[3].nodez: unknown field"},
        BadCase{"wrong type",
                R"({"profiles": [{"name": "p", "gpus": "8", "intra_gbytes_s": 1}], "nodes": []})",
                "profiles[0].gpus: expected an integer, got string \"8\""},
        BadCase{"wrong bool", R"({"nodes": [{"name": "a"}], "switches": [{"name": "s", "level": "leaf",
          "rail_optimized": "yes"}]})",
                "switches[0].rail_optimized: expected true or false"},
        BadCase{"bad fabric",
                R"({"profiles": [{"name": "p", "gpus": 8, "intra_gbytes_s": 1, "fabric": "mesh"}],
          "nodes": []})",
                "profiles[0].fabric: unknown fabric \"mesh\""},
        BadCase{"bad profile",
                R"({"profiles": [{"name": "p", "gpus": 0, "intra_gbytes_s": 1}], "nodes": []})",
                "profiles[0]: profile \"p\": gpus must be 1..64"},
        BadCase{"duplicate node", R"({"nodes": [{"names": "n[1-3]"}, {"name": "n2"}]})",
                "nodes[1]: duplicate node name \"n2\""},
        BadCase{"name and names", R"({"nodes": [{"name": "a", "names": "b[1-2]"}]})",
                "nodes[0]: give either"},
        BadCase{"bad hostlist", R"({"nodes": [{"names": "n[3-1]"}]})", "nodes[0].names: reversed range"},
        BadCase{"unknown profile", R"({"nodes": [{"name": "a"}, {"name": "b", "profile": "dgx-z9"}]})",
                "nodes[1].profile: unknown profile \"dgx-z9\""},
        BadCase{"unknown level", R"({"nodes": [{"name": "a"}], "switches": [{"name": "s", "level": "tor"}]})",
                "switches[0].level: unknown switch level \"tor\""},
        BadCase{"undefined switch", std::string("{") + kTwoLeaves + R"({"name": "sp", "level": "spine",
          "children": ["a", "b", "c"]}]})",
                "switches[2].children: switch \"sp\" names undefined switch \"c\""},
        BadCase{"unknown node", R"({"nodes": [{"name": "a"}], "switches": [{"name": "s", "level": "leaf",
          "nodes": "a,zz"}]})",
                "switches[0].nodes: switch \"s\" names unknown node \"zz\""},
        BadCase{"node twice", R"({"nodes": [{"names": "n[1-2]"}], "switches": [
          {"name": "a", "level": "leaf", "nodes": "n[1-2]"}, {"name": "b", "level": "leaf", "nodes": "n2"}]})",
                "switches[1].nodes: node \"n2\" is attached to both \"a\" and \"b\""},
        BadCase{"loop",
                R"({"nodes": [{"name": "a"}], "switches": [{"name": "l", "level": "leaf", "nodes": "a"},
          {"name": "s1", "level": "spine", "children": ["s2"]}, {"name": "s2", "level": "core", "children": ["s1"]}]})",
                "switches form a loop: s1 -> s2 -> s1"},
        BadCase{"self loop",
                R"({"nodes": [{"name": "a"}], "switches": [{"name": "s", "level": "leaf", "nodes": "a",
          "children": ["s"]}]})",
                "loop: s -> s"},
        BadCase{"levels",
                R"({"nodes": [{"name": "a"}], "switches": [{"name": "l", "level": "leaf", "nodes": "a",
          "children": ["sp"]}, {"name": "sp", "level": "spine"}]})",
                "switches[0].children: switch \"l\" (leaf) cannot sit above"}),
    [](const auto& info) {
      std::string name = info.param.name;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

TEST(JsonIo, ProfileJsonRoundTrips) {
  for (const NodeProfile& p : builtin_profiles()) {
    auto back = profile_from_json(profile_to_json(p));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_TRUE(*back == p) << p.name;
  }
  EXPECT_FALSE(profile_from_json("{\"name\": 3}"));
}

}  // namespace
}  // namespace railyard::topology
