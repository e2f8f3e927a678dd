// kill -9 of a real `railyard-agent` mid-job (issue 10): two agents on 127.0.0.1 (nodes n1, n2), one
// requeue-able training job (`railyard-train`, checkpoint after every epoch into a directory both nodes
// see). Once a checkpoint exists, the agent running it is killed with -9 and its worker with it (the node
// is gone). The node goes DOWN after the heartbeat timeout (measured), the job ends NODE_FAIL and is
// requeued, runs on the other node, says it resumed from the checkpoint (MLLOG `resume`) and completes.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>

#include "tests/fault_util.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;

constexpr int kHeartbeatTimeoutS = 6;

constexpr const char* kTwoNodes = R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n[1-2]"}]})";

bool jobs_done(const std::string& state) {
  return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT";
}

class FaultAgent : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("two.json")) << kTwoNodes;
    std::ofstream(dir_.file("secret")) << "agent-fault-secret-0123456789\n";
    ::chmod(dir_.file("secret").c_str(), 0600);  // a credential file others can read is refused
    token_ = create_token(RAILYARD_SCHEDULER_BIN, dir_.file("state.db"), "alice", "admin");
    sched_ = std::make_unique<DaemonProcess>(
        RAILYARD_SCHEDULER_BIN,
        std::vector<std::string>{"--listen", "127.0.0.1:0", "--db", dir_.file("state.db"), "--cluster",
                                 dir_.file("two.json"), "--agent-secret-file", dir_.file("secret"),
                                 "--heartbeat-timeout", std::to_string(kHeartbeatTimeoutS)});
    ASSERT_GT(sched_->port(), 0);
    http_ = std::make_unique<HttpClient>(sched_->port());
    for (const char* n : {"n1", "n2"})
      agents_[n] = start_agent({RAILYARD_AGENT_BIN,
                                "http://127.0.0.1:" + std::to_string(sched_->port()),
                                dir_.file("secret"),
                                n,
                                dir_.file(std::string("agent-state-") + n),
                                dir_.file(std::string("agent-") + n + ".log"),
                                {}});
    ASSERT_TRUE(until([&] { return connected_nodes(*http_) == 2; })) << logs();
  }
  void TearDown() override {
    agents_.clear();
    sched_.reset();
  }
  json job(int64_t id) { return http_->request("GET", "/api/v1/jobs/" + std::to_string(id)).json(); }
  std::string logs() const {
    return run_capture("tail -8 " + dir_.file("agent-n1.log") + " " + dir_.file("agent-n2.log"));
  }
  std::string log_of(int64_t id) {
    const auto r =
        http_->request("GET", "/api/v1/jobs/" + std::to_string(id) + "/logs?rank=0&stream=out", "", token_);
    return r.json().value("data", "<" + std::to_string(r.status) + " " + r.body + ">");
  }

  TempDir dir_;
  std::string token_;
  std::unique_ptr<DaemonProcess> sched_;
  std::unique_ptr<HttpClient> http_;
  std::map<std::string, std::unique_ptr<ChildProcess>> agents_;
};

TEST_F(FaultAgent, KilledAgentMidJobNodeDownJobRequeuedAndResumesFromItsCheckpointElsewhere) {
  const std::string ckpt = dir_.file("ckpt");
  std::filesystem::create_directories(ckpt);
  // Small steps: many short epochs, so the kill falls between the first checkpoint and the target.
  const json spec = {{"name", "resumable"},
                     {"nodes", 1},
                     {"gpus_per_node", 1},
                     {"launcher", "env"},
                     {"requeue", true},
                     {"time_limit", "10m"},
                     {"command",
                      {RAILYARD_TRAIN, "--backend", "mpi", "--checkpoint-dir", ckpt, "--checkpoint-every",
                       "1", "--lr", "0.01", "--target-accuracy", "0.9", "--epochs", "1000"}}};
  const HttpResult r = http_->request("POST", "/api/v1/jobs", spec.dump(), token_);
  ASSERT_EQ(r.status, 201) << r.body;
  const int64_t id = r.json()["id"];
  json j;
  ASSERT_TRUE(until([&] { return (j = job(id))["state"] == "RUNNING"; })) << j.dump() << logs();
  const std::string first_node = j["nodes"][0];
  ASSERT_TRUE(until([&] { return std::filesystem::exists(ckpt + "/checkpoint.json"); }, 120s))
      << job(id).dump() << log_of(id) << logs();
  ASSERT_EQ(job(id)["state"], "RUNNING") << "finished before the kill; make the run longer";

  // The node dies: its agent and its worker.
  const auto killed_at = std::chrono::steady_clock::now();
  agents_[first_node]->stop(SIGKILL);
  for (pid_t pid : processes_with("", ckpt)) ::kill(pid, SIGKILL);
  ASSERT_TRUE(until(
      [&] {
        return http_->request("GET", "/api/v1/nodes/" + first_node).json().value("health", "") == "down";
      },
      60s))
      << logs();
  const double down_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  const std::string events = http_->request("GET", "/api/v1/jobs/" + std::to_string(id) + "/events").body;
  EXPECT_NE(events.find("requeued after NODE_FAIL"), std::string::npos) << events;

  j = {};
  until([&] { return jobs_done((j = job(id)).value("state", "")); }, 300s);
  ASSERT_EQ(j["state"], "COMPLETED") << j.dump() << logs();
  ASSERT_EQ(j["nodes"].size(), 1u);
  EXPECT_NE(j["nodes"][0], first_node) << j.dump();
  const std::string out = log_of(id);
  EXPECT_NE(out.find("\"key\": \"resume\""), std::string::npos) << "the requeued run did not resume:\n"
                                                                << out;
  EXPECT_NE(out.find("\"status\": \"success\""), std::string::npos) << out;
  std::printf("agent kill -9: node %s DOWN %.1f s after the kill (heartbeat timeout %d s)\n",
              first_node.c_str(), down_s, kHeartbeatTimeoutS);
}

}  // namespace
}  // namespace railyard::testing
