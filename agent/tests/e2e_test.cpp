// railyard-agent with the real railyard-scheduler: two agent processes (one per emulated DGX H100 node)
// on 127.0.0.1, jobs submitted over the HTTP API. A 2-node env job and a 2-node x 2-rank mpi job (real
// MPI_Allreduce; orteds through railyard-agent-exec -> scheduler -> exec order) complete and their logs
// come back; cancel ends every rank on both nodes; a rank exiting 1 fails the job; kill -9 of an agent
// makes its node DOWN and the job NODE_FAIL, and the other node's ranks are killed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "agent/launch/cgroup.hpp"
#include "tests/daemon_client.hpp"
#include "tests/fault_util.hpp"

namespace railyard::agent {
namespace {

using nlohmann::json;
using railyard::testing::DaemonProcess;
using railyard::testing::HttpClient;
using railyard::testing::TempDir;
using namespace std::chrono_literals;

constexpr const char* kTwoNodes = R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n1"}, {"name": "leaf2", "level": "leaf", "nodes": "n2"},
               {"name": "spine", "level": "spine", "children": ["leaf1", "leaf2"]}]})";

class Agent {
 public:
  Agent(int port, const TempDir& dir, const std::string& node) {
    const std::vector<std::string> args = {RAILYARD_AGENT,
                                           "--scheduler",
                                           "http://127.0.0.1:" + std::to_string(port),
                                           "--secret-file",
                                           dir.file("secret"),
                                           "--node",
                                           node,
                                           "--emulate",
                                           "dgx-h100",
                                           "--state-dir",
                                           dir.file("agent-" + node),
                                           "--mpi-output-dir",  // one path for both, as on a real cluster
                                           dir.file("mpi-output"),
                                           "--allow-root-jobs",
                                           "--grace",
                                           "1",
                                           "--min-free-mb",
                                           "0",
                                           "--reconnect-max",
                                           "1"};
    const std::string log = dir.file("agent-" + node + ".log");
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
  ~Agent() { stop(SIGTERM); }
  void stop(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  pid_t pid_ = 0;
};

// Living `sleep <...marker...>` processes (fault_util.hpp's /proc scan, which skips one that exits mid-read).
using railyard::testing::sleeps_with;
int processes_with(const std::string& marker) { return static_cast<int>(sleeps_with(marker).size()); }

class AgentE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("two.json")) << kTwoNodes;
    std::ofstream(dir_.file("secret")) << "e2e-cluster-secret-0123456789\n";
    ::chmod(dir_.file("secret").c_str(), 0600);  // a credential file others can read is refused
    token_ = railyard::testing::create_token(RAILYARD_SCHEDULER, dir_.file("state.db"), "alice", "admin");
    start_scheduler(0);
    ASSERT_GT(sched_->port(), 0);
    http_ = std::make_unique<HttpClient>(sched_->port());
    for (const char* n : {"n1", "n2"}) agents_[n] = std::make_unique<Agent>(sched_->port(), dir_, n);
    ASSERT_TRUE(until([&] {
      const json nodes = http_->request("GET", "/api/v1/nodes").json();
      return nodes.contains("nodes") && nodes["nodes"].size() == 2 && connected_nodes() == 2;
    })) << logs();
  }
  void start_scheduler(int port) {
    sched_ = std::make_unique<DaemonProcess>(
        RAILYARD_SCHEDULER,
        std::vector<std::string>{"--listen", "127.0.0.1:" + std::to_string(port), "--db",
                                 dir_.file("state.db"), "--cluster", dir_.file("two.json"),
                                 "--agent-secret-file", dir_.file("secret"), "--heartbeat-timeout", "12"});
  }
  void TearDown() override {
    agents_.clear();
    sched_.reset();
  }

  // Nodes whose agent is registered, from the scheduler's Prometheus text.
  int connected_nodes() {
    const std::string m = http_->request("GET", "/metrics").body;
    const std::string key = "\nrailyard_agents_connected_nodes ";
    const size_t at = m.find(key);
    return at == std::string::npos ? 0 : std::atoi(m.c_str() + at + key.size());
  }

  static bool until(const std::function<bool()>& done, std::chrono::seconds limit = 30s) {
    for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
      if (done()) return true;
      std::this_thread::sleep_for(50ms);
    }
    return done();
  }

  int64_t submit(const json& spec) {
    const auto r = http_->request("POST", "/api/v1/jobs", spec.dump(), token_);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json().value("id", int64_t{0});
  }
  json job(int64_t id) { return http_->request("GET", "/api/v1/jobs/" + std::to_string(id)).json(); }
  json wait_state(int64_t id, const std::set<std::string>& states, std::chrono::seconds limit = 60s) {
    json j;
    until([&] { return states.count((j = job(id)).value("state", "")) > 0; }, limit);
    return j;
  }
  std::string log_of(int64_t id, int rank, const std::string& stream = "out") {
    const auto r = http_->request("GET",
                                  "/api/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank) +
                                      "&stream=" + stream,
                                  "", token_);
    return r.json().value("data", std::string("<") + std::to_string(r.status) + " " + r.body + ">");
  }
  std::string logs() const {
    std::string out;
    for (const char* n : {"n1", "n2"})
      out += railyard::testing::run_capture("tail -5 " + dir_.file(std::string("agent-") + n + ".log"));
    return out;
  }
  static json two_nodes(const std::string& launcher, std::vector<std::string> command) {
    return {{"name", "e2e"},
            {"nodes", 2},
            {"gpus_per_node", 2},
            {"launcher", launcher},
            {"command", std::move(command)},
            {"time_limit", "5m"}};
  }

  TempDir dir_;
  std::string token_;
  std::unique_ptr<DaemonProcess> sched_;
  std::unique_ptr<HttpClient> http_;
  std::map<std::string, std::unique_ptr<Agent>> agents_;
};

TEST_F(AgentE2E, EnvAndMpiJobsCompleteAndTheirLogsComeBack) {
  const int64_t env =
      submit(two_nodes("env", {"sh", "-c", "echo rank $RANK of $WORLD_SIZE on $RAILYARD_NODE"}));
  const int64_t mpi = submit(two_nodes("mpi", {RAILYARD_MPI_ALLREDUCE}));
  json j = wait_state(env, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"});
  EXPECT_EQ(j["state"], "COMPLETED") << j.dump() << logs();
  EXPECT_EQ(log_of(env, 0), "rank 0 of 4 on n1\n");
  EXPECT_EQ(log_of(env, 3), "rank 3 of 4 on n2\n");
  j = wait_state(mpi, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"});
  const std::string out = log_of(mpi, 0);
  EXPECT_EQ(j["state"], "COMPLETED") << j.dump() << out << "\nmpirun stderr:\n" << log_of(mpi, 0, "err") << logs();
  int sums = 0, on_n2 = 0;
  for (size_t p = 0; (p = out.find(" sum 6 ", p)) != std::string::npos; ++p) ++sums;
  for (size_t p = 0; (p = out.find(" on n2 sum 6 vader ", p)) != std::string::npos; ++p) ++on_n2;
  EXPECT_EQ(sums, 4) << out;
  EXPECT_EQ(on_n2, 2) << out;
  // Every other rank's log is its own (Open MPI's --output-filename files, read by the agent of the node
  // that ran it: ranks by slot in hostfile order, 1 on n1, 2 and 3 on n2); rank 0's stays the combined view.
  for (const auto& [rank, node] : std::vector<std::pair<int, std::string>>{{1, "n1"}, {2, "n2"}, {3, "n2"}}) {
    const std::string own = log_of(mpi, rank);
    const std::string head = "rank " + std::to_string(rank) + " of 4 on " + node + " sum 6 vader ";
    EXPECT_EQ(own.rfind(head, 0), 0u) << "rank " << rank << ": " << own << logs();
    EXPECT_EQ(std::count(own.begin(), own.end(), '\n'), 1) << "rank " << rank << ": " << own;
  }
}

// A remote daemon that dies (here every "orted" is /bin/false, through Open MPI's orte_launch_agent) never
// reports to mpirun, which learns of it only from its rsh agent; railyard-agent-exec exits once the daemon
// started. The agent that ran it fails its part of the allocation, so the job ends FAILED at once instead
// of mpirun waiting until the time limit.
TEST_F(AgentE2E, ARemoteDaemonThatDiesFailsTheMpiJob) {
  json spec = two_nodes("mpi", {RAILYARD_MPI_ALLREDUCE});
  spec["env"] = {{"OMPI_MCA_orte_launch_agent", "/bin/false"}};
  spec["time_limit"] = "10m";
  const int64_t id = submit(spec);
  const json j = wait_state(id, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"}, 120s);
  EXPECT_EQ(j["state"], "FAILED") << j.dump() << "\nmpirun stderr:\n" << log_of(id, 0, "err") << logs();
  EXPECT_NE(j.value("reason", "").find("railyard-agent-exec"), std::string::npos) << j.dump();
}

// Issue 7's check: a 4-rank MPI training run (2 nodes x 2 ranks, through both agents) reaches its quality
// target and the scheduler records its time-to-train from the MLLOG lines the agent streamed.
TEST_F(AgentE2E, FourRankTrainingReachesItsTargetAndTheSchedulerRecordsTimeToTrain) {
  json spec = two_nodes("mpi", {RAILYARD_TRAIN, "--backend", "mpi", "--target-accuracy", "0.95"});
  spec["name"] = "digits-4r";
  spec["target"] = {{"metric", "eval_accuracy"}, {"value", 0.95}};
  const auto submitted = std::chrono::steady_clock::now();
  const int64_t id = submit(spec);
  json j = wait_state(id, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"}, 180s);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted).count();
  const std::string out = log_of(id, 0);
  ASSERT_EQ(j["state"], "COMPLETED") << j.dump() << out << logs();
  ASSERT_TRUE(j["time_to_train_s"].is_number()) << j.dump();
  const double ttt = j["time_to_train_s"];
  EXPECT_GT(ttt, 0.0);
  EXPECT_LT(ttt, wall) << "time-to-train is run_stop - run_start, inside the job's wall time";
  EXPECT_NE(out.find("run_stop"), std::string::npos) << out;
  // The metrics route holds the quality curve: at least one eval_accuracy at or above the target.
  const json m = http_->request("GET", "/api/v1/jobs/" + std::to_string(id) + "/metrics").json();
  double best = 0;
  for (const auto& sample : m.value("samples", json::array()))
    if (sample.value("key", "") == "eval_accuracy" && sample.contains("data"))
      best = std::max(best, sample["data"].value("value", 0.0));
  EXPECT_GE(best, 0.95) << m.dump().substr(0, 2000);
}

TEST_F(AgentE2E, CancelKillsEveryRankAndAFailingRankFailsTheJob) {
  const std::string marker = "300." + std::to_string(getpid());
  const int64_t id = submit(two_nodes("env", {"sleep", marker}));
  ASSERT_TRUE(until([&] { return processes_with(marker) == 4; })) << job(id).dump() << logs();
  EXPECT_EQ(wait_state(id, {"RUNNING"})["state"], "RUNNING");
  EXPECT_EQ(http_->request("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", "", token_).status, 200);
  EXPECT_TRUE(until([&] { return processes_with(marker) == 0; })) << logs();
  EXPECT_EQ(job(id)["state"], "CANCELLED");

  const int64_t bad =
      submit(two_nodes("env", {"sh", "-c", "if [ $RANK = 3 ]; then exit 1; fi; exec sleep " + marker}));
  json j = wait_state(bad, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"});
  EXPECT_EQ(j["state"], "FAILED") << j.dump();
  EXPECT_EQ(j["exit_code"], 1) << j.dump();
  EXPECT_TRUE(until([&] { return processes_with(marker) == 0; })) << logs();
}

TEST_F(AgentE2E, JobOutlivesASchedulerRestart) {
  const int64_t id = submit(two_nodes("env", {"sh", "-c", "sleep 2; echo done $RANK"}));
  EXPECT_EQ(wait_state(id, {"RUNNING"})["state"], "RUNNING");
  const int port = sched_->port();
  sched_->stop(SIGTERM);  // the ranks finish while no scheduler listens: alloc_finished waits on disk
  std::this_thread::sleep_for(2500ms);
  start_scheduler(port);
  ASSERT_EQ(sched_->port(), port);
  http_ = std::make_unique<HttpClient>(port);
  json j = wait_state(id, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"});
  EXPECT_EQ(j["state"], "COMPLETED") << j.dump() << logs();
  EXPECT_EQ(log_of(id, 2), "done 2\n");
}

TEST_F(AgentE2E, KilledAgentMeansNodeFail) {
  const std::string marker = "301." + std::to_string(getpid());
  const int64_t id = submit(two_nodes("env", {"sleep", marker}));
  ASSERT_TRUE(until([&] { return processes_with(marker) == 4; })) << job(id).dump() << logs();
  agents_["n2"]->stop(SIGKILL);  // n2's ranks stay (as on a node that lost its agent); n1's must go
  json j = wait_state(id, {"NODE_FAIL", "PENDING", "FAILED"}, 40s);
  EXPECT_EQ(j["state"], "NODE_FAIL") << j.dump();
  EXPECT_TRUE(until([&] { return processes_with(marker) == 2; })) << logs();  // n1's ranks killed
  const json nodes = http_->request("GET", "/api/v1/nodes").json();
  EXPECT_EQ(nodes["nodes"][1]["health"], "down") << nodes.dump();
  for (pid_t pid : sleeps_with(marker)) kill(pid, SIGKILL);  // n2's orphans (a real node went with its agent)
}

// Issue 32: a job past its --mem is OOM-killed by the kernel inside its allocation's cgroup and ends
// OUT_OF_MEMORY; its nodes stay up and take the next job. Skips where the agents cannot make cgroups.
TEST_F(AgentE2E, JobPastItsMemoryEndsOutOfMemoryAndTheNodesStayUp) {
  auto driver = detect_cgroup_driver(CgroupSetup{});
  if (!driver) GTEST_SKIP() << "no usable cgroup hierarchy: " << driver.error().message;
  json spec = two_nodes("env", {"sh", "-c", "a=$(head -c 256M /dev/zero | tr '\\0' x); echo held"});
  spec["mem_mb"] = 32;
  const int64_t id = submit(spec);
  json j = wait_state(id, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY"});
  EXPECT_EQ(j["state"], "OUT_OF_MEMORY") << j.dump() << logs();
  EXPECT_EQ(j["spec"].value("mem_mb", 0), 32) << j.dump();
  EXPECT_NE(j.value("reason", "").find("out_of_memory"), std::string::npos) << j.dump();
  const json nodes = http_->request("GET", "/api/v1/nodes").json();
  for (const auto& n : nodes["nodes"]) EXPECT_EQ(n["health"], "up") << nodes.dump();
  const int64_t next = submit(two_nodes("env", {"sh", "-c", "echo fine"}));
  j = wait_state(next, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY"});
  EXPECT_EQ(j["state"], "COMPLETED") << j.dump() << logs();
}

}  // namespace
}  // namespace railyard::agent
