// Per-node credentials in the AgentHub (issue 32; scheduler/PROTOCOL.md "Node keys"): a node's key speaks
// only for that node. Real store and hub, fake peers (agent_hub_harness.hpp); the same rules over real
// processes and sockets are in node_keys_test.cpp.
#include "common/protocol/key_file.hpp"
#include "tests/agent_hub_harness.hpp"

namespace railyard::daemon::hub_test {
namespace {

constexpr const char* kAgent = "keyed:1";

// A harness that takes node keys only (no cluster secret), with a key issued for n1 and n2.
struct Keyed {
  explicit Keyed(const testing::TempDir& dir) : h(dir, "", true) {
    for (const char* n : {"n1", "n2"}) issue(n, protocol::new_node_key());
  }
  void issue(const std::string& node, const std::string& key) {
    keys[node] = key;
    ASSERT_TRUE(h.service->store().put_node_key({node, key, h.now, std::nullopt, "", std::nullopt}));
  }
  // Rotates `node` to a new key; the old one works for `grace` seconds.
  void rotate(const std::string& node, int64_t grace) {
    const std::string old = keys[node], fresh = protocol::new_node_key();
    keys[node] = fresh;
    ASSERT_TRUE(h.service->store().put_node_key({node, fresh, h.now, h.now, old, h.now + grace}));
  }
  // Registers `nodes`, each with a MAC made with keys[signer[i]] (default: its own key).
  std::shared_ptr<FakePeer> connect(const std::vector<std::string>& nodes, std::vector<std::string> signers = {},
                                    json running = json::object(), json finished = json::array()) {
    if (signers.empty()) signers = nodes;
    auto p = std::make_shared<FakePeer>();
    h.hub->on_open(p);
    const std::string challenge = p->sent.at(0).at("challenge");
    json ns = json::array();
    for (size_t i = 0; i < nodes.size(); ++i)
      ns.push_back({{"name", nodes[i]},
                    {"inventory", {{"gpus", 8}}},
                    {"running", running.value(nodes[i], json::array())},
                    {"mac", node_mac(keys[signers[i]], challenge, kAgent, nodes[i])}});
    h.send(p, {{"type", "register"}, {"v", 1}, {"agent", kAgent}, {"nodes", ns}, {"finished", finished}});
    return p;
  }
  std::string refusal(const std::shared_ptr<FakePeer>& p) const {
    auto e = p->of("error");
    return e.empty() ? "" : e[0].value("code", "") + ": " + e[0].value("message", "");
  }
  Harness h;
  std::map<std::string, std::string> keys;
};

TEST(NodeKeys, AKeyRegistersItsOwnNodeOnly) {
  testing::TempDir dir;
  Keyed k(dir);
  auto own = k.connect({"n1"});
  ASSERT_EQ(own->of("registered").size(), 1u) << k.refusal(own);
  EXPECT_EQ(own->of("registered")[0]["nodes"], json::array({"n1"}));
  // n1's key used for n2's name: the whole registration is refused, n2 stays unconnected.
  auto thief = k.connect({"n2"}, {"n1"});
  EXPECT_TRUE(thief->of("registered").empty());
  EXPECT_TRUE(thief->closed);
  EXPECT_EQ(k.refusal(thief), "unauthorized: bad MAC for node n2 from agent keyed:1: not made with n2's key");
  EXPECT_FALSE(k.h.hub->connected("n2"));
  // Nor can it slip n2 in beside its own node.
  auto both = k.connect({"n1", "n2"}, {"n1", "n1"});
  EXPECT_TRUE(both->closed);
  EXPECT_FALSE(k.h.hub->connected("n2"));
  EXPECT_FALSE(own->closed) << "a refused registration takes nothing over";
}

TEST(NodeKeys, WrongMissingOrUnissuedKeysAreRefused) {
  testing::TempDir dir;
  Keyed k(dir);
  k.keys["stranger"] = protocol::new_node_key();
  auto wrong = k.connect({"n1"}, {"stranger"});
  EXPECT_TRUE(wrong->closed);
  EXPECT_EQ(k.refusal(wrong).rfind("unauthorized: bad MAC for node n1", 0), 0u) << k.refusal(wrong);
  // The cluster secret is not configured: its MAC is refused too.
  auto secret = k.h.connect({"n1"});
  EXPECT_TRUE(secret->closed);
  EXPECT_NE(k.refusal(secret).find("node keys only"), std::string::npos) << k.refusal(secret);
  // A node of the cluster without a key.
  testing::TempDir dir2;
  Harness bare(dir2, "", true);
  auto p = std::make_shared<FakePeer>();
  bare.hub->on_open(p);
  bare.send(p, {{"type", "register"}, {"v", 1}, {"agent", kAgent},
                {"nodes", {{{"name", "n1"}, {"mac", std::string(64, '0')}}}}});
  EXPECT_TRUE(p->closed);
  ASSERT_EQ(p->of("error").size(), 1u);
  EXPECT_EQ(p->of("error")[0]["message"], "node n1 has no key: issue one with `railyard node add n1`");
  EXPECT_EQ(k.h.hub->stats().refused_total, 2);
}

TEST(NodeKeys, ASessionCannotReportOrFinishAnotherNodesAllocation) {
  testing::TempDir dir;
  Keyed k(dir);
  Harness& h = k.h;
  auto a = k.connect({"n1"}), b = k.connect({"n2"});
  const auto id = h.submit(8);
  ASSERT_EQ(h.job(id).nodes.size(), 1u);
  const std::string victim = h.job(id).nodes[0], attacker = victim == "n1" ? "n2" : "n1";
  auto& vp = victim == "n1" ? a : b;
  auto& ap = victim == "n1" ? b : a;
  const std::string alloc = first_alloc(id);
  h.send(vp, launched(alloc, id, victim));
  ASSERT_EQ(h.job(id).state, JobState::kRunning);
  const auto bad_before = h.hub->stats().bad_messages_total;
  // In the victim's name: refused.
  h.send(ap, finished(alloc, id, victim, "failed", 9, 5));
  // In its own name, about the victim's allocation: changes nothing.
  h.send(ap, finished(alloc, id, attacker, "failed", 9, 6));
  h.send(ap, {{"type", "metrics"}, {"v", 1}, {"alloc", alloc}, {"job", id}, {"node", attacker},
              {"events", json::array({{{"key", "time_to_train"}, {"value", 1.0}}})}});
  EXPECT_EQ(h.hub->stats().bad_messages_total, bad_before + 2);
  // Through a new registration's finished list.
  auto again = k.connect({attacker}, {}, json::object(), json::array({finished(alloc, id, victim, "failed", 9, 7)}));
  ASSERT_EQ(again->of("registered").size(), 1u);
  EXPECT_EQ(again->of("error").size(), 1u);
  EXPECT_EQ(h.job(id).state, JobState::kRunning);
  EXPECT_EQ(h.job(id).attempt, 1);
  EXPECT_FALSE(h.job(id).time_to_train_s);
  auto samples = h.service->store().metrics(id, 100);
  ASSERT_TRUE(samples);
  EXPECT_TRUE(samples->empty());
  for (const auto& ack : again->of("ack")) EXPECT_NE(ack["seq"], 7);
  // A log request sent to the victim's node cannot be answered by the attacker.
  int status = 0;
  h.hub->request_logs(h.job(id), 0, "out", 0, 100, [&](int s, json) { status = s; });
  const auto order = vp->of("logs").at(0);
  EXPECT_TRUE(again->of("logs").empty());
  json forged = {{"type", "log_chunk"}, {"v", 1}, {"req", order["req"]}, {"alloc", alloc}, {"rank", 0},
                 {"stream", "out"}, {"offset", 0}, {"data", "forged"}, {"size", 6}};
  h.send(again, forged);
  EXPECT_EQ(status, 0);
  forged["data"] = "real";
  h.send(vp, forged);
  EXPECT_EQ(status, 200);
  // The victim's own report still ends its job.
  h.send(vp, finished(alloc, id, victim, "completed", 0, 8));
  EXPECT_EQ(h.job(id).state, JobState::kCompleted);
}

TEST(NodeKeys, ARotatedKeyWorksDuringItsGraceAndRunningJobsStay) {
  testing::TempDir dir;
  Keyed k(dir);
  Harness& h = k.h;
  const std::string old = k.keys["n1"];
  auto p = k.connect({"n1", "n2"});
  const auto id = h.running(p, 16);
  const std::string alloc = first_alloc(id);
  const json running = {{"n1", {{{"alloc", alloc}, {"job", id}}}}, {"n2", {{{"alloc", alloc}, {"job", id}}}}};
  k.rotate("n1", 60);
  // During the grace the old key still registers n1; the running job is reported and kept.
  k.keys["old"] = old;
  auto during = k.connect({"n1", "n2"}, {"old", "n2"}, running);
  ASSERT_EQ(during->of("registered").size(), 1u) << k.refusal(during);
  EXPECT_TRUE(during->of("registered")[0]["kill"].empty());
  EXPECT_TRUE(during->of("launch").empty());
  // After the grace it does not.
  h.now += 61;
  auto late = k.connect({"n1"}, {"old"});
  EXPECT_TRUE(late->closed);
  EXPECT_NE(k.refusal(late).find("its previous key's grace has ended"), std::string::npos) << k.refusal(late);
  // The new key works, and the job was never restarted.
  auto fresh = k.connect({"n1", "n2"}, {}, running);
  ASSERT_EQ(fresh->of("registered").size(), 1u) << k.refusal(fresh);
  EXPECT_TRUE(fresh->of("registered")[0]["kill"].empty());
  EXPECT_TRUE(fresh->of("launch").empty());
  EXPECT_EQ(h.job(id).state, JobState::kRunning);
  EXPECT_EQ(h.job(id).attempt, 1);
  // Registering with the new key ends the old key's grace at once.
  const std::string second = k.keys["n1"];
  k.rotate("n1", 600);
  k.keys["second"] = second;
  ASSERT_EQ(k.connect({"n1"}).get()->of("registered").size(), 1u);
  auto stale = k.connect({"n1"}, {"second"});
  EXPECT_TRUE(stale->closed) << "the agent has the new key: the previous one stopped working";
  auto rec = h.service->store().find_node_key("n1");
  ASSERT_TRUE(rec && *rec);
  EXPECT_EQ((*rec)->previous_key, "");
  EXPECT_EQ(h.job(id).state, JobState::kRunning);
}

TEST(NodeKeys, ExecTokensAreMadeWithTheFirstNodesKey) {
  testing::TempDir dir;
  Keyed k(dir);
  Harness& h = k.h;
  auto p = k.connect({"n1", "n2"});
  const auto id = h.running(p, 16);
  const std::string alloc = first_alloc(id), first = h.job(id).nodes[0], other = first == "n1" ? "n2" : "n1";
  int status = 0;
  auto answer = [&](int s, json) { status = s; };
  h.hub->request_exec(alloc, exec_token(k.keys[other], alloc), other, {"orted"}, answer);
  EXPECT_EQ(status, 403) << "another node's key makes no token for this allocation";
  status = 0;
  h.hub->request_exec(alloc, exec_token(k.keys[first], alloc), other, {"orted"}, answer);
  EXPECT_EQ(status, 0) << "accepted: the exec order went out, the answer is pending";
  EXPECT_EQ(p->of("exec").size(), 1u);
}

}  // namespace
}  // namespace railyard::daemon::hub_test
