// Per-node credentials over real processes and sockets (issue 32; scheduler/PROTOCOL.md "Node keys"): the
// real railyard-scheduler with --node-keys on 127.0.0.1, keys issued and rotated by
// `railyard-scheduler node-key`, fake agents over real WebSockets. A node key speaks for its node only; a
// rotated key works during its grace and not after; running jobs are never restarted by a rotation.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "common/protocol/key_file.hpp"
#include "tests/agent_ws_client.hpp"
#include "tests/daemon_client.hpp"

namespace railyard::testing {
namespace {

const std::string kBin = RAILYARD_SCHEDULER_BIN;

class NodeKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("two.json")) << kTwoNodeCluster;
    std::filesystem::create_directories(dir_.file("keys"));
    token_ = create_token(kBin, db(), "alice", "admin");
    keys_ = node_key("issue", "");
  }
  std::string db() const { return dir_.file("state.db"); }
  std::unique_ptr<DaemonProcess> start() {
    return std::make_unique<DaemonProcess>(
        kBin, std::vector<std::string>{"--listen", "127.0.0.1:0", "--db", db(), "--cluster", dir_.file("two.json"),
                                       "--node-keys", "--web-root", "none"});
  }
  // `railyard-scheduler node-key VERB` for n1 and n2 (or `only`), into key files; returns every node's key.
  std::map<std::string, std::string> node_key(const std::string& verb, const std::string& extra,
                                              const std::string& only = "") {
    const std::vector<std::string> nodes = only.empty() ? std::vector<std::string>{"n1", "n2"}
                                                        : std::vector<std::string>{only};
    std::string cmd = kBin + " node-key " + verb + " --db " + db() + " --key-dir " + dir_.file("keys") + " " + extra;
    for (const auto& n : nodes) cmd += " --node " + n;
    run_capture(cmd + " 2>&1");
    std::vector<std::string> files;
    for (const auto& n : nodes) files.push_back(dir_.file("keys/" + n + ".key"));
    auto keys = protocol::read_key_files(files, nodes);
    EXPECT_TRUE(keys) << keys.error().message;
    std::map<std::string, std::string> all = keys_;
    if (keys) all.insert_or_assign(nodes.front(), keys->at(nodes.front()));
    if (keys && nodes.size() > 1) all.insert_or_assign(nodes[1], keys->at(nodes[1]));
    return all;
  }
  json job(HttpClient& c, int64_t id) { return c.request("GET", "/api/v1/jobs/" + std::to_string(id)).json(); }
  template <typename Pred>
  json wait_job(HttpClient& c, int64_t id, Pred pred) {
    json j;
    for (int i = 0; i < 200 && !pred(j = job(c, id)); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return j;
  }
  int64_t submit(HttpClient& c, int gpus) {
    const json spec = {{"name", "t"}, {"gpus", gpus}, {"launcher", "env"}, {"command", {"/bin/true"}}};
    return c.request("POST", "/api/v1/jobs", spec.dump(), token_).json().value("id", int64_t{0});
  }
  static json report(const std::string& type, const std::string& alloc, int64_t job, const std::string& node) {
    return {{"type", type}, {"v", 1}, {"alloc", alloc}, {"job", job}, {"node", node}};
  }

  TempDir dir_;
  std::string token_;
  std::map<std::string, std::string> keys_;
};

TEST_F(NodeKeysTest, AKeyRegistersOnlyItsOwnNodeAndAWrongKeyIsRefused) {
  auto d = start();
  FakeAgent a(d->port());
  EXPECT_EQ(a.register_with_keys({"n1"}, keys_)["type"], "registered");
  FakeAgent thief(d->port());
  json err = thief.register_with_keys({"n2"}, keys_, json::object(), {"n1"});
  EXPECT_EQ(err["type"], "error");
  EXPECT_EQ(err["code"], "unauthorized");
  EXPECT_EQ(err["message"], "bad MAC for node n2 from agent fake:1: not made with n2's key");
  EXPECT_TRUE(thief.read().is_null()) << "the connection is closed";
  FakeAgent wrong(d->port());
  auto stranger = keys_;
  stranger["n2"] = protocol::new_node_key();
  EXPECT_EQ(wrong.register_with_keys({"n2"}, stranger)["code"], "unauthorized");
  FakeAgent secret(d->port());
  EXPECT_EQ(secret.register_nodes({"n2"})["code"], "unauthorized") << "no cluster secret is configured";
  HttpClient c(d->port());
  EXPECT_EQ(c.request("GET", "/api/v1/nodes/n2").json()["connected"], false);
  EXPECT_EQ(c.request("GET", "/api/v1/nodes/n1").json()["connected"], true);
  EXPECT_NE(c.request("GET", "/metrics").body.find("railyard_agent_refused_total 3"), std::string::npos);
}

TEST_F(NodeKeysTest, ASessionCannotReportOrFinishAnotherNodesJob) {
  auto d = start();
  HttpClient c(d->port());
  FakeAgent a(d->port()), b(d->port());
  ASSERT_EQ(a.register_with_keys({"n1"}, keys_)["type"], "registered");
  ASSERT_EQ(b.register_with_keys({"n2"}, keys_)["type"], "registered");
  const int64_t id = submit(c, 8);
  ASSERT_GT(id, 0);
  const std::string victim = wait_job(c, id, [](const json& j) { return j.value("nodes", json::array()).size() == 1; })["nodes"][0];
  FakeAgent& owner = victim == "n1" ? a : b;
  FakeAgent& other = victim == "n1" ? b : a;
  const std::string attacker = victim == "n1" ? "n2" : "n1", alloc = std::to_string(id) + ".1";
  ASSERT_FALSE(owner.expect("launch").is_null());
  owner.send(report("launched", alloc, id, victim));
  ASSERT_EQ(wait_job(c, id, [](const json& j) { return j["state"] == "RUNNING"; })["state"], "RUNNING");
  // In the victim's name: refused.
  json forged = report("alloc_finished", alloc, id, victim);
  forged.update({{"state", "failed"}, {"exit_code", 9}, {"seq", 41}});
  other.send(forged);
  json refused = other.expect("error");
  EXPECT_EQ(refused["code"], "bad_message");
  EXPECT_NE(refused.value("message", "").find("not registered on this connection"), std::string::npos) << refused;
  // In its own name, about the victim's allocation: acknowledged as a stale report, changes nothing.
  forged["node"] = attacker;
  forged["seq"] = 42;
  other.send(forged);
  EXPECT_EQ(other.expect("ack")["seq"], 42);
  json after = job(c, id);
  EXPECT_EQ(after["state"], "RUNNING");
  const auto runs = c.request("GET", "/api/v1/jobs/" + std::to_string(id) + "/runs").json()["runs"];
  EXPECT_EQ(runs.size(), 1u) << runs;
  // The owner's report still counts.
  json done = report("alloc_finished", alloc, id, victim);
  done.update({{"state", "completed"}, {"exit_code", 0}, {"seq", 1}});
  owner.send(done);
  EXPECT_EQ(owner.expect("ack")["seq"], 1);
  EXPECT_EQ(wait_job(c, id, [](const json& j) { return j["state"] == "COMPLETED"; })["state"], "COMPLETED");
}

TEST_F(NodeKeysTest, ARotatedKeyWorksDuringItsGraceNotAfterAndTheJobKeepsRunning) {
  auto d = start();
  HttpClient c(d->port());
  const auto old = keys_;
  auto first = std::make_unique<FakeAgent>(d->port());
  ASSERT_EQ(first->register_with_keys({"n1", "n2"}, old)["type"], "registered");
  const int64_t id = submit(c, 16);
  const std::string alloc = std::to_string(id) + ".1";
  ASSERT_FALSE(first->expect("launch").is_null());
  for (const auto& n : {"n1", "n2"}) first->send(report("launched", alloc, id, n));
  const json started = wait_job(c, id, [](const json& j) { return j["state"] == "RUNNING"; });
  ASSERT_EQ(started["state"], "RUNNING");
  const json running = {{"n1", {{{"alloc", alloc}, {"job", id}}}}, {"n2", {{{"alloc", alloc}, {"job", id}}}}};
  const auto fresh = node_key("rotate", "--grace 3", "n1");
  ASSERT_NE(fresh.at("n1"), old.at("n1"));
  // During the grace: the old key registers n1 again (an agent reconnecting before it read its new file).
  FakeAgent during(d->port());
  json reg = during.register_with_keys({"n1", "n2"}, old, running);
  ASSERT_EQ(reg["type"], "registered") << reg;
  EXPECT_TRUE(reg["kill"].empty());
  // After it: refused.
  std::this_thread::sleep_for(std::chrono::milliseconds(4200));
  FakeAgent late(d->port());
  json no = late.register_with_keys({"n1"}, old, running);
  EXPECT_EQ(no["code"], "unauthorized");
  EXPECT_NE(no.value("message", "").find("grace has ended"), std::string::npos) << no;
  // The new key works; the job was never restarted (same run, same start, no launch order).
  FakeAgent renewed(d->port());
  reg = renewed.register_with_keys({"n1", "n2"}, fresh, running);
  ASSERT_EQ(reg["type"], "registered") << reg;
  EXPECT_TRUE(reg["kill"].empty());
  json now = job(c, id);
  EXPECT_EQ(now["state"], "RUNNING");
  EXPECT_EQ(now["start_time"], started["start_time"]);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs/" + std::to_string(id) + "/runs").json()["runs"].size(), 1u);
  renewed.send({{"type", "heartbeat"}, {"v", 1}, {"nodes", {"n1", "n2"}}, {"time", 0}});
  EXPECT_TRUE(renewed.read(std::chrono::seconds(1)).is_null()) << "no launch or kill follows";
}

}  // namespace
}  // namespace railyard::testing
