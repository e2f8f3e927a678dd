// kill -9 of the real `railyard-scheduler` in the middle of a storm of 10,000 submits (issue 10), while jobs
// run on a real `railyard-agent` (4 emulated DGX H100 nodes). 8 clients submit over keep-alive, 2 of them in
// batches (POST /jobs:batch); each job has a unique name. The clients keep going through the crash (a submit
// that gets no answer is "unacknowledged", its name never reused) and the daemon restarts on the same port.
// Afterwards: every acknowledged id is stored exactly once under its name, no name is stored twice, and the
// jobs that ran at the kill stay RUNNING and end COMPLETED.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>

#include "tests/fault_util.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;

constexpr int kClients = 8;
constexpr int kBatchClients = 2;  // the last two
constexpr int kBatchSize = 25;
constexpr int kStormJobs = 10'000;
constexpr int kKillAfterAcked = 2'500;

constexpr const char* kFourNodes = R"({"name": "four", "nodes": [{"names": "n[1-4]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n[1-4]"}]})";

class FaultStorm : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("four.json")) << kFourNodes;
    std::ofstream(dir_.file("secret")) << "storm-cluster-secret-0123456789\n";
    ::chmod(dir_.file("secret").c_str(), 0600);  // a credential file others can read is refused
    token_ = create_token(RAILYARD_SCHEDULER_BIN, dir_.file("state.db"), "alice", "admin");
    ASSERT_EQ(token_.size(), 67u) << token_;
  }
  void start_scheduler(int port) {
    sched_ = std::make_unique<DaemonProcess>(
        RAILYARD_SCHEDULER_BIN,
        std::vector<std::string>{"--listen", "127.0.0.1:" + std::to_string(port), "--db",
                                 dir_.file("state.db"), "--cluster", dir_.file("four.json"),
                                 "--agent-secret-file", dir_.file("secret"), "--heartbeat-timeout", "12"});
    ASSERT_GT(sched_->port(), 0) << "scheduler did not start";
  }
  json job(HttpClient& c, int64_t id) {
    return c.request("GET", "/api/v1/jobs/" + std::to_string(id)).json();
  }
  std::string agent_log() const { return run_capture("tail -20 " + dir_.file("agent.log")); }

  TempDir dir_;
  std::string token_;
  std::unique_ptr<DaemonProcess> sched_;
};

// What one client saw.
struct ClientLog {
  std::map<int64_t, std::string> acked;  // id -> name
  std::set<std::string> unacked;         // names sent without a 201
};

void storm_client(int port, const std::string& token, int client, int quota, int64_t blocker,
                  std::atomic<int>& acked_total, ClientLog& log) {
  HttpClient c(port);
  const bool batch = client >= kClients - kBatchClients;
  int sent = 0;
  while (sent < quota) {
    std::vector<std::string> names;
    const int n = batch ? std::min(kBatchSize, quota - sent) : 1;
    json specs = json::array();
    for (int k = 0; k < n; ++k, ++sent) {
      names.push_back("s" + std::to_string(client) + "-" + std::to_string(sent));
      specs.push_back({{"name", names.back()}, {"gpus", 1}, {"afterok", {blocker}}});
    }
    const HttpResult r = batch ? c.request("POST", "/api/v1/jobs:batch", json{{"jobs", specs}}.dump(), token)
                               : c.request("POST", "/api/v1/jobs", specs[0].dump(), token);
    if (r.status != 201) {
      log.unacked.insert(names.begin(), names.end());
      std::this_thread::sleep_for(20ms);  // the daemon is down (or refusing): try again shortly
      continue;
    }
    const json body = r.json();
    const json ids = batch ? body["ids"] : json::array({body["id"]});
    for (size_t k = 0; k < names.size(); ++k) log.acked[ids.at(k).get<int64_t>()] = names[k];
    acked_total += n;
  }
}

TEST_F(FaultStorm, Kill9DuringA10000SubmitStormLosesNoAcknowledgedJobAndRunningJobsFinish) {
  start_scheduler(0);
  const int port = sched_->port();
  HttpClient c(port);
  auto agent = start_agent({RAILYARD_AGENT_BIN,
                            "http://127.0.0.1:" + std::to_string(port),
                            dir_.file("secret"),
                            "n[1-4]",
                            dir_.file("agent-state"),
                            dir_.file("agent.log"),
                            {}});
  ASSERT_TRUE(until([&] { return connected_nodes(c) == 4; })) << agent_log();

  // Four whole-node jobs (8 ranks each) that outlive the crash; the marker finds their workers.
  const std::string marker = "90." + std::to_string(::getpid());
  WorkerReaper reaper(marker);
  std::vector<int64_t> running;
  for (int i = 0; i < 4; ++i) {
    const json spec = {{"name", "runner-" + std::to_string(i)},
                       {"nodes", 1},
                       {"gpus_per_node", 8},
                       {"launcher", "env"},
                       {"command", {"sleep", marker}},
                       {"time_limit", "10m"}};
    const HttpResult r = c.request("POST", "/api/v1/jobs", spec.dump(), token_);
    ASSERT_EQ(r.status, 201) << r.body;
    running.push_back(r.json()["id"]);
  }
  ASSERT_TRUE(until([&] { return sleeps_with(marker).size() == 32; })) << agent_log();  // a rank per GPU
  // The storm's jobs wait on a held job, so they stay PENDING and the runners keep their nodes.
  // (It needs the whole cluster, so it cannot start before the hold even if a runner ended early.)
  const HttpResult b =
      c.request("POST", "/api/v1/jobs", R"({"name": "blocker", "nodes": 4, "gpus_per_node": 8})", token_);
  ASSERT_EQ(b.status, 201) << b.body;
  const int64_t blocker = b.json()["id"];
  ASSERT_EQ(c.request("POST", "/api/v1/jobs/" + std::to_string(blocker) + "/hold", "", token_).status, 200)
      << job(c, blocker).dump() << agent_log();

  std::atomic<int> acked{0};
  std::vector<ClientLog> logs(kClients);
  std::vector<std::thread> clients;
  const auto storm_start = std::chrono::steady_clock::now();
  for (int t = 0; t < kClients; ++t)
    clients.emplace_back(storm_client, port, token_, t, kStormJobs / kClients, blocker, std::ref(acked),
                         std::ref(logs[static_cast<size_t>(t)]));
  // The kill: after kKillAfterAcked acknowledgements, or 20 s into the storm on a slow machine.
  until([&] { return acked >= kKillAfterAcked; }, 20s);
  ASSERT_GT(acked, 0);
  for (int64_t id : running) EXPECT_EQ(job(c, id)["state"], "RUNNING") << "before the kill";
  const int acked_at_kill = acked;
  sched_->stop(SIGKILL);
  start_scheduler(port);
  ASSERT_EQ(sched_->port(), port);
  for (auto& t : clients) t.join();
  const double storm_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - storm_start).count();

  HttpClient after(port);
  for (int64_t id : running) EXPECT_EQ(job(after, id)["state"], "RUNNING") << "after the restart";
  std::map<int64_t, int> id_count;
  std::map<std::string, int> name_count;
  std::map<int64_t, std::string> stored_name;
  for (const json& j : all_jobs(after)) {
    ++id_count[j["id"].get<int64_t>()];
    ++name_count[j["name"].get<std::string>()];
    stored_name[j["id"].get<int64_t>()] = j["name"];
  }
  size_t acked_jobs = 0, unacked_jobs = 0;
  std::set<std::string> sent;
  for (const ClientLog& l : logs) {
    acked_jobs += l.acked.size();
    unacked_jobs += l.unacked.size();
    for (const auto& [id, name] : l.acked) {
      EXPECT_EQ(id_count[id], 1) << "acknowledged job " << id;
      EXPECT_EQ(stored_name[id], name) << "acknowledged job " << id;
      sent.insert(name);
    }
    sent.insert(l.unacked.begin(), l.unacked.end());
  }
  EXPECT_EQ(acked_jobs + unacked_jobs, static_cast<size_t>(kStormJobs));
  EXPECT_GT(acked_jobs, static_cast<size_t>(acked_at_kill));  // the storm went on after the restart
  size_t stored_storm = 0;
  for (const auto& [id, n] : id_count) EXPECT_EQ(n, 1) << "job id " << id << " listed twice";
  for (const auto& [name, n] : name_count) {
    if (name.rfind("runner-", 0) == 0 || name == "blocker") continue;
    EXPECT_TRUE(sent.count(name)) << "a job nobody submitted: " << name;
    EXPECT_EQ(n, 1) << "stored twice: " << name;
    ++stored_storm;
  }
  EXPECT_GE(stored_storm, acked_jobs);
  EXPECT_LE(stored_storm, acked_jobs + unacked_jobs);
  std::printf(
      "storm: %zu acknowledged, %zu unacknowledged (%zu of those stored), killed at %d acked, %.1f s\n",
      acked_jobs, unacked_jobs, stored_storm - acked_jobs, acked_at_kill, storm_s);

  // The runners outlived the crash and finish normally.
  for (int64_t id : running) {
    json j;
    until([&] { return (j = job(after, id)).value("state", "") != "RUNNING"; }, 120s);
    EXPECT_EQ(j["state"], "COMPLETED") << j.dump() << agent_log();
  }
}

}  // namespace
}  // namespace railyard::testing
