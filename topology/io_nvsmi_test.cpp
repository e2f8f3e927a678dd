#include <gtest/gtest.h>

#include "topology/io_nvsmi.hpp"

namespace railyard::topology {
namespace {

// `nvidia-smi topo -m` as printed on the three DGX generations. The DGX-1 text is as often pasted into bug
// reports (tabs turned into spaces, old mlx5_N column labels); the others keep nvidia-smi's tabs.

// DGX-1 with V100 (hybrid cube-mesh: two fully linked quads, one link from each GPU to the other quad;
// NV2 = two bonded NVLinks), four EDR HCAs shared by GPU pairs, old driver without a NIC Legend.
constexpr const char* kDgx1V100 = R"(        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    mlx5_0  mlx5_2  mlx5_1  mlx5_3  CPU Affinity
GPU0     X      NV1     NV1     NV2     NV2     SYS     SYS     SYS     PIX     SYS     PHB     SYS     0-19,40-59
GPU1    NV1      X      NV2     NV1     SYS     NV2     SYS     SYS     PIX     SYS     PHB     SYS     0-19,40-59
GPU2    NV1     NV2      X      NV2     SYS     SYS     NV1     SYS     PHB     SYS     PIX     SYS     0-19,40-59
GPU3    NV2     NV1     NV2      X      SYS     SYS     SYS     NV1     PHB     SYS     PIX     SYS     0-19,40-59
GPU4    NV2     SYS     SYS     SYS      X      NV1     NV1     NV2     SYS     PIX     SYS     PHB     20-39,60-79
GPU5    SYS     NV2     SYS     SYS     NV1      X      NV2     NV1     SYS     PIX     SYS     PHB     20-39,60-79
GPU6    SYS     SYS     NV1     SYS     NV1     NV2      X      NV2     SYS     PHB     SYS     PIX     20-39,60-79
GPU7    SYS     SYS     SYS     NV1     NV2     NV1     NV2      X      SYS     PHB     SYS     PIX     20-39,60-79
mlx5_0  PIX     PIX     PHB     PHB     SYS     SYS     SYS     SYS      X      SYS     PHB     SYS
mlx5_2  SYS     SYS     SYS     SYS     PIX     PIX     PHB     PHB     SYS      X      SYS     PHB
mlx5_1  PHB     PHB     PIX     PIX     SYS     SYS     SYS     SYS     PHB     SYS      X      SYS
mlx5_3  SYS     SYS     SYS     SYS     PHB     PHB     PIX     PIX     SYS     PHB     SYS      X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
)";

// DGX A100 (NVSwitch, 12 NVLinks per GPU), driver 470 style: mlx5_N column labels, no NIC Legend; eight
// compute HCAs, two per GPU pair behind a PCIe switch (PXB), and two storage NICs (mlx5_4, mlx5_5).
constexpr const char* kDgxA100 = R"(	GPU0	GPU1	GPU2	GPU3	GPU4	GPU5	GPU6	GPU7	mlx5_0	mlx5_1	mlx5_2	mlx5_3	mlx5_4	mlx5_5	mlx5_6	mlx5_7	mlx5_8	mlx5_9	CPU Affinity	NUMA Affinity
GPU0	 X 	NV12	NV12	NV12	NV12	NV12	NV12	NV12	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	48-63,176-191	3
GPU1	NV12	 X 	NV12	NV12	NV12	NV12	NV12	NV12	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	48-63,176-191	3
GPU2	NV12	NV12	 X 	NV12	NV12	NV12	NV12	NV12	SYS	SYS	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	16-31,144-159	1
GPU3	NV12	NV12	NV12	 X 	NV12	NV12	NV12	NV12	SYS	SYS	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	16-31,144-159	1
GPU4	NV12	NV12	NV12	NV12	 X 	NV12	NV12	NV12	SYS	SYS	SYS	SYS	SYS	SYS	PXB	PXB	SYS	SYS	112-127,240-255	7
GPU5	NV12	NV12	NV12	NV12	NV12	 X 	NV12	NV12	SYS	SYS	SYS	SYS	SYS	SYS	PXB	PXB	SYS	SYS	112-127,240-255	7
GPU6	NV12	NV12	NV12	NV12	NV12	NV12	 X 	NV12	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	PXB	PXB	80-95,208-223	5
GPU7	NV12	NV12	NV12	NV12	NV12	NV12	NV12	 X 	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	PXB	PXB	80-95,208-223	5
mlx5_0	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	 X 	PIX	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS
mlx5_1	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	PIX	 X 	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS
mlx5_2	SYS	SYS	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	 X 	PIX	SYS	SYS	SYS	SYS	SYS	SYS
mlx5_3	SYS	SYS	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	PIX	 X 	SYS	SYS	SYS	SYS	SYS	SYS
mlx5_4	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	 X 	PIX	SYS	SYS	SYS	SYS
mlx5_5	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	PIX	 X 	SYS	SYS	SYS	SYS
mlx5_6	SYS	SYS	SYS	SYS	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	 X 	PIX	SYS	SYS
mlx5_7	SYS	SYS	SYS	SYS	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	PIX	 X 	SYS	SYS
mlx5_8	SYS	SYS	SYS	SYS	SYS	SYS	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	 X 	PIX
mlx5_9	SYS	SYS	SYS	SYS	SYS	SYS	PXB	PXB	SYS	SYS	SYS	SYS	SYS	SYS	SYS	SYS	PIX	 X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
)";

// DGX H100 (NVSwitch, 18 NVLinks per GPU), driver 535 style: NIC0..NIC11 and a NIC Legend; one ConnectX-7
// per GPU (PIX) and four storage/management ports (NODE to their socket's GPUs).
constexpr const char* kDgxH100 = R"(	GPU0	GPU1	GPU2	GPU3	GPU4	GPU5	GPU6	GPU7	NIC0	NIC1	NIC2	NIC3	NIC4	NIC5	NIC6	NIC7	NIC8	NIC9	NIC10	NIC11	CPU Affinity	NUMA Affinity	GPU NUMA ID
GPU0	 X 	NV18	NV18	NV18	NV18	NV18	NV18	NV18	PIX	NODE	NODE	NODE	NODE	NODE	SYS	SYS	SYS	SYS	SYS	SYS	0-55,112-167	0		N/A
GPU1	NV18	 X 	NV18	NV18	NV18	NV18	NV18	NV18	NODE	NODE	NODE	PIX	NODE	NODE	SYS	SYS	SYS	SYS	SYS	SYS	0-55,112-167	0		N/A
GPU2	NV18	NV18	 X 	NV18	NV18	NV18	NV18	NV18	NODE	NODE	NODE	NODE	PIX	NODE	SYS	SYS	SYS	SYS	SYS	SYS	0-55,112-167	0		N/A
GPU3	NV18	NV18	NV18	 X 	NV18	NV18	NV18	NV18	NODE	NODE	NODE	NODE	NODE	PIX	SYS	SYS	SYS	SYS	SYS	SYS	0-55,112-167	0		N/A
GPU4	NV18	NV18	NV18	NV18	 X 	NV18	NV18	NV18	SYS	SYS	SYS	SYS	SYS	SYS	PIX	NODE	NODE	NODE	NODE	NODE	56-111,168-223	1		N/A
GPU5	NV18	NV18	NV18	NV18	NV18	 X 	NV18	NV18	SYS	SYS	SYS	SYS	SYS	SYS	NODE	NODE	NODE	PIX	NODE	NODE	56-111,168-223	1		N/A
GPU6	NV18	NV18	NV18	NV18	NV18	NV18	 X 	NV18	SYS	SYS	SYS	SYS	SYS	SYS	NODE	NODE	NODE	NODE	PIX	NODE	56-111,168-223	1		N/A
GPU7	NV18	NV18	NV18	NV18	NV18	NV18	NV18	 X 	SYS	SYS	SYS	SYS	SYS	SYS	NODE	NODE	NODE	NODE	NODE	PIX	56-111,168-223	1		N/A
NIC0	PIX	NODE	NODE	NODE	SYS	SYS	SYS	SYS	 X 	NODE	NODE	NODE	NODE	NODE	SYS	SYS	SYS	SYS	SYS	SYS
NIC1	NODE	NODE	NODE	NODE	SYS	SYS	SYS	SYS	NODE	 X 	NODE	NODE	NODE	NODE	SYS	SYS	SYS	SYS	SYS	SYS
NIC2	NODE	NODE	NODE	NODE	SYS	SYS	SYS	SYS	NODE	NODE	 X 	NODE	NODE	NODE	SYS	SYS	SYS	SYS	SYS	SYS
NIC3	NODE	PIX	NODE	NODE	SYS	SYS	SYS	SYS	NODE	NODE	NODE	 X 	NODE	NODE	SYS	SYS	SYS	SYS	SYS	SYS
NIC4	NODE	NODE	PIX	NODE	SYS	SYS	SYS	SYS	NODE	NODE	NODE	NODE	 X 	NODE	SYS	SYS	SYS	SYS	SYS	SYS
NIC5	NODE	NODE	NODE	PIX	SYS	SYS	SYS	SYS	NODE	NODE	NODE	NODE	NODE	 X 	SYS	SYS	SYS	SYS	SYS	SYS
NIC6	SYS	SYS	SYS	SYS	PIX	NODE	NODE	NODE	SYS	SYS	SYS	SYS	SYS	SYS	 X 	NODE	NODE	NODE	NODE	NODE
NIC7	SYS	SYS	SYS	SYS	NODE	NODE	NODE	NODE	SYS	SYS	SYS	SYS	SYS	SYS	NODE	 X 	NODE	NODE	NODE	NODE
NIC8	SYS	SYS	SYS	SYS	NODE	NODE	NODE	NODE	SYS	SYS	SYS	SYS	SYS	SYS	NODE	NODE	 X 	NODE	NODE	NODE
NIC9	SYS	SYS	SYS	SYS	NODE	PIX	NODE	NODE	SYS	SYS	SYS	SYS	SYS	SYS	NODE	NODE	NODE	 X 	NODE	NODE
NIC10	SYS	SYS	SYS	SYS	NODE	NODE	PIX	NODE	SYS	SYS	SYS	SYS	SYS	SYS	NODE	NODE	NODE	NODE	 X 	NODE
NIC11	SYS	SYS	SYS	SYS	NODE	NODE	NODE	PIX	SYS	SYS	SYS	SYS	SYS	SYS	NODE	NODE	NODE	NODE	NODE	 X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_1
  NIC2: mlx5_2
  NIC3: mlx5_3
  NIC4: mlx5_4
  NIC5: mlx5_5
  NIC6: mlx5_6
  NIC7: mlx5_7
  NIC8: mlx5_8
  NIC9: mlx5_9
  NIC10: mlx5_10
  NIC11: mlx5_11
)";

TEST(Nvsmi, DgxH100IsOneNvSwitchDomainWithEightRails) {
  auto t = parse_nvsmi_topo(kDgxH100);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->gpu_count, 8);
  EXPECT_EQ(t->link(0, 7).kind, LinkKind::kNvLink);
  EXPECT_EQ(t->link(3, 5).nvlinks, 18);
  EXPECT_EQ(t->link(2, 2).kind, LinkKind::kSelf);
  EXPECT_EQ(t->fabric, IntraFabric::kNvSwitch);
  EXPECT_EQ(t->nvlink_domain_size, 8);
  ASSERT_EQ(t->nics.size(), 12u);
  EXPECT_EQ(t->hcas, 8);
  EXPECT_EQ(t->nics[3].label, "NIC3");
  EXPECT_EQ(t->nics[3].device, "mlx5_3");
  EXPECT_EQ(t->nics[3].nearest, LinkKind::kPix);
  EXPECT_EQ(t->nics[3].nearest_gpus, std::vector<int>{1});
  EXPECT_FALSE(t->nics[1].compute);  // storage: NODE to GPUs 0-3
  EXPECT_EQ(t->nics[1].nearest_gpus, (std::vector<int>{0, 1, 2, 3}));
}

// As a terminal capture holds it (script(1), cloud MLPerf logs): the header underlined and reset with
// escapes, a colour around a cell, CRLF line ends, a window-title OSC before it all.
TEST(Nvsmi, TerminalEscapesAroundTheHeaderAreIgnored) {
  std::string text = kDgxH100;
  const auto header_end = text.find('\n');
  text = "\x1b]0;user@dgx: ~\a" + std::string("\t\x1b[4m") + text.substr(1, header_end - 1) + "\x1b[0m" +
         text.substr(header_end);
  for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 2)) text.insert(at, "\r");
  text.replace(text.find("NV18"), 4, "\x1b[1;32mNV18\x1b[m");
  auto plain = parse_nvsmi_topo(kDgxH100);
  auto t = parse_nvsmi_topo(text);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->gpu_count, plain->gpu_count);
  EXPECT_EQ(t->links.size(), plain->links.size());
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) EXPECT_EQ(t->link(a, b).nvlinks, plain->link(a, b).nvlinks) << a << "," << b;
  ASSERT_EQ(t->nics.size(), plain->nics.size());
  EXPECT_EQ(t->nics[3].device, "mlx5_3");
  EXPECT_EQ(t->fabric, IntraFabric::kNvSwitch);
}

TEST(Nvsmi, DgxA100PairsShareTwoHcasBehindAPcieSwitch) {
  auto t = parse_nvsmi_topo(kDgxA100);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->gpu_count, 8);
  EXPECT_EQ(t->link(1, 6).nvlinks, 12);
  EXPECT_EQ(t->fabric, IntraFabric::kNvSwitch);
  EXPECT_EQ(t->nvlink_domain_size, 8);
  ASSERT_EQ(t->nics.size(), 10u);
  EXPECT_EQ(t->hcas, 8);
  EXPECT_EQ(t->nics[0].device, "mlx5_0");  // no legend: the label is the device
  EXPECT_EQ(t->nics[0].nearest, LinkKind::kPxb);
  EXPECT_EQ(t->nics[0].nearest_gpus, (std::vector<int>{0, 1}));
  EXPECT_FALSE(t->nics[4].compute);
}

TEST(Nvsmi, Dgx1V100IsACubeMeshOfTwoQuads) {
  auto t = parse_nvsmi_topo(kDgx1V100);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->gpu_count, 8);
  EXPECT_EQ(t->link(0, 3).nvlinks, 2);
  EXPECT_EQ(t->link(0, 1).nvlinks, 1);
  EXPECT_EQ(t->link(0, 5).kind, LinkKind::kSys);
  EXPECT_EQ(t->fabric, IntraFabric::kCubeMesh);
  EXPECT_EQ(t->nvlink_domain_size, 4);
  ASSERT_EQ(t->nics.size(), 4u);
  EXPECT_EQ(t->nics[1].device, "mlx5_2");
  EXPECT_EQ(t->nics[1].nearest_gpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(t->hcas, 4);
}

TEST(Nvsmi, PcieOnlyNodeHasNoNvlinkDomain) {
  auto t = parse_nvsmi_topo(
      "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
      "GPU0\t X \tPHB\tSYS\tSYS\t0-15\t0\n"
      "GPU1\tPHB\t X \tSYS\tSYS\t0-15\t0\n"
      "GPU2\tSYS\tSYS\t X \tPHB\t16-31\t1\n"
      "GPU3\tSYS\tSYS\tPHB\t X \t16-31\t1\n");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->fabric, IntraFabric::kPcie);
  EXPECT_EQ(t->nvlink_domain_size, 1);
  EXPECT_EQ(t->hcas, 0);
}

struct BadMatrix {
  std::string name;
  std::string text;
  std::string expected;
};
void PrintTo(const BadMatrix& c, std::ostream* os) { *os << c.name; }

class NvsmiErrors : public ::testing::TestWithParam<BadMatrix> {};

TEST_P(NvsmiErrors, NameTheLine) {
  auto r = parse_nvsmi_topo(GetParam().text);
  ASSERT_FALSE(r) << GetParam().name;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find(GetParam().expected), std::string::npos) << r.error().message;
}

constexpr const char* kHeader = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, NvsmiErrors,
    ::testing::Values(
        BadMatrix{"empty", "", "no matrix header found"},
        BadMatrix{"not a matrix", "No devices were found\n", "no matrix header found"},
        BadMatrix{"short row", std::string(kHeader) + "GPU0\t X \tNV4\n", "line 2: row GPU0 has 2 cells, expected 3"},
        BadMatrix{"unknown cell", std::string(kHeader) + "GPU0\t X \tNVX\tPIX\t0-7\n",
                  "line 2: row GPU0, column GPU1: unknown link \"NVX\""},
        BadMatrix{"missing row", std::string(kHeader) + "GPU0\t X \tNV4\tPIX\t0-7\n\nLegend:\n",
                  "line 3: no row for GPU1"},
        BadMatrix{"asymmetric", std::string(kHeader) + "GPU0\t X \tNV4\tPIX\t0-7\nGPU1\tSYS\t X \tPIX\t0-7\n",
                  "line 3: GPU0 and GPU1 disagree"},
        BadMatrix{"diagonal", std::string(kHeader) + "GPU0\tNV4\tNV4\tPIX\t0-7\n", "line 2: row GPU0, column GPU0"},
        BadMatrix{"order", "\tGPU0\tGPU2\tCPU Affinity\n", "line 1: GPU columns out of order at \"GPU2\""},
        BadMatrix{"nic nvlink", std::string(kHeader) + "GPU0\t X \tNV4\tNV2\t0-7\nGPU1\tNV4\t X \tPIX\t0-7\n",
                  "line 2: GPU0 reaches NIC0 over NVLink"}),
    [](const auto& info) {
      std::string name = info.param.name;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

}  // namespace
}  // namespace railyard::topology
