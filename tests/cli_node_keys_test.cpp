// `railyard node add`, `railyard node rotate-key` and the per-node keys of `railyard up` (issue 32): real
// railyard, railyard-scheduler and railyard-agent processes on 127.0.0.1.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/cli_test_util.hpp"

namespace railyard::testing {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CliNodeKeys, AddPrintsAKeyOnceAndRotateNeedsOne) {
  TempDir tmp;
  const std::string db = tmp.file("state.db");
  const std::map<std::string, std::string> env{{"HOME", tmp.file("home")}};
  auto added = run_cli(RAILYARD_BIN, {"node", "add", "n1", "--db", db}, env);
  ASSERT_EQ(added.code, 0) << added.err;
  EXPECT_TRUE(std::regex_match(added.out, std::regex("n1 [0-9a-f]{64}\n"))) << added.out;
  auto again = run_cli(RAILYARD_BIN, {"node", "add", "n1", "--db", db}, env);
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("already has a key: `railyard node rotate-key n1`"), std::string::npos) << again.err;
  auto none = run_cli(RAILYARD_BIN, {"node", "rotate-key", "n9", "--db", db}, env);
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("node n9 has no key"), std::string::npos) << none.err;
  std::filesystem::create_directories(tmp.file("keys"));
  ASSERT_EQ(run_cli(RAILYARD_BIN, {"node", "add", "n[2-3]", "--key-dir", tmp.file("keys"), "--db", db}, env).code, 0);
  struct stat st {};
  ASSERT_EQ(::stat(tmp.file("keys/n3.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string before = read_all(tmp.file("keys/n3.key"));
  ASSERT_EQ(run_cli(RAILYARD_BIN, {"node", "rotate-key", "n3", "--key-dir", tmp.file("keys"), "--db", db}, env).code, 0);
  const std::string after = read_all(tmp.file("keys/n3.key"));
  EXPECT_TRUE(std::regex_match(after, std::regex("n3 [0-9a-f]{64}\n"))) << after;
  EXPECT_NE(after, before);
  ASSERT_EQ(::stat(db.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << "the database holds the keys: owner only";
}

// `railyard up` gives each agent its own node's key; a rotation (new file, SIGHUP), on the database and then
// through the API, re-registers the agent with the new key while its job keeps running, untouched.
TEST(CliNodeKeys, LocalClusterAgentsUseTheirOwnKeysAndARotationKeepsTheJobRunning) {
  const auto agent = std::filesystem::path(RAILYARD_BIN).parent_path().parent_path() / "agent" / "railyard-agent";
  if (!std::filesystem::exists(agent)) GTEST_SKIP() << "railyard-agent is not built yet";
  TempDir tmp;
  const std::string dir = tmp.file("state");
  const std::map<std::string, std::string> env{{"HOME", tmp.file("home")}};
  auto up = run_cli(RAILYARD_BIN, {"up", "--nodes", "2", "--port", "0", "--state-dir", dir, "--timeout", "60"}, env);
  ASSERT_EQ(up.code, 0) << up.err;
  const std::string pids = read_all(dir + "/pids");
  EXPECT_NE(pids.find("--node-keys"), std::string::npos) << pids;
  EXPECT_EQ(pids.find("--agent-secret-file"), std::string::npos) << pids;
  EXPECT_NE(pids.find("--key-file " + dir + "/keys/dgx001.key"), std::string::npos) << pids;
  EXPECT_EQ(pids.find(dir + "/keys/dgx002.key --node dgx001"), std::string::npos) << "one node's key per agent";
  auto sub = run_cli(RAILYARD_BIN, {"submit", "--gpus", "1", "--", "/bin/sleep", "120"}, env);
  ASSERT_EQ(sub.code, 0) << sub.err;
  const std::string id = trimmed(sub.out);
  nlohmann::json job;
  for (int i = 0; i < 200; ++i) {
    job = run_cli(RAILYARD_BIN, {"show", id, "--json"}, env).json()["job"];
    if (job.is_object() && job["state"] == "RUNNING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(job["state"], "RUNNING") << job;
  const std::string node = job["nodes"][0], log = dir + "/agents/" + node + ".log";
  const std::string old_key = read_all(dir + "/keys/" + node + ".key");
  auto rotated = run_cli(RAILYARD_BIN,
                         {"node", "rotate-key", node, "--key-dir", dir + "/keys", "--grace", "0", "--state-dir", dir}, env);
  ASSERT_EQ(rotated.code, 0) << rotated.err;
  ASSERT_NE(read_all(dir + "/keys/" + node + ".key"), old_key);
  pid_t agent_pid = 0;
  std::istringstream lines(pids);
  for (std::string line; std::getline(lines, line);)
    if (line.find("\tagent\t") != std::string::npos && line.find("--node " + node + " ") != std::string::npos)
      agent_pid = std::atoi(line.c_str());
  ASSERT_GT(agent_pid, 0) << pids;
  const size_t registrations = count(read_all(log), "registered; heartbeat");
  ASSERT_EQ(::kill(agent_pid, SIGHUP), 0);
  for (int i = 0; i < 100 && count(read_all(log), "registered; heartbeat") <= registrations; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GT(count(read_all(log), "registered; heartbeat"), registrations) << read_all(log);
  const auto now = run_cli(RAILYARD_BIN, {"show", id, "--json"}, env).json()["job"];
  EXPECT_EQ(now["state"], "RUNNING") << now;
  EXPECT_EQ(now["start_time"], job["start_time"]);
  EXPECT_EQ(count(read_all(log), "hosting "), 1u) << "the agent itself was not restarted";
  // Again through the API (no --db: `up`'s admin token from the CLI config), as replicated HA state needs:
  // the scheduler issues and stores the key, the agent registers with it, the job still runs.
  const std::string db_key = read_all(dir + "/keys/" + node + ".key");
  auto via_api = run_cli(RAILYARD_BIN, {"node", "rotate-key", node, "--key-dir", dir + "/keys", "--grace", "0"}, env);
  ASSERT_EQ(via_api.code, 0) << via_api.err;
  EXPECT_TRUE(std::regex_match(read_all(dir + "/keys/" + node + ".key"), std::regex(node + " [0-9a-f]{64}\n")));
  ASSERT_NE(read_all(dir + "/keys/" + node + ".key"), db_key);
  const size_t before_api = count(read_all(log), "registered; heartbeat");
  ASSERT_EQ(::kill(agent_pid, SIGHUP), 0);
  for (int i = 0; i < 100 && count(read_all(log), "registered; heartbeat") <= before_api; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GT(count(read_all(log), "registered; heartbeat"), before_api) << read_all(log);
  EXPECT_EQ(run_cli(RAILYARD_BIN, {"show", id, "--json"}, env).json()["job"]["state"], "RUNNING");
  auto twice = run_cli(RAILYARD_BIN, {"node", "add", node}, env);
  EXPECT_NE(twice.code, 0);
  EXPECT_NE(twice.err.find("already has a key"), std::string::npos) << twice.err;
  auto nodes = run_cli(RAILYARD_BIN, {"nodes", "--json", "--state", "up"}, env);
  EXPECT_EQ(nodes.json()["nodes"].size(), 2u) << nodes.out;
  EXPECT_EQ(run_cli(RAILYARD_BIN, {"down", "--state-dir", dir}, env).code, 0);
}

}  // namespace
}  // namespace railyard::testing
