#include "topology/io.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "topology/generator.hpp"
#include "topology/io_test_util.hpp"

namespace railyard::topology {
namespace {

class TopoIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("railyard_io_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  void write(const char* name, const std::string& text) const { std::ofstream(path(name)) << text; }

  std::filesystem::path dir_;
};

TEST_F(TopoIo, DetectsTheFormatFromTheFirstByte) {
  EXPECT_EQ(detect_format("  \n {\"nodes\": []}"), FileFormat::kJson);
  EXPECT_EQ(detect_format("# comment\nSwitchName=s0"), FileFormat::kSlurm);
  EXPECT_EQ(detect_format(""), FileFormat::kSlurm);
  EXPECT_EQ(*format_for_path("a/b.json"), FileFormat::kJson);
  EXPECT_EQ(*format_for_path("topology.conf"), FileFormat::kSlurm);
  EXPECT_FALSE(format_for_path("cluster.yaml"));
  EXPECT_EQ(*parse_file_format("slurm"), FileFormat::kSlurm);
  EXPECT_FALSE(parse_file_format("xml"));
}

TEST_F(TopoIo, SavesAndLoadsBothFormats) {
  auto pod = generate_superpod("dgx-h100-superpod", 2);
  ASSERT_TRUE(pod);
  for (FileFormat f : {FileFormat::kJson, FileFormat::kSlurm}) {
    std::string file = path(f == FileFormat::kJson ? "pod.json" : "pod.conf");
    ASSERT_TRUE(save_cluster_file(*pod, file, f));
    auto back = load_cluster_file(file, "t4-node");
    ASSERT_TRUE(back) << back.error().message;
    testing::expect_same_model(*pod, *back);
  }
}

TEST_F(TopoIo, PlainTopologyConfIsNamedAfterTheFile) {
  write("rack7.conf", "SwitchName=s0 Nodes=n[1-2]\n");
  auto c = load_cluster_file(path("rack7.conf"), "dgx-a100");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->name(), "rack7");
  EXPECT_EQ(c->profile_of(0).name, "dgx-a100");
}

TEST_F(TopoIo, ErrorsNameTheFile) {
  write("bad.json", "{\n  \"nodes\": [,]\n}");
  auto r = load_cluster_file(path("bad.json"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.rfind(path("bad.json") + ": line 2", 0), 0u) << r.error().message;
  auto missing = load_cluster_file(path("missing.json"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(save_cluster_file(*generate_superpod("dgx-h100-superpod", 1), path("no/such/dir.json"),
                                 FileFormat::kJson));
}

}  // namespace
}  // namespace railyard::topology
