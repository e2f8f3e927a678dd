// The real railyard-agent program over real sockets, against FakeScheduler: registration, an env job on
// two nodes, a 2-node x 2-rank mpi job whose orted launches go railyard-agent-exec -> HTTP -> scheduler
// -> exec order -> agent, logs, reconnect after a dropped connection, and SIGTERM leaving workers running
// for the next agent to adopt. Plus WsClient on its own.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <functional>
#include <thread>

#include "agent/session/protocol.hpp"
#include "agent/tests/fake_scheduler.hpp"
#include "agent/tests/test_util.hpp"
#include "common/net/ws_client.hpp"
#include "jobs/spec_json.hpp"

namespace railyard::agent {
namespace {

using nlohmann::json;
using testing::FakeScheduler;
using testing::TempDir;
using namespace std::chrono_literals;

constexpr const char* kSecret = "net-secret";

// A railyard-agent child process; SIGKILLed if the test leaves it running.
class AgentProcess {
 public:
  AgentProcess(const FakeScheduler& s, const TempDir& dir) {
    const std::string secret = (dir.path() / "secret").string();
    testing::write_file(secret, std::string(kSecret) + "\n");
    std::filesystem::permissions(secret, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    const std::string log = (dir.path() / "agent.log").string();
    const std::vector<std::string> args = {RAILYARD_AGENT,
                                           "--scheduler",
                                           s.url(),
                                           "--secret-file",
                                           secret,
                                           "--nodes",
                                           "n[0-1]",
                                           "--emulate",
                                           "dgx-h100",
                                           "--state-dir",
                                           (dir.path() / "state").string(),
                                           "--allow-root-jobs",
                                           "--grace",
                                           "1",
                                           "--min-free-mb",
                                           "0",
                                           "--reconnect-max",
                                           "1"};
    pid_ = fork();
    if (pid_ == 0) {
      freopen(log.c_str(), "a", stderr);
      freopen(log.c_str(), "a", stdout);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~AgentProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int terminate() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = 0;
};

json spec(std::vector<std::string> command, jobs::Launcher launcher) {
  jobs::JobSpec s;
  s.name = "net";
  s.user = "root";
  s.gpus = 4;
  s.launcher = launcher;
  s.command = std::move(command);
  return jobs::to_json(s);
}

json launch(const std::string& alloc, int node_rank, json job_spec) {
  const json nodes = json::array({{{"name", "n0"}, {"gpus", {0, 1}}}, {{"name", "n1"}, {"gpus", {2, 3}}}});
  return {{"type", "launch"},
          {"v", 1},
          {"alloc", alloc},
          {"job", job_of_alloc(alloc)},
          {"node", nodes[node_rank]["name"]},
          {"node_rank", node_rank},
          {"nodes", nodes},
          {"spec", job_spec},
          {"master_addr", "127.0.0.1"},
          {"master_port", 29611},
          {"time_limit_s", 120}};
}

auto of(const std::string& type, const std::string& alloc = "", const std::string& node = "") {
  return [=](const json& m) {
    return m.value("type", "") == type && (alloc.empty() || m.value("alloc", "") == alloc) &&
           (node.empty() || m.value("node", "") == node);
  };
}

TEST(WsClient, ConnectsSendsReceivesAndReportsFailures) {
  FakeScheduler s(kSecret);
  boost::asio::io_context io;
  net::WsClient ws(io);
  std::vector<std::string> got;
  std::string closed;
  ws.on_open([&] { ws.send(R"({"type":"ping","v":1})"); });
  ws.on_message([&](std::string text) { got.push_back(std::move(text)); });
  ws.on_close([&](const std::string& why) { closed = why; });
  // run_for() leaves the context stopped when it runs out of work: restart it every round.
  auto run_until = [&io](const std::function<bool()>& done) {
    for (int i = 0; i < 500 && !done(); ++i) {
      io.restart();
      io.run_for(10ms);
    }
  };
  ws.connect("ws://127.0.0.1:" + std::to_string(s.port()) + "/api/v1/agent");
  run_until([&] { return !got.empty(); });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(json::parse(got[0])["type"], "hello");
  size_t from = 0;
  EXPECT_FALSE(s.wait_for(of("ping"), from, 5s).is_null());
  s.drop_agents();
  run_until([&] { return !closed.empty(); });
  EXPECT_FALSE(closed.empty());
  EXPECT_FALSE(ws.is_open());

  closed.clear();
  ws.connect("ws://127.0.0.1:1/api/v1/agent");  // nothing listens on port 1
  run_until([&] { return !closed.empty(); });
  EXPECT_NE(closed.find("connect"), std::string::npos) << closed;
  EXPECT_FALSE(net::parse_ws_url("ftp://x:1/"));
  EXPECT_EQ(net::parse_ws_url("http://h:8600")->target, "/");
  EXPECT_FALSE(net::parse_ws_url("http://h:8600")->tls);
  EXPECT_TRUE(net::parse_ws_url("wss://x/")->tls);
  EXPECT_EQ(net::parse_ws_url("https://x/")->port, "443");

  // A wss:// server that is not there ends in on_close naming the step that failed (TLS itself is tested
  // end to end in tests/tls_test.cpp).
  closed.clear();
  ws.connect("wss://127.0.0.1:1/api/v1/agent");
  run_until([&] { return !closed.empty(); });
  EXPECT_NE(closed.find("connect"), std::string::npos) << closed;
}

TEST(AgentProgram, RunsEnvAndMpiJobsOverTheNetwork) {
  TempDir dir;
  FakeScheduler s(kSecret);
  AgentProcess agent(s, dir);
  size_t at = 0;
  json reg = s.wait_for(of("register"), at);
  ASSERT_FALSE(reg.is_null()) << testing::read_file(dir.path() / "agent.log");
  ASSERT_EQ(reg["nodes"].size(), 2u);
  EXPECT_FALSE(s.wait_for(of("heartbeat"), at).is_null());

  // env: two nodes, two ranks each; every node completes.
  const json env_spec =
      spec({"sh", "-c", "echo rank $RANK of $WORLD_SIZE on $RAILYARD_NODE"}, jobs::Launcher::kEnv);
  s.send(launch("1.1", 0, env_spec));
  s.send(launch("1.1", 1, env_spec));
  for (const char* node : {"n0", "n1"}) {
    size_t from = at;
    json done = s.wait_for(of("alloc_finished", "1.1", node), from);
    ASSERT_FALSE(done.is_null()) << node;
    EXPECT_EQ(done["state"], "completed");
  }

  // mpi: mpirun on n0; both orteds arrive through railyard-agent-exec's POST and the agent's exec order.
  s.send(launch("2.1", 1, spec({RAILYARD_MPI_ALLREDUCE}, jobs::Launcher::kMpi)));
  s.send(launch("2.1", 0, spec({RAILYARD_MPI_ALLREDUCE}, jobs::Launcher::kMpi)));
  size_t from = at;
  json done = s.wait_for(of("alloc_finished", "2.1", "n0"), from, 60s);
  ASSERT_FALSE(done.is_null());
  EXPECT_GE(s.exec_requests(), 1);
  s.send({{"type", "logs"},
          {"v", 1},
          {"req", 1},
          {"alloc", "2.1"},
          {"node", "n0"},
          {"rank", 0},
          {"stream", "out"},
          {"offset", 0},
          {"max_bytes", 65536}});
  from = at;
  json chunk = s.wait_for(of("log_chunk", "2.1"), from);
  ASSERT_FALSE(chunk.is_null());
  const std::string out = chunk["data"];
  EXPECT_EQ(done["state"], "completed") << out << testing::read_file(dir.path() / "agent.log");
  int sums = 0, on_n1 = 0;
  for (size_t p = 0; (p = out.find(" sum 6 ", p)) != std::string::npos; ++p) ++sums;
  for (size_t p = 0; (p = out.find(" on n1 sum 6 vader " + (dir.path() / "state/nodes/n1/vader/2.1").string(),
                                   p)) != std::string::npos;
       ++p)
    ++on_n1;
  EXPECT_EQ(sums, 4) << out;
  EXPECT_EQ(on_n1, 2) << out;
  // n1's part is held until the scheduler kills it.
  s.send({{"type", "kill"}, {"v", 1}, {"alloc", "2.1"}, {"node", "n1"}, {"reason", "node 0 finished"}});
  from = at;
  json n1 = s.wait_for(of("alloc_finished", "2.1", "n1"), from);
  ASSERT_FALSE(n1.is_null());
  EXPECT_EQ(n1["state"], "cancelled");
}

TEST(AgentProgram, ReconnectsAndAdoptsWorkersAfterARestart) {
  TempDir dir;
  FakeScheduler s(kSecret);
  size_t at = 0;
  {
    AgentProcess agent(s, dir);
    ASSERT_FALSE(s.wait_for(of("register"), at).is_null()) << testing::read_file(dir.path() / "agent.log");
    s.send(launch("3.1", 0, spec({"sleep", "30"}, jobs::Launcher::kNone)));
    ASSERT_FALSE(s.wait_for(of("launched", "3.1"), at).is_null());
    s.drop_agents();  // the connection goes; the agent comes back and reports what runs
    json again = s.wait_for(of("register"), at, 15s);
    ASSERT_FALSE(again.is_null());
    EXPECT_EQ(again["nodes"][0]["running"][0]["alloc"], "3.1");
    EXPECT_EQ(agent.terminate(), 0);  // SIGTERM: the agent goes, its workers stay
  }
  AgentProcess agent(s, dir);
  json reg = s.wait_for(of("register"), at);
  ASSERT_FALSE(reg.is_null());
  ASSERT_EQ(reg["nodes"][0]["running"].size(), 1u);
  const pid_t pid = reg["nodes"][0]["running"][0]["pids"][0];
  EXPECT_EQ(kill(pid, 0), 0);
  s.send({{"type", "kill"}, {"v", 1}, {"alloc", "3.1"}, {"node", "n0"}, {"reason", "cancel"}});
  json done = s.wait_for(of("alloc_finished", "3.1"), at);
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(done["state"], "cancelled");
}

}  // namespace
}  // namespace railyard::agent
