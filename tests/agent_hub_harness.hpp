// Test harness for the AgentHub (scheduler/daemon/agents.hpp): fake peers, a fake loop and a settable clock
// over a real SQLite store, no sockets. Shared by daemon_agents_test.cpp, daemon_agents_abuse_test.cpp,
// daemon_lifecycle_test.cpp and daemon_node_keys_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <map>

#include "scheduler/daemon/agents.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "tests/daemon_client.hpp"
#include "topology/io_json.hpp"

namespace railyard::daemon::hub_test {

using jobs::JobState;
using nlohmann::json;

constexpr const char* kSecret = "0123456789abcdef-cluster-secret";
constexpr const char* kTwoNodes = R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n1"}, {"name": "leaf2", "level": "leaf", "nodes": "n2"},
               {"name": "spine", "level": "spine", "children": ["leaf1", "leaf2"]}]})";

class FakePeer : public Peer {
 public:
  void send(std::string text) override { sent.push_back(json::parse(text)); }
  void close() override { closed = true; }
  // The frames of one type, in order.
  std::vector<json> of(const std::string& type) const {
    std::vector<json> out;
    for (const auto& m : sent)
      if (m["type"] == type) out.push_back(m);
    return out;
  }
  std::vector<json> sent;
  bool closed = false;
};

// A daemon without sockets: real store, hub and service; posted work runs when run() is called.
class Harness {
 public:
  // `node_keys`: also accept agents by their per-node keys (AgentHubOptions::node_keys).
  explicit Harness(const testing::TempDir& dir, std::string secret = kSecret, bool node_keys = false) {
    auto c = topology::read_cluster_json(kTwoNodes);
    if (!c) throw std::runtime_error(c.error().message);
    cluster_ = std::make_unique<topology::Cluster>(std::move(*c));
    auto st = store::SqliteStateStore::open(dir.file("s.db"));
    if (!st) throw std::runtime_error(st.error().message);
    Loop loop{
        [this](std::function<void()> fn) { work_.push_back(std::move(fn)); },
        [this](std::chrono::milliseconds, std::function<void()> fn) { work_.push_back(std::move(fn)); }};
    service = std::make_unique<Service>(*cluster_, std::move(*st), std::move(loop), [this] { return now; });
    if (!service->open()) throw std::runtime_error("open failed");
    AgentHubOptions o;
    o.secret = std::move(secret);
    o.node_keys = node_keys;
    o.heartbeat_timeout_s = 30;
    o.reconcile_grace_s = 30;
    hub = std::make_unique<AgentHub>(*service, o);
    hub->start();
    run();
  }
  void run() {
    while (!work_.empty()) {
      auto fn = std::move(work_.front());
      work_.pop_front();
      fn();
    }
  }
  // Opens a connection and registers `nodes` with a correct MAC (or `mac` when given).
  std::shared_ptr<FakePeer> connect(const std::vector<std::string>& nodes, json running = json::object(),
                                    std::string mac = "", json finished = json::array()) {
    auto p = std::make_shared<FakePeer>();
    hub->on_open(p);
    const std::string challenge = p->sent.at(0).at("challenge");
    json ns = json::array();
    for (const auto& n : nodes)
      ns.push_back({{"name", n},
                    {"inventory", {{"gpus", 8}, {"source", "emulated"}}},
                    {"running", running.value(n, json::array())}});
    if (mac.empty()) mac = register_mac(kSecret, challenge, "test:1", nodes);
    send(p, {{"type", "register"},
             {"v", 1},
             {"agent", "test:1"},
             {"nodes", ns},
             {"mac", mac},
             {"finished", finished}});
    return p;
  }
  void send(const std::shared_ptr<FakePeer>& p, const json& m) {
    hub->on_message(p.get(), m.dump());
    run();
  }
  jobs::JobId submit(int gpus, bool requeue = false) {
    jobs::JobSpec spec;
    spec.gpus = gpus;
    spec.requeue = requeue;
    spec.launcher = jobs::Launcher::kEnv;
    spec.command = {"/bin/true"};
    const Caller ada{"ada", store::Role::kUser};
    EXPECT_TRUE(service->prepare(spec, ada));
    jobs::JobId id = 0;
    service->submit({spec}, ada, [&](Result<std::vector<jobs::JobId>> ids) { id = ids->front(); });
    run();
    return id;
  }
  // Submits a job of `gpus` GPUs and reports its first allocation launched on each of its nodes.
  jobs::JobId running(const std::shared_ptr<FakePeer>& p, int gpus);
  const store::JobRecord& job(jobs::JobId id) const { return *service->table().find(id); }
  sched::NodeHealth health(const std::string& node) const {
    return service->table().health(cluster_->find_node(node));
  }

  int64_t now = 10'000;
  std::unique_ptr<Service> service;
  std::unique_ptr<AgentHub> hub;

 private:
  std::unique_ptr<topology::Cluster> cluster_;
  std::deque<std::function<void()>> work_;
};

inline json launched(const std::string& alloc, jobs::JobId job, const std::string& node) {
  return {{"type", "launched"}, {"v", 1},       {"alloc", alloc},
          {"job", job},         {"node", node}, {"ranks", json::array()}};
}

inline std::string first_alloc(jobs::JobId id) { return std::to_string(id) + ".1"; }

inline jobs::JobId Harness::running(const std::shared_ptr<FakePeer>& p, int gpus) {
  const jobs::JobId id = submit(gpus);
  for (const auto& node : std::vector<std::string>(job(id).nodes)) send(p, launched(first_alloc(id), id, node));
  return id;
}

inline json finished(const std::string& alloc, jobs::JobId job, const std::string& node,
                     const std::string& state, int exit_code, int seq) {
  return {{"type", "alloc_finished"},
          {"v", 1},
          {"alloc", alloc},
          {"job", job},
          {"node", node},
          {"state", state},
          {"exit_code", exit_code},
          {"signal", 0},
          {"message", ""},
          {"seq", seq}};
}

// Job `id`'s state in the harness's database, read through a connection of its own: what is on disk (in
// the log) now, whatever the service holds in memory.
inline JobState state_on_disk(const testing::TempDir& dir, jobs::JobId id) {
  auto st = (*store::SqliteStateStore::open(dir.file("s.db")))->load();
  EXPECT_TRUE(st);
  if (st)
    for (const auto& j : st->jobs)
      if (j.id == id) return j.state;
  ADD_FAILURE() << "job " << id << " is not in the database";
  return JobState::kPending;
}

}  // namespace railyard::daemon::hub_test
