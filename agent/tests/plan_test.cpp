#include "agent/launch/plan.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "agent/launch/cgroup.hpp"
#include "agent/launch/launcher.hpp"
#include "agent/tests/test_util.hpp"

namespace railyard::agent {
namespace {

namespace fs = std::filesystem;

LaunchRequest two_nodes(jobs::Launcher launcher) {
  LaunchRequest r;
  r.job_id = 42;
  r.alloc_id = "a42";
  r.spec.launcher = launcher;
  r.spec.command = {"train", "--epochs", "3"};
  r.spec.env = {{"SEED", "7"}};
  r.nodes = {{"node0", {0, 3}}, {"node1", {4, 5}}};
  r.node_rank = 1;
  return r;
}

std::string env_of(const ProcessPlan& p, const std::string& key) {
  for (const auto& kv : p.env)
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  return "<unset>";
}

TEST(Plan, EnvLauncherRankVariables) {
  auto inv = emulated_inventory("dgx-h100", "node1");
  auto plans = plan_env_ranks(two_nodes(jobs::Launcher::kEnv), *inv, {{"PATH", "/bin"}});
  ASSERT_EQ(plans.size(), 2u);
  const ProcessPlan& p = plans[1];
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(env_of(p, "RANK"), "3");
  EXPECT_EQ(env_of(p, "WORLD_SIZE"), "4");
  EXPECT_EQ(env_of(p, "LOCAL_RANK"), "1");
  EXPECT_EQ(env_of(p, "LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(env_of(p, "NODE_RANK"), "1");
  EXPECT_EQ(env_of(p, "MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(env_of(p, "MASTER_PORT"), "29500");
  EXPECT_EQ(env_of(p, "CUDA_VISIBLE_DEVICES"), "4,5");
  EXPECT_EQ(env_of(p, "NCCL_IB_HCA"), "mlx5_4,mlx5_5");
  EXPECT_EQ(env_of(p, "NCCL_SOCKET_IFNAME"), "lo");
  EXPECT_EQ(env_of(p, "RAILYARD_JOB_ID"), "42");
  EXPECT_EQ(env_of(p, "RAILYARD_ALLOC_ID"), "a42");
  EXPECT_EQ(env_of(p, "RAILYARD_NODE"), "node1");
  EXPECT_EQ(env_of(p, "SEED"), "7");
  EXPECT_EQ(env_of(p, "PATH"), "/bin");
  EXPECT_EQ(p.argv, (std::vector<std::string>{"train", "--epochs", "3"}));
}

TEST(Plan, NcclIbHcaFollowsTheRails) {
  auto h100 = emulated_inventory("dgx-h100", "n");
  EXPECT_EQ(nccl_ib_hca({0, 3}, *h100), "mlx5_0,mlx5_3");
  auto v100 = emulated_inventory("dgx-1-v100", "n");  // 4 rails for 8 GPUs
  EXPECT_EQ(nccl_ib_hca({0, 1, 2}, *v100), "mlx5_0,mlx5_1");
  Inventory none;
  EXPECT_EQ(nccl_ib_hca({0}, none), "");
}

TEST(Plan, NoSocketIfnameForARealMaster) {
  auto req = two_nodes(jobs::Launcher::kEnv);
  req.master_addr = "10.0.0.1";
  auto plans = plan_env_ranks(req, *emulated_inventory("dgx-h100", "n"), {});
  EXPECT_EQ(env_of(plans[0], "NCCL_SOCKET_IFNAME"), "<unset>");
}

TEST(Plan, MpirunWithHostfileAndHelper) {
  auto req = two_nodes(jobs::Launcher::kMpi);
  req.node_rank = 0;
  MpiSettings s{
      "/usr/bin/mpirun",      "/opt/railyard/bin/railyard-agent-exec", "/state/hostfile", "/state", true,
      "/state/mpi-output/7.1"};
  auto plan = plan_mpirun(req, *emulated_inventory("dgx-h100", "node0"), {}, s);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->hostfile_text, "node0 slots=2\nnode1 slots=2\n");
  const auto& a = plan->process.argv;
  auto has = [&a](std::vector<std::string> seq) {
    return std::search(a.begin(), a.end(), seq.begin(), seq.end()) != a.end();
  };
  EXPECT_EQ(a.front(), "/usr/bin/mpirun");
  EXPECT_TRUE(has({"--allow-run-as-root"}));
  EXPECT_TRUE(has({"--oversubscribe"}));
  EXPECT_TRUE(has({"--hostfile", "/state/hostfile"}));
  EXPECT_TRUE(has({"-np", "4"}));
  EXPECT_TRUE(has({"--mca", "plm_rsh_agent", "/opt/railyard/bin/railyard-agent-exec"}));
  EXPECT_TRUE(has({"--mca", "mpi_yield_when_idle", "1"}));
  EXPECT_TRUE(has({"--mca", "oob_tcp_if_include", "lo"}));
  EXPECT_TRUE(has({"--mca", "btl_tcp_if_include", "lo"}));
  EXPECT_TRUE(has({"--mca", "rtc_hwloc_vmhole", "none"}));
  EXPECT_TRUE(has({"--mca", "orte_leave_session_attached", "1"}));  // orted stays the agent's child
  EXPECT_TRUE(has({"-x", "SEED"}));
  // Each node's daemon writes its ranks' files there; before the command, which mpirun would take as its own.
  EXPECT_TRUE(has({"--output-filename", "/state/mpi-output/7.1"}));
  EXPECT_LT(std::find(a.begin(), a.end(), "--output-filename"), std::find(a.begin(), a.end(), "train"));
  EXPECT_TRUE(has({"train", "--epochs", "3"}));
  EXPECT_EQ(env_of(plan->process, "RAILYARD_AGENT_STATE_DIR"), "/state");
  EXPECT_EQ(env_of(plan->process, "RAILYARD_ALLOC_GPUS"), "node0:0,3;node1:4,5");
}

TEST(Plan, MpirunWithoutAnOutputDirectoryWritesNoRankFiles) {
  auto req = two_nodes(jobs::Launcher::kMpi);
  req.node_rank = 0;
  auto plan = plan_mpirun(req, *emulated_inventory("dgx-h100", "node0"), {}, MpiSettings{});
  ASSERT_TRUE(plan) << plan.error().message;
  const auto& a = plan->process.argv;
  EXPECT_EQ(std::find(a.begin(), a.end(), "--output-filename"), a.end());
}

TEST(Plan, MpiRankLogPathsCoverEveryPaddingOpenMpiUses) {
  const auto three = mpi_rank_log_paths(3, "out");
  ASSERT_EQ(three.size(), 7u);
  EXPECT_EQ(three[0], "1/rank.3/stdout");   // 2..9 ranks
  EXPECT_EQ(three[1], "1/rank.03/stdout");  // 10..99 ranks
  EXPECT_EQ(three[6], "1/rank.0000003/stdout");
  const auto big = mpi_rank_log_paths(1234, "err");
  ASSERT_EQ(big.size(), 4u);
  EXPECT_EQ(big[0], "1/rank.1234/stderr");
  EXPECT_TRUE(mpi_rank_log_paths(-1, "out").empty());
}

TEST(Plan, MpirunOnlyOnTheFirstNode) {
  auto plan =
      plan_mpirun(two_nodes(jobs::Launcher::kMpi), *emulated_inventory("dgx-h100", "n"), {}, MpiSettings{});
  EXPECT_FALSE(plan);
}

TEST(Cgroup, V2LimitsWrittenToTheGroup) {
  testing::TempDir root;
  ResourceLimits limits{8LL << 30, 2.5, 4.0, 512};
  auto group = make_cgroup_v2(root.path())->create("42-a42", limits, GpuAccess{});
  ASSERT_TRUE(group) << group.error().message;
  ASSERT_EQ(group->size(), 1u);
  const fs::path g = root.path() / "railyard" / "42-a42";
  EXPECT_EQ(group->front(), g.string());
  EXPECT_EQ(testing::read_file(g / "memory.max"), std::to_string(8LL << 30));
  EXPECT_EQ(testing::read_file(g / "cpu.max"), "250000 100000");
  EXPECT_EQ(testing::read_file(g / "cpu.weight"), "400");
  EXPECT_EQ(testing::read_file(g / "pids.max"), "512");
  EXPECT_EQ(cgroup_memory_limit(*group), 8LL << 30);
}

TEST(Cgroup, V1LimitsWrittenToEachHierarchy) {
  testing::TempDir root;
  const fs::path mem = root.path() / "memory" / "agent", cpu = root.path() / "cpu",
                 pids = root.path() / "pids";
  auto driver = make_cgroup_v1({{"memory", mem}, {"cpu", cpu}, {"pids", pids}}, root.path() / "dev");
  auto group = driver->create("7-a7", ResourceLimits{1LL << 30, 1.5, 2.0, 64}, GpuAccess{});
  ASSERT_TRUE(group) << group.error().message;
  ASSERT_EQ(group->size(), 3u);
  EXPECT_EQ(group->front(), (mem / "railyard" / "7-a7").string());  // memory first
  EXPECT_EQ(testing::read_file(mem / "railyard" / "7-a7" / "memory.limit_in_bytes"),
            std::to_string(1LL << 30));
  EXPECT_EQ(testing::read_file(cpu / "railyard" / "7-a7" / "cpu.cfs_quota_us"), "150000");
  EXPECT_EQ(testing::read_file(cpu / "railyard" / "7-a7" / "cpu.shares"), "2048");
  EXPECT_EQ(testing::read_file(pids / "railyard" / "7-a7" / "pids.max"), "64");
  EXPECT_NE(driver->describe().find("memory at " + (mem / "railyard").string()), std::string::npos);
  EXPECT_EQ(cgroup_memory_limit(*group), 1LL << 30);
}

TEST(Cgroup, NoTwoAllocationsShareAGroup) {
  testing::TempDir root;
  auto driver = make_cgroup_v1({{"memory", root.path() / "m"}, {"pids", root.path() / "p"}});
  auto a = driver->create("5-x-node0", ResourceLimits{}, GpuAccess{});
  auto b = driver->create("5-x-node0", ResourceLimits{}, GpuAccess{});
  ASSERT_TRUE(a && b);
  EXPECT_EQ(fs::path(a->front()).filename(), "5-x-node0");
  EXPECT_EQ(fs::path(b->front()).filename(), "5-x-node0.1");
  EXPECT_EQ(fs::path(b->back()).filename(), "5-x-node0.1");  // every hierarchy follows the first
  // A name left behind in one hierarchy only (its memory sibling removed) is not reused either.
  fs::create_directories(root.path() / "p" / "railyard" / "6-y-node0");
  auto c = driver->create("6-y-node0", ResourceLimits{}, GpuAccess{});
  ASSERT_TRUE(c);
  EXPECT_EQ(fs::path(c->front()).filename(), "6-y-node0.1");
  EXPECT_FALSE(fs::exists(root.path() / "m" / "railyard" / "6-y-node0"));  // the first try was undone
}

TEST(Cgroup, OomKillsCountedFromEitherMechanism) {
  testing::TempDir root;
  std::ofstream(root.path() / "memory.events") << "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\n";
  EXPECT_EQ(cgroup_oom_kills({root.path().string()}), 1);
  testing::TempDir v1;
  std::ofstream(v1.path() / "memory.oom_control") << "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
  EXPECT_EQ(cgroup_oom_kills({v1.path().string()}), 3);
  EXPECT_EQ(cgroup_oom_kills({"/nonexistent"}), 0);
  EXPECT_EQ(gpu_deny_rules(root.path(), {0}).size(), 0u);  // no /dev/nvidiaN there
}

TEST(Cgroup, DetectionSaysWhyWhenNothingIsUsable) {
  CgroupSetup setup;
  setup.root = "/nonexistent";
  auto d = detect_cgroup_driver(setup);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("/nonexistent"), std::string::npos);
}

TEST(Cgroup, DefaultLimitsAreTheJobsShareOfTheNode) {
  LaunchRequest req;
  req.nodes = {{"n0", {0, 1}}};
  const auto inv = *emulated_inventory("dgx-h100", "n0");  // 8 GPUs: the job holds a quarter
  const long long node = static_cast<long long>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  auto l = limits_for(req, inv);
  ASSERT_TRUE(l.memory_bytes);
  EXPECT_NEAR(static_cast<double>(*l.memory_bytes), node / 4.0, 1.0);
  ASSERT_TRUE(l.cpu_share);
  EXPECT_FALSE(l.cpus);  // a weight, not a quota
  req.spec.mem_mb = 100;
  EXPECT_EQ(limits_for(req, inv).memory_bytes, 100LL << 20);
  req.limits.memory_bytes = 5;
  EXPECT_EQ(limits_for(req, inv).memory_bytes, 5);
}

}  // namespace
}  // namespace railyard::agent
