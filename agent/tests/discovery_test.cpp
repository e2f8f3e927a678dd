#include <gtest/gtest.h>
#include <sys/stat.h>

#include "agent/discovery/inventory.hpp"
#include "agent/discovery/nvml.hpp"
#include "agent/tests/test_util.hpp"

namespace railyard::agent {
namespace {

using testing::TempDir;

const std::filesystem::path kFixtures = RAILYARD_AGENT_FIXTURES;

// Options that find no NVML and no nvidia-smi, whatever the machine has.
DiscoveryOptions no_hardware(const std::filesystem::path& sysfs) {
  DiscoveryOptions o;
  o.node_name = "node7";
  o.sysfs_root = sysfs;
  o.nvml_library = "libnvidia-ml-absent.so.1";
  o.nvidia_smi = "/nonexistent/nvidia-smi";
  return o;
}

TEST(Discovery, EmulatedProfileLooksLikeTheNode) {
  DiscoveryOptions o = no_hardware(kFixtures / "sysfs");
  o.emulate = "dgx-h100";
  auto inv = discover(o);
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->source, "emulated");
  EXPECT_EQ(inv->node, "node7");
  EXPECT_EQ(inv->profile, "dgx-h100");
  EXPECT_EQ(inv->gpu_type, "H100");
  EXPECT_EQ(inv->gpu_count, 8);
  EXPECT_EQ(inv->gpu_memory_bytes, 80LL << 30);
  EXPECT_EQ(inv->nvlink_domain_size, 8);
  ASSERT_EQ(inv->hcas.size(), 8u);
  EXPECT_EQ(inv->hcas[3].name, "mlx5_3");
  EXPECT_DOUBLE_EQ(inv->hcas[3].rate_gbits, 400.0);
  EXPECT_EQ(inv->rail_hca(3), "mlx5_3");
  const auto j = to_json(*inv);
  EXPECT_EQ(j["source"], "emulated");
  EXPECT_EQ(j["gpu_count"], 8);
  EXPECT_EQ(j["hcas"][7]["name"], "mlx5_7");
}

TEST(Discovery, EveryBuiltinProfileEmulates) {
  for (const char* name : {"dgx-1-v100", "dgx-2h", "dgx-a100", "dgx-h100", "dgx-h200", "t4-node"}) {
    auto inv = emulated_inventory(name, "n");
    ASSERT_TRUE(inv) << name;
    EXPECT_GT(inv->gpu_count, 0) << name;
    EXPECT_FALSE(inv->hcas.empty()) << name;
  }
  // DGX-1: 8 GPUs share 4 rails, two GPUs per HCA.
  auto dgx1 = emulated_inventory("dgx-1-v100", "n");
  EXPECT_EQ(dgx1->rail_hca(0), "mlx5_0");
  EXPECT_EQ(dgx1->rail_hca(1), "mlx5_0");
  EXPECT_EQ(dgx1->rail_hca(7), "mlx5_3");
}

TEST(Discovery, UnknownProfileIsAnError) {
  DiscoveryOptions o = no_hardware(kFixtures / "sysfs");
  o.emulate = "dgx-z900";
  auto inv = discover(o);
  ASSERT_FALSE(inv);
  EXPECT_NE(inv.error().message.find("dgx-z900"), std::string::npos);
}

TEST(Discovery, SysfsHcasInRailOrderWithRates) {
  auto hcas = read_sysfs_hcas(kFixtures / "sysfs");
  ASSERT_EQ(hcas.size(), 4u);
  EXPECT_EQ(hcas[0].name, "mlx5_0");
  EXPECT_EQ(hcas[2].name, "mlx5_2");
  EXPECT_EQ(hcas[3].name, "mlx5_10");
  EXPECT_DOUBLE_EQ(hcas[0].rate_gbits, 400.0);
  EXPECT_DOUBLE_EQ(hcas[2].rate_gbits, 200.0);
  EXPECT_EQ(hcas[2].state, "1: DOWN");
  EXPECT_TRUE(read_sysfs_hcas("/nonexistent").empty());
}

TEST(Discovery, NoGpuFallsBackCleanly) {
  auto inv = discover(no_hardware(kFixtures / "sysfs"));
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->source, "none");
  EXPECT_EQ(inv->gpu_count, 0);
  EXPECT_EQ(inv->hcas.size(), 4u);
  ASSERT_EQ(inv->notes.size(), 3u);
  EXPECT_NE(inv->notes[0].find("NVML"), std::string::npos);
  EXPECT_NE(inv->notes[1].find("nvidia-smi"), std::string::npos);
}

TEST(Discovery, NoGpuWithFallbackProfileEmulates) {
  DiscoveryOptions o = no_hardware(kFixtures / "sysfs");
  o.fallback_profile = "dgx-a100";
  auto inv = discover(o);
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->source, "emulated");
  EXPECT_EQ(inv->gpu_count, 8);
  EXPECT_EQ(inv->notes.back(), "no GPU found; emulating dgx-a100");
}

// A stand-in nvidia-smi that prints a DGX A100 matrix and GPU list.
TEST(Discovery, NvidiaSmiThroughTheTopologyParser) {
  TempDir dir;
  const auto smi = dir.path() / "nvidia-smi";
  testing::write_file(
      smi, "#!/bin/sh\ncase \"$1\" in\n  topo) cat '" + (kFixtures / "nvsmi_topo_dgx_a100.txt").string() +
               "' ;;\n  *) i=0; while [ $i -lt 8 ]; do echo \"NVIDIA A100-SXM4-80GB, 81920, Disabled\"; "
               "i=$((i+1)); done ;;\nesac\n");
  chmod(smi.c_str(), 0755);
  DiscoveryOptions o = no_hardware(kFixtures / "sysfs");
  o.nvidia_smi = smi.string();
  auto inv = discover(o);
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->source, "nvidia-smi");
  EXPECT_EQ(inv->gpu_count, 8);
  EXPECT_EQ(inv->profile, "dgx-a100");
  EXPECT_EQ(inv->gpu_type, "A100");
  EXPECT_EQ(inv->gpu_memory_bytes, 81920LL << 20);
  EXPECT_EQ(inv->nvlink_domain_size, 8);
  // Eight compute rails (PXB); the two storage NICs are left out. sysfs adds rates to those it knows.
  ASSERT_EQ(inv->hcas.size(), 8u);
  EXPECT_EQ(inv->hcas[0].name, "mlx5_0");
  EXPECT_DOUBLE_EQ(inv->hcas[0].rate_gbits, 400.0);
  EXPECT_EQ(inv->hcas[4].name, "mlx5_6");
  EXPECT_EQ(inv->notes.size(), 1u);  // why NVML was skipped
}

}  // namespace
}  // namespace railyard::agent

namespace railyard::agent {
namespace {

TEST(Discovery, NvmlThroughDlopen) {
  DiscoveryOptions o = no_hardware(kFixtures / "sysfs");
  o.nvml_library = RAILYARD_FAKE_NVML;
  auto inv = discover(o);
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->source, "nvml");
  EXPECT_EQ(inv->gpu_count, 8);
  EXPECT_EQ(inv->profile, "dgx-h100");
  EXPECT_EQ(inv->gpu_type, "H100");
  EXPECT_EQ(inv->gpu_memory_bytes, 80LL << 30);
  EXPECT_EQ(inv->nvlink_domain_size, 8);
  EXPECT_TRUE(inv->gpus[0].mig_enabled);
  EXPECT_FALSE(inv->gpus[1].mig_enabled);
  EXPECT_EQ(inv->gpus[5].nvlinks_active, 18);
  EXPECT_EQ(inv->gpus[5].nvlinks.size(), 18u);
  EXPECT_EQ(inv->hcas.size(), 4u);  // from the sysfs fixture
  EXPECT_TRUE(inv->notes.empty());
}

TEST(Nvml, TelemetrySamples) {
  auto nvml = Nvml::open(RAILYARD_FAKE_NVML);
  ASSERT_TRUE(nvml) << nvml.error().message;
  auto samples = (*nvml)->sample();
  ASSERT_EQ(samples.size(), 8u);
  EXPECT_EQ(samples[3].utilization_pct, 30u);
  EXPECT_EQ(samples[3].memory_used_bytes, 4LL << 30);
  EXPECT_DOUBLE_EQ(samples[3].power_watts, 350.0);
  EXPECT_FALSE(Nvml::open("libnvidia-ml-absent.so.1"));
}

}  // namespace
}  // namespace railyard::agent
