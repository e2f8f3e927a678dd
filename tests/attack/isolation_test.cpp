// Isolation fails closed (issue 44): a root agent whose allocation cgroups cannot be made refuses a job as
// nobody instead of running it without limits, and says why; an agent that cannot isolate at all does not
// start. (That a job in its group is refused the node's other GPUs is Isolation.* in agent_launch_test, with
// stand-in device nodes, for cgroup v1 and for the v2 BPF filter.)
#include <gtest/gtest.h>

#include "tests/attack/attack_cluster.hpp"

namespace railyard::testing {
namespace {

// `--cgroup-parent` under a file: no allocation group can be made below it, in any hierarchy.
const std::vector<std::string> kNoGroups{"--cgroup-parent", "/cgroup.procs/railyard"};

TEST(IsolationAttack, JobWhoseCgroupCannotBeMadeIsRefusedNotRunUnlimited) {
  if (auto why = AttackCluster::skip_reason(); !why.empty()) GTEST_SKIP() << why;
  AttackCluster cluster(AttackOptions{{}, kNoGroups, true});
  const std::string marker = cluster.file("ran-unlimited");
  const int64_t id = cluster.submit_script("touch " + marker);
  const std::string end = cluster.wait_done(id);
  EXPECT_TRUE(end == "FAILED" || end == "CANCELLED") << end;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the job ran without its cgroup";
  const std::string reason = cluster.job(id).dump();
  EXPECT_NE(reason.find("cannot isolate"), std::string::npos) << reason;
  EXPECT_NE(reason.find("--isolation best-effort"), std::string::npos) << reason;
}

TEST(IsolationAttack, BestEffortIsAnExplicitChoice) {
  if (auto why = AttackCluster::skip_reason(); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::string> flags = kNoGroups;
  flags.insert(flags.end(), {"--isolation", "best-effort"});
  AttackCluster cluster(AttackOptions{{}, flags, true});
  const int64_t id = cluster.submit_script("true");
  EXPECT_EQ(cluster.wait_done(id), "COMPLETED");
  EXPECT_NE(read_small(cluster.agent_log()).find("cgroup limits skipped"), std::string::npos);
}

TEST(IsolationAttack, AgentWithoutAnyCgroupHierarchyDoesNotStart) {
  if (auto why = AttackCluster::skip_reason(); !why.empty()) GTEST_SKIP() << why;
  AttackCluster cluster(AttackOptions{{}, {}, false});
  // A mount namespace whose /sys/fs/cgroup is an empty tmpfs: the agent finds no cgroup mechanism.
  const std::string cmd = "unshare -m sh -c 'mount -t tmpfs none /sys/fs/cgroup && exec " +
                          std::string(RAILYARD_AGENT_BIN) + " --scheduler " + cluster.url() + " --key-file " +
                          cluster.key_file() + " --nodes n1 --emulate dgx-h100 --state-dir " +
                          cluster.agent_state() + "' > " + cluster.agent_log() + " 2>&1";
  const int code = shell("timeout 30 " + cmd);
  if (read_small(cluster.agent_log()).find("mount:") != std::string::npos)
    GTEST_SKIP() << "cannot mount in a new namespace here: " << read_small(cluster.agent_log());
  EXPECT_NE(code, 0);
  EXPECT_NE(code, 124) << "the agent kept running without isolation";
  EXPECT_NE(read_small(cluster.agent_log()).find("isolation is required"), std::string::npos)
      << read_small(cluster.agent_log());
}

}  // namespace
}  // namespace railyard::testing
