// Integration tests of the agent protocol: the real `railyard-scheduler` on 127.0.0.1 with a temporary
// database, and a fake agent speaking PROTOCOL.md over a real WebSocket (Beast client, this TU only).
// Also: live updates on /api/v1/watch and static files at /.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "scheduler/daemon/agents.hpp"
#include "tests/agent_ws_client.hpp"
#include "tests/daemon_client.hpp"

namespace railyard::testing {
namespace {

const std::string kBin = RAILYARD_SCHEDULER_BIN;
constexpr const char* kSecret = kAgentTestSecret;
constexpr const char* kTwoNodes = R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n1"}, {"name": "leaf2", "level": "leaf", "nodes": "n2"},
               {"name": "spine", "level": "spine", "children": ["leaf1", "leaf2"]}]})";

json msg(const std::string& type, const std::string& alloc, int64_t job, const std::string& node) {
  return {{"type", type}, {"v", 1}, {"alloc", alloc}, {"job", job}, {"node", node}};
}

class AgentProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("two.json")) << kTwoNodes;
    std::ofstream(dir_.file("secret")) << kSecret << "\n";
    ::chmod(dir_.file("secret").c_str(), 0600);  // a credential file others can read is refused
    token_ = create_token(kBin, db(), "alice", "admin");
  }
  std::string db() const { return dir_.file("state.db"); }
  std::unique_ptr<DaemonProcess> start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--listen",
                                  "127.0.0.1:0",
                                  "--db",
                                  db(),
                                  "--cluster",
                                  dir_.file("two.json"),
                                  "--agent-secret-file",
                                  dir_.file("secret")};
    if (std::find(extra.begin(), extra.end(), "--web-root") == extra.end())
      extra.insert(extra.end(), {"--web-root", "none"});
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<DaemonProcess>(kBin, args);
  }
  int64_t submit(HttpClient& c, int gpus, bool requeue = false) {
    json spec = {
        {"name", "t"}, {"gpus", gpus}, {"launcher", "env"}, {"command", {"/bin/true"}}, {"requeue", requeue}};
    return c.request("POST", "/api/v1/jobs", spec.dump(), token_).json().value("id", int64_t{0});
  }
  json job(HttpClient& c, int64_t id) {
    return c.request("GET", "/api/v1/jobs/" + std::to_string(id)).json();
  }
  // Polls until pred(job) or about 10 s.
  template <typename Pred>
  json wait_job(HttpClient& c, int64_t id, Pred pred) {
    json j;
    for (int i = 0; i < 200; ++i) {
      j = job(c, id);
      if (pred(j)) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return j;
  }

  // Registers n1 and n2 on `a`, submits a 16-GPU job and reports both nodes launched; returns the job id
  // once the job is RUNNING (its allocation is "<id>.1"), or 0.
  int64_t run_two_node_job(FakeAgent& a, HttpClient& c) {
    if (a.register_nodes({"n1", "n2"})["type"] != "registered") return 0;
    const int64_t id = submit(c, 16);
    if (a.expect("launch").is_null()) return 0;
    for (const auto& n : {"n1", "n2"}) a.send(msg("launched", std::to_string(id) + ".1", id, n));
    const json j = wait_job(c, id, [](const json& j) { return j["state"] == "RUNNING"; });
    return j["state"] == "RUNNING" ? id : 0;
  }

  TempDir dir_;
  std::string token_;
};

TEST_F(AgentProtocolTest, RegisterWithTheRightSecretAndRefusedWithAWrongOne) {
  auto d = start();
  FakeAgent good(d->port());
  EXPECT_EQ(good.challenge.size(), 64u);
  json reg = good.register_nodes({"n1", "n2"});
  EXPECT_EQ(reg["type"], "registered");
  EXPECT_EQ(reg["nodes"], json({"n1", "n2"}));
  FakeAgent bad(d->port());
  json err = bad.register_nodes({"n1"}, json::object(), "not-the-secret-at-all");
  EXPECT_EQ(err["type"], "error");
  EXPECT_EQ(err["code"], "unauthorized");
  EXPECT_TRUE(bad.read().is_null()) << "the connection is closed";
  HttpClient c(d->port());
  auto metrics = c.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find("railyard_agents_connected_nodes 2"), std::string::npos);
  EXPECT_NE(metrics.find("railyard_agent_refused_total 1"), std::string::npos);
  auto node = c.request("GET", "/api/v1/nodes/n1").json();
  EXPECT_EQ(node["connected"], true);
  EXPECT_TRUE(node["last_heartbeat"].is_number());
}

TEST_F(AgentProtocolTest, LaunchOrdersAndReportsDriveAJobToCompleted) {
  auto d = start();
  FakeAgent a(d->port());
  ASSERT_EQ(a.register_nodes({"n1", "n2"})["type"], "registered");
  HttpClient c(d->port());
  WsClient watch(d->port(), "/api/v1/watch");
  ASSERT_EQ(watch.read()["type"], "hello");
  const int64_t id = submit(c, 16);
  ASSERT_GT(id, 0);
  const std::string alloc = std::to_string(id) + ".1";
  json l1 = a.expect("launch"), l2 = a.expect("launch");
  ASSERT_FALSE(l1.is_null());
  ASSERT_FALSE(l2.is_null());
  EXPECT_EQ(l1["alloc"], alloc);
  EXPECT_EQ(l1["master_addr"], "127.0.0.1");
  for (const auto& n : {"n1", "n2"}) a.send(msg("launched", alloc, id, n));
  EXPECT_EQ(wait_job(c, id, [](const json& j) { return j["state"] == "RUNNING"; })["state"], "RUNNING");
  for (const auto& [n, seq] : {std::pair{"n1", 1}, std::pair{"n2", 2}}) {
    json f = msg("alloc_finished", alloc, id, n);
    f.update({{"state", "completed"}, {"exit_code", 0}, {"signal", 0}, {"message", ""}, {"seq", seq}});
    a.send(f);
    EXPECT_EQ(a.expect("ack")["seq"], seq);
  }
  json done = job(c, id);
  EXPECT_EQ(done["state"], "COMPLETED");
  EXPECT_EQ(done["exit_code"], 0);
  // The watcher saw the job go through its states.
  std::set<std::string> seen;
  while (!seen.count("COMPLETED")) {
    json f = watch.expect("job");
    if (f.is_null()) break;
    if (f["job"]["id"] == id) seen.insert(f["job"]["state"].get<std::string>());
  }
  EXPECT_TRUE(seen.count("RUNNING") && seen.count("COMPLETED"));
  auto events = c.request("GET", "/api/v1/jobs/" + std::to_string(id) + "/events").json();
  ASSERT_TRUE(events["events"].is_array());
  EXPECT_EQ(events["events"].back()["actor"], "agent:n2");
}

TEST_F(AgentProtocolTest, SilentAgentNodesGoDownJobRequeuedAndOldAllocationFenced) {
  auto d = start({"--heartbeat-timeout", "2"});
  HttpClient c(d->port());
  int64_t id = 0;
  {
    FakeAgent a(d->port());
    ASSERT_EQ(a.register_nodes({"n1", "n2"})["type"], "registered");
    id = submit(c, 8, /*requeue=*/true);
    json l = a.expect("launch");
    ASSERT_FALSE(l.is_null());
    a.send(msg("launched", l["alloc"], id, l["node"]));
    ASSERT_EQ(wait_job(c, id, [](const json& j) { return j["state"] == "RUNNING"; })["state"], "RUNNING");
    // Silent from here on (the connection stays open).
    json j = wait_job(c, id, [](const json& j) { return j["state"] != "RUNNING"; });
    EXPECT_EQ(j["state"], "PENDING");
    const std::string events = c.request("GET", "/api/v1/jobs/" + std::to_string(id) + "/events").body;
    EXPECT_NE(events.find("requeued after NODE_FAIL"), std::string::npos) << events;
    EXPECT_EQ(c.request("GET", "/api/v1/nodes/n1").json()["health"], "down");
  }
  // The agent comes back still running attempt 1: told to kill it, then given attempt 2.
  FakeAgent back(d->port());
  const std::string old_alloc = std::to_string(id) + ".1";
  json running = {{"n1", {{{"alloc", old_alloc}, {"job", id}}}}};
  json reg = back.register_nodes({"n1", "n2"}, running);
  ASSERT_EQ(reg["type"], "registered");
  ASSERT_EQ(reg["kill"].size(), 1u);
  EXPECT_EQ(reg["kill"][0]["alloc"], old_alloc);
  json l = back.expect("launch");
  EXPECT_EQ(l["alloc"], std::to_string(id) + ".2");
}

TEST_F(AgentProtocolTest, RunningJobSurvivesASchedulerRestartAndCompletes) {
  int64_t id = 0;
  std::string alloc;
  {
    auto d = start();
    FakeAgent a(d->port());
    HttpClient c(d->port());
    id = run_two_node_job(a, c);
    ASSERT_NE(id, 0) << "the 16-GPU job did not reach RUNNING";
    alloc = std::to_string(id) + ".1";
  }
  auto d = start();
  HttpClient c(d->port());
  EXPECT_EQ(job(c, id)["state"], "RUNNING");
  FakeAgent a(d->port());
  json running = {{"n1", {{{"alloc", alloc}, {"job", id}}}}, {"n2", {{{"alloc", alloc}, {"job", id}}}}};
  json reg = a.register_nodes({"n1", "n2"}, running);
  EXPECT_TRUE(reg["kill"].empty());
  EXPECT_EQ(job(c, id)["state"], "RUNNING");
  for (const auto& n : {"n1", "n2"}) {
    json f = msg("alloc_finished", alloc, id, n);
    f.update({{"state", "completed"}, {"exit_code", 0}, {"seq", 5}});
    a.send(f);
    ASSERT_FALSE(a.expect("ack").is_null());
  }
  EXPECT_EQ(job(c, id)["state"], "COMPLETED");
}

// A cancelled job whose nodes have not confirmed the kill keeps its GPUs across a scheduler restart: they
// are not allocatable until the node that still runs it confirms (scheduler/API.md, GPU holds).
TEST_F(AgentProtocolTest, GpusOfACancelledJobStayHeldAcrossARestartUntilTheKillIsConfirmed) {
  auto gpus_free = [](HttpClient& c) {
    const std::string m = c.request("GET", "/metrics").body;
    const size_t at = m.find("\nrailyard_gpus_free ");
    return at == std::string::npos ? -1 : std::atoi(m.c_str() + at + 20);
  };
  int64_t id = 0;
  std::string alloc;
  {
    auto d = start();
    FakeAgent a(d->port());
    HttpClient c(d->port());
    id = run_two_node_job(a, c);
    ASSERT_NE(id, 0) << "the 16-GPU job did not reach RUNNING";
    alloc = std::to_string(id) + ".1";
    ASSERT_EQ(c.request("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", "", token_).status, 200);
    EXPECT_EQ(a.expect("kill")["alloc"], alloc);
    EXPECT_EQ(gpus_free(c), 0);
  }  // stopped before the agent confirmed
  auto d = start();
  HttpClient c(d->port());
  EXPECT_EQ(job(c, id)["state"], "CANCELLED");
  EXPECT_EQ(gpus_free(c), 0) << "the hold was reloaded";
  FakeAgent a(d->port());
  json running = {{"n1", {{{"alloc", alloc}, {"job", id}}}}};  // n2's part ended while the scheduler was away
  json reg = a.register_nodes({"n1", "n2"}, running);
  ASSERT_EQ(reg["kill"].size(), 1u);
  EXPECT_EQ(reg["kill"][0]["node"], "n1");
  EXPECT_EQ(gpus_free(c), 0) << "n1 has not confirmed";
  const int64_t next = submit(c, 8);
  json f = msg("alloc_finished", alloc, id, "n1");
  f.update({{"state", "cancelled"}, {"exit_code", 143}, {"seq", 9}});
  a.send(f);
  ASSERT_FALSE(a.expect("ack").is_null());
  EXPECT_EQ(wait_job(c, next, [](const json& j) { return j["state"] == "STARTING"; })["state"], "STARTING");
}

TEST_F(AgentProtocolTest, LaunchTimeoutFlagFailsAJobWhoseLaunchIsNeverAnswered) {
  auto d = start({"--launch-timeout", "1"});
  FakeAgent a(d->port());
  ASSERT_EQ(a.register_nodes({"n1", "n2"})["type"], "registered");
  HttpClient c(d->port());
  const int64_t id = submit(c, 8);
  ASSERT_FALSE(a.expect("launch").is_null());  // never answered
  json j = wait_job(c, id, [](const json& j) { return j["state"] == "FAILED"; });
  EXPECT_EQ(j["state"], "FAILED");
  EXPECT_NE(j["reason"].get<std::string>().find("within 1 s"), std::string::npos) << j["reason"];
  // 0 is refused with a clear error.
  const std::string out = run_capture(kBin + " --launch-timeout 0 --db " + dir_.file("x.db") + " 2>&1");
  EXPECT_NE(out.find("--launch-timeout"), std::string::npos) << out;
}

TEST_F(AgentProtocolTest, ServesStaticFilesWithoutEscapingTheRoot) {
  std::filesystem::create_directories(dir_.file("web/js"));
  std::ofstream(dir_.file("web/index.html")) << "<h1>railyard</h1>";
  std::ofstream(dir_.file("web/js/app.js")) << "console.log(1)";
  std::ofstream(dir_.file("outside.txt")) << "secret";
  std::filesystem::create_symlink(dir_.file("outside.txt"), dir_.file("web/link.txt"));
  auto d = start({"--web-root", dir_.file("web")});
  HttpClient c(d->port());
  auto index = c.request("GET", "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<h1>railyard</h1>");
  EXPECT_EQ(c.request("GET", "/js/app.js").body, "console.log(1)");
  EXPECT_EQ(c.request("GET", "/missing.css").status, 404);
  EXPECT_EQ(c.request("GET", "/../outside.txt").status / 100, 4);
  EXPECT_EQ(c.request("GET", "/js/%2e%2e/%2e%2e/outside.txt").status / 100, 4);
  EXPECT_EQ(c.request("GET", "/link.txt").status, 404);
  EXPECT_EQ(c.request("GET", "/api/v1/health").status, 200);
}

TEST_F(AgentProtocolTest, LogsAndExecAreAnsweredThroughTheAgent) {
  auto d = start();
  FakeAgent a(d->port());
  ASSERT_EQ(a.register_nodes({"n1", "n2"})["type"], "registered");
  HttpClient c(d->port());
  json spec = {{"name", "m"}, {"gpus", 16}, {"launcher", "mpi"}, {"command", {"/bin/true"}}};
  const int64_t id = c.request("POST", "/api/v1/jobs", spec.dump(), token_).json().value("id", int64_t{0});
  const std::string alloc = std::to_string(id) + ".1";
  json l = a.expect("launch");
  ASSERT_FALSE(l.is_null());
  a.send(msg("launched", alloc, id, "n1"));  // mpi: node 0 decides
  ASSERT_EQ(wait_job(c, id, [](const json& j) { return j["state"] == "RUNNING"; })["state"], "RUNNING");
  // The HTTP request waits for the agent's answer: issue it from another thread.
  HttpResult logs;
  std::thread reader([&] {
    HttpClient c2(d->port());
    logs = c2.request("GET", "/api/v1/jobs/" + std::to_string(id) + "/logs?rank=3&stream=err&offset=5", "",
                      token_);
  });
  json q = a.expect("logs");
  ASSERT_FALSE(q.is_null());
  EXPECT_EQ(q["node"], "n1");
  EXPECT_EQ(q["stream"], "err");
  EXPECT_EQ(q["offset"], 5);
  a.send({{"type", "log_chunk"},
          {"v", 1},
          {"req", q["req"]},
          {"alloc", alloc},
          {"rank", 3},
          {"stream", "err"},
          {"offset", 5},
          {"data", "hello"},
          {"size", 10}});
  reader.join();
  EXPECT_EQ(logs.status, 200) << logs.body;
  EXPECT_EQ(logs.json()["data"], "hello");
  EXPECT_EQ(logs.json()["next_offset"], 10);
  // mpi ranks fill the hostfile's slots in node order (8 per node here): rank 12's own log is on n2.
  std::thread reader12([&] {
    HttpClient c2(d->port());
    logs = c2.request("GET", "/api/v1/jobs/" + std::to_string(id) + "/logs?rank=12", "", token_);
  });
  q = a.expect("logs");
  ASSERT_FALSE(q.is_null());
  EXPECT_EQ(q["node"], "n2");
  EXPECT_EQ(q["rank"], 12);
  a.send({{"type", "log_chunk"},
          {"v", 1},
          {"req", q["req"]},
          {"alloc", alloc},
          {"rank", 12},
          {"stream", "out"},
          {"offset", 0},
          {"data", "twelve"},
          {"size", 6}});
  reader12.join();
  EXPECT_EQ(logs.json().value("data", ""), "twelve") << logs.body;

  HttpResult exec;
  const std::string body = R"({"node":"n2","argv":["orted","-mca","x"]})";
  EXPECT_EQ(c.request("POST", "/api/v1/allocs/" + alloc + "/exec", body, "bad").status, 403);
  std::thread execer([&] {
    HttpClient c2(d->port());
    exec = c2.request("POST", "/api/v1/allocs/" + alloc + "/exec", body, daemon::exec_token(kSecret, alloc));
  });
  json e = a.expect("exec");
  ASSERT_FALSE(e.is_null());
  EXPECT_EQ(e["node"], "n2");
  EXPECT_EQ(e["argv"][0], "orted");
  a.send({{"type", "exec_started"}, {"v", 1}, {"req", e["req"]}, {"pid", 4242}});
  execer.join();
  EXPECT_EQ(exec.status, 200) << exec.body;
  EXPECT_EQ(exec.json()["pid"], 4242);
  // mpi: node 0's completion completes the job and the other node is told to stop.
  json f = msg("alloc_finished", alloc, id, "n1");
  f.update({{"state", "completed"}, {"exit_code", 0}, {"seq", 1}});
  a.send(f);
  json k = a.expect("kill");
  EXPECT_EQ(k["node"], "n2");
  EXPECT_EQ(job(c, id)["state"], "COMPLETED");
}

}  // namespace
}  // namespace railyard::testing
