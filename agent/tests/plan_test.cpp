#include "agent/launch/plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "agent/launch/cgroup.hpp"
#include "agent/tests/test_util.hpp"

namespace railyard::agent {
namespace {

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
  MpiSettings s{"/usr/bin/mpirun", "/opt/railyard/bin/railyard-agent-exec", "/state/hostfile", "/state",
                true};
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
  EXPECT_TRUE(has({"train", "--epochs", "3"}));
  EXPECT_EQ(env_of(plan->process, "RAILYARD_AGENT_STATE_DIR"), "/state");
  EXPECT_EQ(env_of(plan->process, "RAILYARD_ALLOC_GPUS"), "node0:0,3;node1:4,5");
}

TEST(Plan, MpirunOnlyOnTheFirstNode) {
  auto plan =
      plan_mpirun(two_nodes(jobs::Launcher::kMpi), *emulated_inventory("dgx-h100", "n"), {}, MpiSettings{});
  EXPECT_FALSE(plan);
}

TEST(Cgroup, LimitsWrittenToTheGroup) {
  testing::TempDir root;
  ResourceLimits limits{8LL << 30, 2.5};
  auto group = create_cgroup(root.path(), "42-a42", limits);
  ASSERT_TRUE(group) << group.error().message;
  EXPECT_EQ(*group, root.path() / "railyard" / "42-a42");
  EXPECT_EQ(testing::read_file(*group / "memory.max"), std::to_string(8LL << 30));
  EXPECT_EQ(testing::read_file(*group / "cpu.max"), "250000 100000");
  EXPECT_TRUE(cgroup2_unusable(root.path()).has_value());  // a plain directory is no cgroup2 mount
  EXPECT_TRUE(cgroup2_unusable("/nonexistent").has_value());
}

}  // namespace
}  // namespace railyard::agent
