// A multi-host set-up on one machine (issue 10): the real `railyard-scheduler` in one network namespace and
// three real `railyard-agent`s, each in its own namespace with its own address, joined to the scheduler's
// namespace by veth pairs (10.77.I.1 scheduler side, 10.77.I.2 agent I). The test cuts the link of the agent
// that runs a requeue-able job: its node goes DOWN after the heartbeat timeout and the job runs again on
// another node; when the link heals, the old worker is killed (fencing) and one copy runs from then on.
// Needs root (ip netns); every namespace and veth is removed at the end, also on failure.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "tests/fault_util.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;

constexpr int kAgents = 3;
constexpr int kHeartbeatTimeoutS = 6;

constexpr const char* kThreeNodes =
    R"({"name": "three", "nodes": [{"names": "n[1-3]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n[1-3]"}]})";

class FaultNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root for ip netns";
    if (shell("ip netns list >/dev/null 2>&1") != 0) GTEST_SKIP() << "no ip netns (iproute2) here";
    const std::string id = std::to_string(::getpid());
    sched_ns_ = "ry" + id + "s";
    std::vector<std::string> names{sched_ns_};
    for (int i = 1; i <= kAgents; ++i) names.push_back(agent_ns(i));
    namespaces_ = std::make_unique<NetNamespaces>(names);
    if (!namespaces_->ok()) GTEST_SKIP() << "ip netns add failed (no CAP_SYS_ADMIN / CAP_NET_ADMIN here)";
    for (int i = 1; i <= kAgents; ++i) {
      const std::string s = sched_if(i), a = "ry" + id + "p" + std::to_string(i),
                        net = "10.77." + std::to_string(i);
      ASSERT_EQ(shell("ip link add " + s + " netns " + sched_ns_ + " type veth peer name " + a + " netns " +
                      agent_ns(i)),
                0);
      ASSERT_EQ(shell("ip -n " + sched_ns_ + " addr add " + net + ".1/24 dev " + s), 0);
      ASSERT_EQ(shell("ip -n " + agent_ns(i) + " addr add " + net + ".2/24 dev " + a), 0);
      ASSERT_EQ(shell("ip -n " + sched_ns_ + " link set " + s + " up"), 0);
      ASSERT_EQ(shell("ip -n " + agent_ns(i) + " link set " + a + " up"), 0);
    }
    std::ofstream(dir_.file("three.json")) << kThreeNodes;
    std::ofstream(dir_.file("secret")) << "netns-cluster-secret-0123456789\n";
    ::chmod(dir_.file("secret").c_str(), 0600);  // a credential file others can read is refused
    token_ = create_token(RAILYARD_SCHEDULER_BIN, dir_.file("state.db"), "alice", "admin");
    // This thread joins the scheduler's namespace: the daemon forked from it starts there, and the test's
    // HTTP client reaches it on that namespace's 127.0.0.1.
    inside_ = std::make_unique<EnterNetns>(sched_ns_);
    ASSERT_TRUE(inside_->ok()) << "setns into " << sched_ns_;
    sched_ = std::make_unique<DaemonProcess>(
        RAILYARD_SCHEDULER_BIN,
        std::vector<std::string>{"--listen", "0.0.0.0:0", "--db", dir_.file("state.db"), "--cluster",
                                 dir_.file("three.json"), "--agent-secret-file", dir_.file("secret"),
                                 "--heartbeat-timeout", std::to_string(kHeartbeatTimeoutS)});
    ASSERT_GT(sched_->port(), 0);
    http_ = std::make_unique<HttpClient>(sched_->port());
    for (int i = 1; i <= kAgents; ++i) {
      const std::string n = std::to_string(i);
      // `ip netns exec` mounts a fresh /sys, without the cgroup hierarchies: the agent cannot isolate jobs
      // there, which this test of partitions does not need.
      agents_.push_back(start_agent_with({RAILYARD_AGENT_BIN,
                                     "http://10.77." + n + ".1:" + std::to_string(sched_->port()),
                                     dir_.file("secret"),
                                     "n" + n,
                                     dir_.file("agent-state-" + n),
                                     dir_.file("agent-" + n + ".log"),
                                          {"/usr/sbin/ip", "netns", "exec", agent_ns(i)}},
                                         {"--isolation", "best-effort"}));
    }
    ASSERT_TRUE(until([&] { return connected_nodes(*http_) == kAgents; })) << logs();
  }
  void TearDown() override {
    agents_.clear();
    sched_.reset();
    http_.reset();
    inside_.reset();
  }

  std::string agent_ns(int i) const {
    return sched_ns_.substr(0, sched_ns_.size() - 1) + "a" + std::to_string(i);
  }
  std::string sched_if(int i) const { return sched_ns_ + std::to_string(i); }
  json job(int64_t id) { return http_->request("GET", "/api/v1/jobs/" + std::to_string(id)).json(); }
  std::string health(const std::string& node) {
    return http_->request("GET", "/api/v1/nodes/" + node).json().value("health", "");
  }
  std::string logs() const {
    std::string out;
    for (int i = 1; i <= kAgents; ++i)
      out += run_capture("tail -8 " + dir_.file("agent-" + std::to_string(i) + ".log") + " 2>&1");
    return out;
  }

  TempDir dir_;
  std::string sched_ns_, token_;
  std::unique_ptr<NetNamespaces> namespaces_;
  std::unique_ptr<EnterNetns> inside_;
  std::unique_ptr<DaemonProcess> sched_;
  std::unique_ptr<HttpClient> http_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
};

TEST_F(FaultNetns, PartitionedNodeGoesDownJobRunsElsewhereAndTheOldWorkerIsFencedOnHeal) {
  const std::string marker = "300." + std::to_string(::getpid());
  WorkerReaper reaper(marker);
  const json spec = {
      {"name", "partition"},          {"nodes", 1},      {"gpus_per_node", 1}, {"launcher", "env"},
      {"command", {"sleep", marker}}, {"requeue", true}, {"time_limit", "10m"}};
  const HttpResult r = http_->request("POST", "/api/v1/jobs", spec.dump(), token_);
  ASSERT_EQ(r.status, 201) << r.body;
  const int64_t id = r.json()["id"];
  json j;
  ASSERT_TRUE(until([&] { return (j = job(id))["state"] == "RUNNING"; })) << j.dump() << logs();
  ASSERT_TRUE(until([&] { return sleeps_with(marker).size() == 1; })) << job(id).dump() << logs();
  const pid_t first_worker = sleeps_with(marker).front();
  const std::string first_node = j["nodes"][0];
  const int cut = std::stoi(first_node.substr(1));

  // Cut: the scheduler's end of that agent's veth goes down (both directions dead, no FIN, no RST).
  const auto cut_at = std::chrono::steady_clock::now();
  ASSERT_EQ(shell("ip -n " + sched_ns_ + " link set " + sched_if(cut) + " down"), 0);
  ASSERT_TRUE(until([&] { return health(first_node) == "down"; }, 60s)) << logs();
  const double down_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut_at).count();
  ASSERT_TRUE(until(
      [&] {
        j = job(id);
        return j["state"] == "RUNNING" && j["nodes"].size() == 1 && j["nodes"][0] != first_node;
      },
      60s))
      << j.dump() << logs();
  const std::string events = http_->request("GET", "/api/v1/jobs/" + std::to_string(id) + "/events").body;
  EXPECT_NE(events.find("requeued after NODE_FAIL"), std::string::npos) << events;
  // During the partition the cut-off worker still runs (its agent cannot hear the scheduler): two copies.
  ASSERT_TRUE(until([&] { return sleeps_with(marker).size() == 2; })) << logs();

  // Heal: the agent reconnects (or its old connection resumes) and is told to kill the old allocation.
  const auto heal_at = std::chrono::steady_clock::now();
  ASSERT_EQ(shell("ip -n " + sched_ns_ + " link set " + sched_if(cut) + " up"), 0);
  const auto old_gone = [&] {
    const auto pids = sleeps_with(marker);
    return std::find(pids.begin(), pids.end(), first_worker) == pids.end();
  };
  EXPECT_TRUE(until(old_gone, 120s)) << "old worker " << first_worker << " still runs after the heal\n"
                                     << logs();
  const double fenced_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - heal_at).count();
  EXPECT_TRUE(until([&] { return health(first_node) == "up"; }, 60s)) << logs();
  // Settled: exactly one copy, the new one, for a while; the job still RUNNING on the other node.
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(sleeps_with(marker).size(), 1u) << "check " << i;
    std::this_thread::sleep_for(100ms);
  }
  j = job(id);
  EXPECT_EQ(j["state"], "RUNNING") << j.dump();
  EXPECT_NE(j["nodes"][0], first_node) << j.dump();
  std::printf(
      "partition: node %s DOWN %.1f s after the cut (heartbeat timeout %d s); old worker gone %.1f s "
      "after the heal\n",
      first_node.c_str(), down_s, kHeartbeatTimeoutS, fenced_s);
  EXPECT_EQ(http_->request("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", "", token_).status, 200);
  EXPECT_TRUE(until([&] { return sleeps_with(marker).empty(); })) << logs();
}

}  // namespace
}  // namespace railyard::testing
