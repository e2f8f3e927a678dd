// Session against a fake transport: JSON frames in, JSON frames out, real short processes underneath.
#include "agent/session/session.hpp"

#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "agent/session/health.hpp"
#include "agent/session/protocol.hpp"
#include "agent/tests/test_util.hpp"
#include "common/protocol/key_file.hpp"
#include "jobs/spec_json.hpp"

namespace railyard::agent {
namespace {

using nlohmann::json;
using testing::TempDir;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kSecret = "s3cret";

json spec(std::vector<std::string> command, jobs::Launcher launcher = jobs::Launcher::kEnv) {
  jobs::JobSpec s;
  s.name = "t";
  s.user = "root";
  s.gpus = 2;
  s.launcher = launcher;
  s.command = std::move(command);
  return jobs::to_json(s);
}

json launch(const std::string& alloc, const std::string& node, json job_spec, int node_rank = 0,
            json nodes = json()) {
  if (nodes.is_null()) nodes = json::array({{{"name", node}, {"gpus", {0, 1}}}});
  return {{"type", "launch"},
          {"v", 1},
          {"alloc", alloc},
          {"job", job_of_alloc(alloc)},
          {"node", node},
          {"node_rank", node_rank},
          {"nodes", nodes},
          {"spec", job_spec},
          {"master_addr", "127.0.0.1"},
          {"master_port", 29500},
          {"time_limit_s", 60}};
}

constexpr const char* kChallenge = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

// A Session on a fake connection: `sent` holds every frame it wrote, parsed. It plays the scheduler as
// PROTOCOL.md says: after the agent's register, everything it feeds is sealed with the session key of the
// cluster secret (or of `key` when the agent was given key files), as AgentHub::send does.
class Harness {
 public:
  explicit Harness(const std::filesystem::path& dir, std::vector<std::string> nodes = {"n0", "n1"},
                   std::vector<std::string> key_files = {}, std::string key = kSecret)
      : key_(std::move(key)) {
    SessionOptions o;
    o.agent_id = "test:1";
    o.secret = key_files.empty() ? kSecret : "";
    o.key_files = std::move(key_files);
    o.scheduler_url = "http://127.0.0.1:1";
    o.state_dir = dir;
    o.nodes = std::move(nodes);
    o.emulate = "dgx-h100";
    o.allow_root_jobs = true;
    o.grace = 1s;
    o.metrics_interval = 0ms;
    o.health.min_free_bytes = 0;
    o.log = [](const std::string&) {};
    auto s = Session::create(o);
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    session = std::move(*s);
    session->connected([this](const std::string& text) { sent.push_back(json::parse(text)); });
  }

  // Sealed once the agent registered on this connection; a hello starts a new session.
  void feed(const json& msg) {
    if (msg.value("type", "") == "hello") {
      sealer.reset();
      session->receive(msg.dump());
      if (!sent.empty() && sent.back()["type"] == "register")
        sealer.emplace(protocol::session_key(key_, msg.value("challenge", ""),
                                             sent.back().value("agent_challenge", ""), "test:1"));
      return;
    }
    session->receive(sealer ? sealer->seal(msg.dump()) : msg.dump());
  }
  // As an impostor would: the frame as given.
  void feed_raw(const std::string& text) { session->receive(text); }

  json register_with(const std::string& challenge = std::string(64, 'a')) {
    feed({{"type", "hello"}, {"v", 1}, {"challenge", challenge}, {"server", "test"}});
    json reg = sent.back();
    feed({{"type", "registered"}, {"v", 1}, {"heartbeat_s", 1}, {"nodes", {"n0", "n1"}}});
    return reg;
  }

  // Ticks until a frame of `type` (matching `alloc` when given) arrives; returns it, or null after 15 s.
  json wait_for(const std::string& type, const std::string& alloc = "") {
    for (auto until = std::chrono::steady_clock::now() + 15s; std::chrono::steady_clock::now() < until;) {
      for (; seen_ < sent.size(); ++seen_) {
        const json& m = sent[seen_];
        if (m["type"] == type && (alloc.empty() || m.value("alloc", "") == alloc)) return sent[seen_++];
      }
      session->tick(Session::Clock::now());
      std::this_thread::sleep_for(10ms);
    }
    return nullptr;
  }

  std::vector<json> of_type(const std::string& type) const {
    std::vector<json> out;
    for (const auto& m : sent)
      if (m["type"] == type) out.push_back(m);
    return out;
  }

  std::unique_ptr<Session> session;
  std::vector<json> sent;
  std::optional<protocol::OrderSealer> sealer;

 private:
  std::string key_;
  size_t seen_ = 0;
};

TEST(AgentProtocol, HmacMatchesRfc4231) {
  EXPECT_EQ(hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(exec_token("k", "12.1"), hmac_sha256_hex("k", "exec\n12.1"));
  EXPECT_EQ(register_mac("k", "c", "a:1", {"n0", "n1"}), hmac_sha256_hex("k", "c\na:1\nn0,n1"));
}

TEST(AgentProtocol, JobOfAlloc) {
  EXPECT_EQ(job_of_alloc("12.3"), 12);
  EXPECT_EQ(job_of_alloc("7"), 7);
  EXPECT_EQ(job_of_alloc("x.1"), 0);
}

TEST(AgentProtocol, ParseLaunchNamesTheProblem) {
  auto ok = parse_launch(launch("3.1", "n0", spec({"true"})));
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->job_id, 3);
  EXPECT_EQ(ok->local().gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(ok->time_limit, std::chrono::milliseconds(60000));
  json bad = launch("3.1", "n0", spec({"true"}));
  bad.erase("nodes");
  auto err = parse_launch(bad);
  ASSERT_FALSE(err);
  EXPECT_NE(err.error().message.find("nodes"), std::string::npos);
  json wrong_node = launch("3.1", "n0", spec({"true"}));
  wrong_node["node"] = "n9";
  EXPECT_FALSE(parse_launch(wrong_node));
}

TEST(AgentProtocol, FinishedStoreKeepsReportsUntilAcked) {
  TempDir dir;
  std::int64_t seq = 0;
  {
    FinishedStore store(dir.path());
    seq = store.add({{"alloc", "1.1"}})["seq"];
    store.add({{"alloc", "2.1"}});
    store.ack(seq);
  }
  FinishedStore again(dir.path());
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again.pending()[0]["alloc"], "2.1");
  EXPECT_GT(again.add({{"alloc", "3.1"}})["seq"].get<std::int64_t>(),
            again.pending()[0]["seq"].get<std::int64_t>());
}

// An agent from before the journal left one file per report in <state>/finished: they are still resent.
TEST(AgentProtocol, FinishedStoreTakesOverReportFilesOfAnOlderAgent) {
  TempDir dir;
  const auto old_dir = dir.path() / "finished";
  std::filesystem::create_directories(old_dir);
  const std::int64_t far = 9'000'000'000'000'000;  // above any start time in microseconds
  testing::write_file(old_dir / (std::to_string(far) + ".json"), json{{"alloc", "4.1"}, {"seq", far}}.dump());
  testing::write_file(old_dir / "5.tmp", "{\"alloc\"");  // an interrupted write
  testing::write_file(old_dir / "6.json", "{not json");
  {
    FinishedStore store(dir.path());
    ASSERT_EQ(store.size(), 1u);
    EXPECT_EQ(store.pending()[0]["alloc"], "4.1");
    EXPECT_EQ(store.add({{"alloc", "7.1"}})["seq"], far + 1);  // numbering goes on above the old reports
  }
  EXPECT_FALSE(std::filesystem::exists(old_dir));
  FinishedStore again(dir.path());
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again.pending()[0]["seq"], far);
  EXPECT_EQ(again.pending()[1]["alloc"], "7.1");
}

TEST(AgentSession, RegistersWithInventoryAndMacThenHeartbeats) {
  TempDir dir;
  Harness h(dir.path());
  json reg = h.register_with(kChallenge);
  EXPECT_EQ(reg["type"], "register");
  EXPECT_EQ(reg["agent"], "test:1");
  EXPECT_EQ(reg["mac"], register_mac(kSecret, kChallenge, "test:1", {"n0", "n1"}));
  EXPECT_TRUE(protocol::valid_challenge(reg.value("agent_challenge", "")));
  EXPECT_EQ(reg["nodes"][0]["runs_as"]["uid"], ::geteuid());
  EXPECT_EQ(reg["nodes"][0]["runs_as"]["switch_users"], ::geteuid() == 0);
  ASSERT_EQ(reg["nodes"].size(), 2u);
  EXPECT_EQ(reg["nodes"][1]["name"], "n1");
  EXPECT_EQ(reg["nodes"][0]["inventory"]["gpus"], 8);
  EXPECT_EQ(reg["nodes"][0]["inventory"]["source"], "emulated");
  EXPECT_EQ(reg["nodes"][0]["inventory"]["hcas"].size(), 8u);
  EXPECT_TRUE(reg["nodes"][0]["running"].empty());
  EXPECT_TRUE(reg["finished"].empty());
  EXPECT_TRUE(h.session->registered());
  json hb = h.wait_for("heartbeat");
  ASSERT_FALSE(hb.is_null());
  EXPECT_EQ(hb["nodes"], json({"n0", "n1"}));
}

TEST(AgentSession, RefusesOrdersBeforeRegistrationAndBadFrames) {
  TempDir dir;
  Harness h(dir.path());
  h.feed(launch("1.1", "n0", spec({"true"})));
  EXPECT_EQ(h.sent.back()["code"], "not_registered");
  h.session->receive("[1,2]");
  EXPECT_EQ(h.sent.back()["code"], "bad_message");
  h.register_with();
  h.feed({{"type", "dance"}, {"v", 1}});
  EXPECT_EQ(h.sent.back()["code"], "unknown_type");
  h.feed({{"type", "kill"}, {"v", 1}});  // no alloc
  EXPECT_EQ(h.sent.back()["code"], "bad_message");
  EXPECT_EQ(h.session->allocations(), 0u);
}

// Mutual authentication (issue 44): after registration an order must be sealed with this connection's
// session key and a counter above every one seen; anything else is refused, logged and never executed.
TEST(AgentSession, OrdersNotSealedWithTheSessionKeyAreRefused) {
  TempDir dir;
  Harness h(dir.path());
  h.register_with();
  ASSERT_TRUE(h.session->registered());
  const std::string marker = (dir.path() / "ran").string();
  const json order = launch("3.1", "n0", spec({"sh", "-c", "touch " + marker}));

  h.feed_raw(order.dump());  // no MAC at all, as an impostor sends it
  EXPECT_EQ(h.sent.back()["code"], "unauthorized");
  EXPECT_NE(h.sent.back()["message"].get<std::string>().find("no MAC"), std::string::npos);
  protocol::OrderSealer wrong(protocol::session_key("not-the-secret", std::string(64, 'a'), "x", "test:1"));
  h.feed_raw(wrong.seal(order.dump()));
  EXPECT_NE(h.sent.back()["message"].get<std::string>().find("bad MAC"), std::string::npos);
  h.feed_raw(wrong.seal(json{{"type", "exec"}, {"v", 1}, {"req", "r"}, {"alloc", "3.1"}, {"node", "n0"},
                             {"argv", {"touch", marker}}}.dump()));
  EXPECT_EQ(h.sent.back()["code"], "unauthorized");
  EXPECT_EQ(h.session->unverified_refused(), 3);
  EXPECT_EQ(h.session->allocations(), 0u);
  EXPECT_TRUE(h.of_type("launched").empty());

  // A sealed order runs once: the same frame again (a replay) and an older one (reordered) are refused.
  const std::string first = h.sealer->seal(launch("4.1", "n0", spec({"sleep", "30"})).dump());
  const std::string second = h.sealer->seal(launch("5.1", "n1", spec({"sleep", "30"}), 0,
                                                   json::array({{{"name", "n1"}, {"gpus", {0, 1}}}}))
                                                .dump());
  h.feed_raw(second);
  ASSERT_FALSE(h.wait_for("launched", "5.1").is_null());
  h.feed_raw(first);
  EXPECT_NE(h.sent.back()["message"].get<std::string>().find("replayed or out of order"), std::string::npos);
  h.feed_raw(second);
  EXPECT_EQ(h.sent.back()["code"], "unauthorized");
  EXPECT_EQ(h.session->allocations(), 1u);
  EXPECT_EQ(h.session->unverified_refused(), 5);
  EXPECT_FALSE(std::filesystem::exists(marker));
  h.session->cancel_all("test over");
  for (int i = 0; i < 300 && h.session->allocations() > 0; ++i) {
    h.session->tick(Session::Clock::now());
    std::this_thread::sleep_for(10ms);
  }
}

// A `registered` that this connection's key did not seal leaves the agent unregistered (so every order is
// refused), and so does one before any hello; a hello whose challenge is not 64 hex digits gets no register.
TEST(AgentSession, UnverifiedRegisteredLeavesTheAgentUnregistered) {
  TempDir dir;
  Harness h(dir.path());
  const json registered = {{"type", "registered"}, {"v", 1}, {"heartbeat_s", 1}, {"nodes", {"n0", "n1"}}};
  h.feed_raw(registered.dump());
  EXPECT_FALSE(h.session->registered());
  h.feed({{"type", "hello"}, {"v", 1}, {"challenge", "session\nx"}, {"server", "impostor"}});
  EXPECT_EQ(h.sent.back()["code"], "bad_message");
  EXPECT_FALSE(h.sealer);
  h.feed({{"type", "hello"}, {"v", 1}, {"challenge", kChallenge}, {"server", "impostor"}});
  ASSERT_EQ(h.sent.back()["type"], "register");
  h.feed_raw(registered.dump());
  EXPECT_FALSE(h.session->registered());
  protocol::OrderSealer guess(protocol::session_key(kSecret, kChallenge, "", "test:1"));  // without our challenge
  h.feed_raw(guess.seal(registered.dump()));
  EXPECT_FALSE(h.session->registered());
  h.feed_raw(guess.seal(launch("1.1", "n0", spec({"true"})).dump()));
  EXPECT_EQ(h.sent.back()["code"], "not_registered");
  EXPECT_EQ(h.session->allocations(), 0u);
  h.feed(registered);  // sealed with the session key
  EXPECT_TRUE(h.session->registered());
}

// With node keys the session key comes from the key of the first node of `registered.nodes` the agent hosts.
TEST(AgentSession, NodeKeysSealWithTheFirstAcceptedNodesKey) {
  TempDir dir;
  const std::string k0(64, '0'), k1(64, '1');
  const auto keys = dir.path() / "node.keys";
  testing::write_file(keys, protocol::key_file_line("n0", k0) + protocol::key_file_line("n1", k1));
  std::filesystem::permissions(keys, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  Harness h(dir.path() / "agent", {"n0", "n1"}, {keys.string()}, k1);
  h.feed({{"type", "hello"}, {"v", 1}, {"challenge", kChallenge}});
  const json reg = h.sent.back();
  EXPECT_EQ(reg["nodes"][1]["mac"], protocol::node_mac(k1, kChallenge, "test:1", "n1"));
  const json with_n0_first = {{"type", "registered"}, {"v", 1}, {"nodes", {"n0", "n1"}}};
  h.feed(with_n0_first);  // sealed with n1's key, but n0 comes first
  EXPECT_FALSE(h.session->registered());
  h.feed({{"type", "registered"}, {"v", 1}, {"nodes", {"n9", "n1"}}, {"rejected", {{{"name", "n0"}, {"reason", "x"}}}}});
  EXPECT_TRUE(h.session->registered());
}

TEST(AgentSession, EnvJobRunsReportsMetricsAndFinishesReliably) {
  TempDir dir;
  Harness h(dir.path());
  h.register_with();
  const std::string script =
      "if [ \"$RANK\" = 0 ]; then "
      "echo ':::MLLOG {\"time_ms\": 1000, \"event_type\": \"INTERVAL_START\", \"key\": \"run_start\", "
      "\"value\": null, \"metadata\": {}}'; "
      "echo ':::MLLOG {broken'; "
      "echo ':::MLLOG {\"time_ms\": 3500, \"event_type\": \"INTERVAL_END\", \"key\": \"run_stop\", "
      "\"value\": null, \"metadata\": {\"status\": \"success\"}}'; "
      "echo \"token=$RAILYARD_EXEC_TOKEN url=$RAILYARD_URL\"; fi";
  h.feed(launch("5.1", "n0", spec({"sh", "-c", script})));
  json launched = h.wait_for("launched", "5.1");
  ASSERT_FALSE(launched.is_null());
  EXPECT_EQ(launched["ranks"].size(), 2u);
  EXPECT_EQ(launched["node"], "n0");
  json done = h.wait_for("alloc_finished", "5.1");
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(done["state"], "completed");
  EXPECT_EQ(done["exit_code"], 0);
  json events = json::array();
  int malformed = 0;
  for (const auto& m : h.of_type("metrics")) {
    for (const auto& e : m["events"]) events.push_back(e);
    malformed = std::max(malformed, m["malformed"].get<int>());
  }
  // The broken line is counted and said (an "mllog" note naming its line), in the order it was read.
  ASSERT_EQ(events.size(), 4u) << events.dump();
  EXPECT_EQ(events[0]["key"], "run_start");
  EXPECT_EQ(events[0]["t"], 1.0);
  EXPECT_EQ(events[1]["key"], "mllog");
  EXPECT_NE(events[1].value("what", "").find("line 2"), std::string::npos) << events[1].dump();
  EXPECT_EQ(events[2]["key"], "run_stop");
  EXPECT_EQ(events[3]["key"], "time_to_train");
  EXPECT_EQ(events[3]["value"], 2.5);
  EXPECT_EQ(malformed, 1);

  // Kept until acknowledged, and across a restart of the agent.
  EXPECT_EQ(h.session->unacknowledged(), 1u);
  h.session.reset();
  Harness again(dir.path());
  json reg = again.register_with();
  ASSERT_EQ(reg["finished"].size(), 1u);
  EXPECT_EQ(reg["finished"][0]["seq"], done["seq"]);
  again.feed({{"type", "ack"}, {"v", 1}, {"seq", done["seq"]}});
  EXPECT_EQ(again.session->unacknowledged(), 0u);

  // Logs come back in chunks; the workers had RAILYARD_URL and the allocation's exec token.
  again.feed({{"type", "logs"},
              {"v", 1},
              {"req", 7},
              {"alloc", "5.1"},
              {"node", "n0"},
              {"rank", 0},
              {"stream", "out"},
              {"offset", 0},
              {"max_bytes", 65536}});
  json chunk = again.sent.back();
  ASSERT_EQ(chunk["type"], "log_chunk");
  const std::string data = chunk["data"];
  EXPECT_NE(data.find("token=" + exec_token(kSecret, "5.1") + " url=http://127.0.0.1:1"), std::string::npos);
  EXPECT_EQ(chunk["size"], data.size());
  again.feed({{"type", "logs"},
              {"v", 1},
              {"req", 8},
              {"alloc", "5.1"},
              {"node", "n0"},
              {"rank", 0},
              {"stream", "out"},
              {"offset", 4},
              {"max_bytes", 10}});
  EXPECT_EQ(again.sent.back()["data"], data.substr(4, 10));
  EXPECT_EQ(again.sent.back()["next_offset"], 14);
  again.feed({{"type", "logs"},
              {"v", 1},
              {"req", 9},
              {"alloc", "5.1"},
              {"node", "n0"},
              {"rank", 5},
              {"stream", "err"},
              {"offset", 0},
              {"max_bytes", 10}});
  EXPECT_TRUE(again.sent.back().contains("error"));
}

TEST(AgentSession, FailingRankFailsTheAllocationWithItsCode) {
  TempDir dir;
  Harness h(dir.path());
  h.register_with();
  h.feed(launch("6.1", "n1", spec({"sh", "-c", "if [ $LOCAL_RANK = 1 ]; then exit 3; fi; sleep 30"}), 0,
                json::array({{{"name", "n1"}, {"gpus", {0, 1}}}})));
  json done = h.wait_for("alloc_finished", "6.1");
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(done["state"], "failed");
  EXPECT_EQ(done["exit_code"], 3);
  EXPECT_EQ(done["node"], "n1");
  EXPECT_NE(done["message"].get<std::string>().find("exited with code 3"), std::string::npos);
}

TEST(AgentSession, KillCancelsAndUnknownKillIsAnsweredAtOnce) {
  TempDir dir;
  Harness h(dir.path());
  h.register_with();
  h.feed(launch("7.1", "n0", spec({"sleep", "30"})));
  ASSERT_FALSE(h.wait_for("launched", "7.1").is_null());
  h.feed({{"type", "kill"}, {"v", 1}, {"alloc", "7.1"}, {"node", "n0"}, {"reason", "cancelled by alice"}});
  json done = h.wait_for("alloc_finished", "7.1");
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(done["state"], "cancelled");
  EXPECT_EQ(done["message"], "killed: cancelled by alice");
  h.feed({{"type", "kill"}, {"v", 1}, {"alloc", "8.1"}, {"node", "n0"}, {"reason", "x"}});
  EXPECT_EQ(h.sent.back()["type"], "alloc_finished");
  EXPECT_EQ(h.sent.back()["job"], 8);
  EXPECT_EQ(h.sent.back()["state"], "cancelled");
}

// Epoch fencing (issue 30): once an order of epoch 7 came, a deposed leader's (epoch 5) launch, kill and hello
// are refused and change nothing; the epoch survives a restart of the agent.
TEST(AgentSession, OrdersFromAnOlderEpochAreRefused) {
  TempDir dir;
  {
    Harness h(dir.path());
    h.feed({{"type", "hello"}, {"v", 1}, {"epoch", 5}, {"challenge", std::string(64, 'a')}, {"server", "test"}});
    h.feed({{"type", "registered"}, {"v", 1}, {"epoch", 5}, {"heartbeat_s", 1}, {"nodes", {"n0", "n1"}}});
    ASSERT_TRUE(h.session->registered());
    json order = launch("7.1", "n0", spec({"sleep", "30"}));
    order["epoch"] = 7;  // the new leader
    h.feed(order);
    ASSERT_FALSE(h.wait_for("launched", "7.1").is_null());
    EXPECT_EQ(h.session->epoch(), 7);
    json stale_kill = {{"type", "kill"}, {"v", 1}, {"epoch", 5}, {"alloc", "7.1"}, {"node", "n0"}, {"reason", "old"}};
    h.feed(stale_kill);
    EXPECT_EQ(h.sent.back()["type"], "error");
    EXPECT_EQ(h.sent.back()["code"], "stale_epoch");
    json stale_launch = launch("8.1", "n1", spec({"sleep", "30"}));
    stale_launch["epoch"] = 6;
    h.feed(stale_launch);
    EXPECT_EQ(h.sent.back()["code"], "stale_epoch");
    EXPECT_EQ(h.session->stale_refused(), 2);
    EXPECT_EQ(h.session->allocations(), 1u);  // 7.1 still runs; 8.1 never started
    h.session->disconnected();
    h.session->connected([&h](const std::string& text) { h.sent.push_back(json::parse(text)); });
    h.feed({{"type", "hello"}, {"v", 1}, {"epoch", 5}, {"challenge", std::string(64, 'b')}, {"server", "old"}});
    EXPECT_TRUE(h.session->stale_leader());
    EXPECT_NE(h.sent.back()["type"], "register");
    h.session->cancel_all("test over");
    for (int i = 0; i < 300 && h.session->allocations() > 0; ++i) {
      h.session->tick(Session::Clock::now());
      std::this_thread::sleep_for(10ms);
    }
  }
  Harness again(dir.path());
  EXPECT_EQ(again.session->epoch(), 7);
  json stale = launch("9.1", "n0", spec({"true"}));
  stale["epoch"] = 6;
  again.register_with();  // no epoch: a scheduler without HA is not fenced
  again.feed(stale);
  EXPECT_EQ(again.sent.back()["code"], "stale_epoch");
}

TEST(AgentSession, LaunchFailuresAreReported) {
  TempDir dir;
  Harness h(dir.path());
  h.register_with();
  h.feed(launch("9.1", "n7", spec({"true"}), 0, json::array({{{"name", "n7"}, {"gpus", {0}}}})));
  EXPECT_EQ(h.sent.back()["type"], "launch_failed");
  EXPECT_NE(h.sent.back()["message"].get<std::string>().find("not hosted"), std::string::npos);
  h.feed(launch("9.2", "n0", spec({"/nonexistent/program"})));
  EXPECT_EQ(h.sent.back()["type"], "launch_failed");
  EXPECT_EQ(h.sent.back()["alloc"], "9.2");
}

TEST(AgentSession, RestartedAgentReportsRunningWorkersAndFencingKillsThem) {
  TempDir dir;
  {
    Harness h(dir.path());
    h.register_with();
    h.feed(launch("10.1", "n0", spec({"sleep", "30"})));
    ASSERT_FALSE(h.wait_for("launched", "10.1").is_null());
  }  // the agent goes; its workers stay
  Harness h(dir.path());
  EXPECT_EQ(h.session->allocations(), 1u);
  h.feed({{"type", "hello"}, {"v", 1}, {"challenge", kChallenge}});
  json running = h.sent.back()["nodes"][0]["running"];
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0]["alloc"], "10.1");
  EXPECT_EQ(running[0]["pids"].size(), 2u);
  h.feed({{"type", "registered"},
          {"v", 1},
          {"heartbeat_s", 5},
          {"nodes", {"n0", "n1"}},
          {"kill", {{{"alloc", "10.1"}, {"node", "n0"}, {"reason", "fenced: job 10 runs as 10.2"}}}}});
  json done = h.wait_for("alloc_finished", "10.1");
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(done["state"], "cancelled");
  for (const auto& pid : running[0]["pids"]) EXPECT_NE(kill(pid.get<pid_t>(), 0), 0);
}

TEST(AgentSession, MpiLaterNodeHoldsTheAllocationAndRunsExecOrders) {
  TempDir dir;
  Harness h(dir.path());
  h.register_with();
  const json nodes = json::array({{{"name", "n0"}, {"gpus", {0, 1}}}, {{"name", "n1"}, {"gpus", {2, 3}}}});
  h.feed(launch("11.1", "n1", spec({"true"}, jobs::Launcher::kMpi), 1, nodes));
  json launched = h.sent.back();
  EXPECT_EQ(launched["type"], "launched");
  EXPECT_TRUE(launched["ranks"].empty());
  const auto out = dir.path() / "exec.out";
  h.feed({{"type", "exec"},
          {"v", 1},
          {"req", "r1"},
          {"alloc", "11.1"},
          {"node", "n1"},
          {"argv",
           {"echo", "$RAILYARD_NODE:$CUDA_VISIBLE_DEVICES:${OMPI_MCA_btl_vader_backing_directory##*/}", ">",
            out.string(), ";", "sleep", "30"}}});
  json started = h.sent.back();
  ASSERT_EQ(started["type"], "exec_started") << started.dump();
  EXPECT_EQ(started["req"], "r1");
  const pid_t pid = started["pid"];
  for (int i = 0; i < 200 && testing::read_file(out).empty(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(testing::read_file(out), "n1:2,3:11.1\n");
  h.feed({{"type", "exec"}, {"v", 1}, {"req", "r2"}, {"alloc", "99.1"}, {"node", "n1"}, {"argv", {"true"}}});
  EXPECT_EQ(h.sent.back()["type"], "exec_failed");
  for (int i = 0; i < 20; ++i) h.session->tick(Session::Clock::now());
  EXPECT_TRUE(h.of_type("alloc_finished").empty());  // held: only a kill ends it
  h.feed({{"type", "kill"}, {"v", 1}, {"alloc", "11.1"}, {"node", "n1"}, {"reason", "node 0 finished"}});
  json done = h.wait_for("alloc_finished", "11.1");
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(done["state"], "cancelled");
  EXPECT_NE(kill(pid, 0), 0);
}

// A restarted agent adopts a held mpi node from its record, which keeps the job's user and GPUs: a later
// remote launch runs as that user with those GPUs (not as root with none). A record that lost its user (an
// older agent's) takes no remote launch at all.
TEST(AgentSession, AdoptedAllocationRunsExecOrdersAsItsUserWithItsGpusOrNotAtAll) {
  TempDir dir;
  const struct passwd* nobody = getpwnam("nobody");
  const bool as_nobody = geteuid() == 0 && nobody != nullptr;
  if (as_nobody) fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  const uid_t uid = as_nobody ? nobody->pw_uid : geteuid();
  json job = spec({"true"}, jobs::Launcher::kMpi);
  job["user"] = as_nobody ? "nobody" : "";
  const json nodes = json::array({{{"name", "n0"}, {"gpus", {0, 1}}}, {{"name", "n1"}, {"gpus", {2, 3}}}});
  auto exec = [](const std::string& req, const std::string& command) {
    return json{{"type", "exec"}, {"v", 1}, {"req", req}, {"alloc", "12.1"}, {"node", "n1"}, {"argv", {command}}};
  };
  {
    Harness h(dir.path());
    h.register_with();
    h.feed(launch("12.1", "n1", job, 1, nodes));
    h.feed(exec("r1", "sleep 30"));  // keeps the allocation alive across the restart
    ASSERT_EQ(h.sent.back()["type"], "exec_started") << h.sent.back().dump();
  }
  const fs::path check = dir.path() / "nodes" / "n1" / "jobs" / "12" / "12.1" / "who";
  {
    Harness h(dir.path());
    ASSERT_EQ(h.session->allocations(), 1u);
    h.register_with();
    h.feed(exec("r2", "echo $(id -u):$CUDA_VISIBLE_DEVICES > who"));
    ASSERT_EQ(h.sent.back()["type"], "exec_started") << h.sent.back().dump();
    for (int i = 0; i < 200 && testing::read_file(check).empty(); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(testing::read_file(check), std::to_string(uid) + ":2,3\n");
  }
  // An older agent's record: no user.
  const fs::path journal = dir.path() / "nodes" / "n1" / "allocs.journal";
  std::string text = testing::read_file(journal);
  for (size_t at; (at = text.find("\"user\":")) != std::string::npos;) text.replace(at, 7, "\"owner\":");
  testing::write_file(journal, text);
  Harness h(dir.path());
  h.register_with();
  h.feed(exec("r3", "touch ran-without-user"));
  EXPECT_EQ(h.sent.back()["type"], "exec_failed") << h.sent.back().dump();
  EXPECT_NE(h.sent.back().dump().find("does not record its user"), std::string::npos) << h.sent.back().dump();
  EXPECT_FALSE(fs::exists(check.parent_path() / "ran-without-user"));
  h.session->cancel_all("test over");
  EXPECT_FALSE(h.wait_for("alloc_finished", "12.1").is_null());
}

TEST(AgentHealth, GpuCountDiskAndScript) {
  TempDir dir;
  auto inv = emulated_inventory("dgx-h100", "n0");
  ASSERT_TRUE(inv);
  EXPECT_TRUE(check_node(*inv, dir.path(), 0).ok);
  EXPECT_NE(check_node(*inv, dir.path(), 1LL << 62).reason.find("disk:"), std::string::npos);
  Inventory seven = *inv;
  seven.gpu_count = 7;
  EXPECT_EQ(check_node(seven, dir.path(), 0).reason, "gpus: 7 found, profile dgx-h100 has 8");

  const auto script = dir.path() / "check.sh";
  testing::write_file(script, "#!/bin/sh\necho \"fan broken on $1\"\nexit 4\n");
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  HealthChecker checker({0, script.string(), 10s, 5s}, *inv, dir.path());
  std::optional<HealthStatus> status;
  for (int i = 0; i < 500 && !status; ++i) {
    status = checker.poll(HealthChecker::Clock::now());
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(status);
  EXPECT_FALSE(status->ok);
  EXPECT_EQ(status->reason, "health script: exit 4: fan broken on n0");
}

}  // namespace
}  // namespace railyard::agent
