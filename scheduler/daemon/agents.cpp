// Connections, handshake and messages of the agent protocol. The job lifecycle half (tracks, launch,
// kill, node DOWN) is in agent_lifecycle.cpp.
#include "scheduler/daemon/agents.hpp"

#include <algorithm>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

namespace railyard::daemon {
namespace {

using nlohmann::json;

constexpr int kMaxBadInRow = 3;
constexpr size_t kMaxNodesPerConnection = 4096;

std::string hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(d[p[i] >> 4]);
    s.push_back(d[p[i] & 15]);
  }
  return s;
}

std::string fresh_challenge() {
  unsigned char b[32];
  if (RAND_bytes(b, sizeof b) != 1) throw std::runtime_error("RAND_bytes failed");
  return hex(b, sizeof b);
}

bool contains_node(const std::vector<std::string>& nodes, const std::string& n) {
  return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
}

bool same_secret(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// An integer field, `dflt` when absent; a present non-integer throws (a bad message). nlohmann's get<int>
// of a float out of range is undefined behaviour, so floats are never converted.
int64_t integer(const json& m, const char* key, int64_t dflt) {
  if (!m.contains(key)) return dflt;
  const json& v = m[key];
  if (!v.is_number_integer())
    throw json::type_error::create(302, std::string(key) + " must be an integer", &m);
  return v.get<int64_t>();
}

}  // namespace

std::string hmac_sha256_hex(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return hex(out, len);
}

std::string register_mac(std::string_view secret, std::string_view challenge, std::string_view agent,
                         const std::vector<std::string>& nodes) {
  std::string text = std::string(challenge) + "\n" + std::string(agent) + "\n";
  for (size_t i = 0; i < nodes.size(); ++i) text += (i ? "," : "") + nodes[i];
  return hmac_sha256_hex(secret, text);
}

std::string exec_token(std::string_view secret, std::string_view alloc) {
  return hmac_sha256_hex(secret, "exec\n" + std::string(alloc));
}

std::string alloc_id(JobId job, int attempt) { return std::to_string(job) + "." + std::to_string(attempt); }

AgentHub::AgentHub(Service& service, AgentHubOptions options)
    : service_(service), options_(std::move(options)) {}

void AgentHub::send(Peer* p, const json& msg) {
  if (!p) return;
  std::string text = msg.dump(-1, ' ', false, json::error_handler_t::replace);
  if (options_.epoch > 0 && text.size() > 2 && text.front() == '{')  // {"epoch":N,...}
    text.insert(1, "\"epoch\":" + std::to_string(options_.epoch) + ",");
  p->send(std::move(text));
}

void AgentHub::send_to_node(const std::string& node, const json& msg) {
  auto it = links_.find(node);
  if (it != links_.end()) send(it->second.peer, msg);
}

void AgentHub::error(Peer* p, const std::string& code, const std::string& message) {
  send(p, {{"type", "error"}, {"v", 1}, {"code", code}, {"message", message}});
}

void AgentHub::on_open(const std::shared_ptr<Peer>& peer) {
  Conn c;
  c.peer = peer;
  c.challenge = fresh_challenge();
  send(peer.get(), {{"type", "hello"}, {"v", 1}, {"challenge", c.challenge}, {"server", "railyard 0.1"}});
  conns_.emplace(peer.get(), std::move(c));
}

void AgentHub::refuse(Conn& c, const std::string& reason) {
  ++stats_.refused_total;
  spdlog::warn("agent refused: {}", reason);
  error(c.peer.get(), "unauthorized", reason);
  c.peer->close();
}

void AgentHub::bad_message(Conn& c, const std::string& message) {
  ++stats_.bad_messages_total;
  error(c.peer.get(), "bad_message", message);
  if (++c.bad_in_row >= kMaxBadInRow) {
    spdlog::warn("agent {}: {} bad messages in a row; closing", c.agent, kMaxBadInRow);
    c.peer->close();
  }
}

void AgentHub::on_message(Peer* peer, std::string_view text) {
  auto it = conns_.find(peer);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  json m = json::parse(text, nullptr, false);
  if (m.is_discarded() || !m.is_object() || !m.contains("type") || !m["type"].is_string()) {
    if (!c.registered) return refuse(c, "first message is not a register");
    return bad_message(c, "a message must be a JSON object with a string \"type\"");
  }
  if (!c.registered && m["type"] != "register") return refuse(c, "first message is not a register");
  const int64_t now = service_.now();
  for (const auto& n : c.nodes)
    if (auto l = links_.find(n); l != links_.end() && l->second.peer == peer) l->second.last_seen = now;
  try {
    if (!c.registered) return on_register(c, m);
    handle(c, m);
    c.bad_in_row = 0;
  } catch (const json::exception& e) {
    bad_message(c, std::string("bad ") + m["type"].get<std::string>() + ": " + e.what());
  }
}

void AgentHub::handle(Conn& c, const json& m) {
  const std::string type = m["type"];
  if (type == "heartbeat") return;
  // Reports speak for one node: only the connection that node is registered on may send them (another
  // agent, or one whose node was taken over or timed out, is refused and changes nothing).
  if (type == "launched" || type == "launch_failed" || type == "alloc_finished" || type == "metrics") {
    const std::string node = m.at("node");
    if (auto l = links_.find(node); l == links_.end() || l->second.peer != c.peer.get())
      throw json::other_error::create(502, "node " + node + " is not registered on this connection", nullptr);
  }
  if (type == "launched") return on_launched(m);
  if (type == "launch_failed") return on_launch_failed(m);
  if (type == "alloc_finished") return on_alloc_finished(c.peer.get(), m);
  if (type == "metrics") return on_metrics(m);
  if (type == "health") return on_health(c, m);
  if (type == "log_chunk" || type == "exec_started" || type == "exec_failed") return on_answer(m);
  if (type == "register") throw json::other_error::create(501, "already registered", nullptr);
  ++stats_.bad_messages_total;
  error(c.peer.get(), "unknown_type", "unknown message type " + type);
}

void AgentHub::on_close(Peer* peer) {
  auto it = conns_.find(peer);
  if (it == conns_.end()) return;
  for (const auto& n : it->second.nodes) {
    auto l = links_.find(n);
    if (l == links_.end() || l->second.peer != peer) continue;
    l->second.peer = nullptr;  // DOWN only after the heartbeat timeout: the agent may be restarting
    for (auto p = pending_.begin(); p != pending_.end();) {
      if (p->second.node != n) {
        ++p;
        continue;
      }
      p->second.answer(503,
                       {{"error", {{"code", "unavailable"}, {"message", "node " + n + " disconnected"}}}});
      p = pending_.erase(p);
    }
  }
  if (it->second.registered) spdlog::info("agent {} disconnected", it->second.agent);
  conns_.erase(it);
}

// Handshake, node linking (with takeover), inventory check, fencing of reported allocations, results
// that happened while disconnected, and the reconcile rules for allocations the scheduler restarted with.
void AgentHub::on_register(Conn& c, const json& m) {
  if (!enabled()) return refuse(c, "no --agent-secret-file: the scheduler accepts no agents");
  if (!m.contains("mac") || !m["mac"].is_string() || !m.contains("agent") || !m["agent"].is_string() ||
      !m.contains("nodes") || !m["nodes"].is_array())
    return refuse(c, "register needs agent, nodes and mac");
  std::vector<std::string> names;
  for (const auto& n : m["nodes"]) {
    if (!n.is_object() || !n.contains("name") || !n["name"].is_string())
      return refuse(c, "register: every node needs a name");
    names.push_back(n["name"]);
  }
  c.agent = m["agent"];
  if (!same_secret(m["mac"].get<std::string>(), register_mac(options_.secret, c.challenge, c.agent, names)))
    return refuse(c, "bad MAC from agent " + c.agent);
  if (names.size() > kMaxNodesPerConnection) return refuse(c, "more than 4096 nodes on one connection");
  c.registered = true;
  const int64_t now = service_.now();
  const auto& cluster = service_.table().cluster();
  json accepted = json::array(), rejected = json::array(), kills = json::array();
  std::set<std::pair<std::string, std::string>> still_running;  // (alloc, node) as the agent reports
  WriteBatch b;
  for (const auto& n : m["nodes"]) {
    const std::string name = n["name"];
    const topology::NodeId id = cluster.find_node(name);
    if (id < 0) {
      rejected.push_back({{"name", name}, {"reason", "not in the cluster"}});
      continue;
    }
    if (service_.table().health(id) == sched::NodeHealth::kRemoved) {
      const std::string why = "removed by an admin (" + service_.table().health_reason(id) +
                              "): POST /api/v1/nodes/" + name + "/resume first";
      spdlog::warn("agent {}: node {} refused: {}", c.agent, name, why);
      rejected.push_back({{"name", name}, {"reason", why}});
      continue;
    }
    auto& link = links_[name];
    if (link.peer && link.peer != c.peer.get()) {
      auto old = conns_.find(link.peer);
      if (old != conns_.end()) {
        error(link.peer, "superseded", "node " + name + " registered by a newer connection");
        old->second.peer->close();
      }
    }
    link = {c.peer.get(), c.agent, now};
    c.nodes.push_back(name);
    accepted.push_back(name);
    const int gpus = cluster.node(id).gpus;
    // More GPUs than the cluster says changes nothing (placements use the cluster's count); fewer drains.
    const json none = json::object();
    const json& inv = n.contains("inventory") && n["inventory"].is_object() ? n["inventory"] : none;
    const int64_t reported = integer(inv, "gpus", gpus);
    const auto health = service_.table().health(id);
    if (reported < gpus && health != sched::NodeHealth::kDrain) {
      const std::string why =
          "inventory: " + std::to_string(reported) + " GPUs, cluster says " + std::to_string(gpus);
      b.nodes.push_back({name, sched::NodeHealth::kDrain, why});
      b.events.push_back({"node:" + name, now, "agent:" + name, "drain: " + why});
    } else if (health == sched::NodeHealth::kDown) {
      b.nodes.push_back({name, sched::NodeHealth::kUp, ""});
      b.events.push_back({"node:" + name, now, "agent:" + name, "up: agent " + c.agent + " registered"});
    }
    if (n.contains("health") && n["health"].is_object() && reported >= gpus)
      health_changes(b, name, n["health"].value("ok", true), n["health"].value("reason", ""), now);
    for (const auto& run : n.value("running", json::array())) {
      const std::string alloc = run.at("alloc");
      still_running.emplace(alloc, name);
      const store::JobRecord* r = live_job(alloc);
      auto t = tracks_.find(alloc);
      const bool current = r && t != tracks_.end() && !t->second.ended &&
                           std::count(t->second.nodes.begin(), t->second.nodes.end(), name) > 0;
      if (!current) {
        const std::string job = alloc.substr(0, alloc.find('.'));
        std::string why = "fenced: job " + job + " is not running";
        if (const auto* cur = service_.table().find(std::atoll(job.c_str())))
          why = cur->state == jobs::JobState::kStarting || cur->state == jobs::JobState::kRunning
                    ? "fenced: job " + job + " runs as " + alloc_id(cur->id, cur->attempt)
                    : "fenced: job " + job + " is " + std::string(jobs::to_string(cur->state));
        kills.push_back({{"alloc", alloc}, {"node", name}, {"reason", why}});
        continue;
      }
      t->second.launch_sent.insert(name);
      t->second.launched.insert(name);
      t->second.absent.erase(name);
      // A launch whose report a restart lost (the report is written with a later transaction).
      running_if_launched(b, *r, t->second, alloc, name);
    }
  }
  // Ended allocations (their GPUs held) that a node does not report: not running there any more.
  for (auto& [alloc, t] : tracks_)
    if (t.ended)
      for (const auto& name : c.nodes)
        if (contains_node(t.nodes, name) && !still_running.count({alloc, name})) t.finished.insert(name);
  if (auto s = commit(b); !s) spdlog::error("register: commit failed: {}", s.error().message);
  send(c.peer.get(), {{"type", "registered"},
                      {"v", 1},
                      {"heartbeat_s", options_.heartbeat_interval_s},
                      {"nodes", accepted},
                      {"rejected", rejected},
                      {"kill", kills}});
  spdlog::info("agent {} registered {} nodes ({} rejected, {} fenced)", c.agent, accepted.size(),
               rejected.size(), kills.size());
  for (const auto& f : m.value("finished", json::array())) on_alloc_finished(c.peer.get(), f);
  // Live allocations on these nodes that the agent did not report: never launched there (placed while
  // the node was away) → launch now; restored after a scheduler restart → absent (reconcile).
  std::vector<std::pair<std::string, std::string>> launches;
  std::vector<JobId> lost;
  for (auto& [alloc, t] : tracks_) {
    if (t.ended) continue;
    for (const auto& name : c.nodes) {
      if (std::count(t.nodes.begin(), t.nodes.end(), name) == 0 || t.launched.count(name) ||
          t.finished.count(name))
        continue;
      if (t.restored) {
        t.absent.insert(name);
      } else {
        launches.emplace_back(alloc, name);
      }
    }
    if (t.restored && t.absent.size() == t.nodes.size()) lost.push_back(t.job);
  }
  for (const auto& [alloc, name] : launches) send_launch(alloc, tracks_.at(alloc), name);
  WriteBatch fail;
  for (JobId id : lost)
    if (const auto* r = service_.table().find(id))
      end_job(fail, *r, jobs::JobState::kFailed, std::nullopt,
              "lost: not running on any node after scheduler restart", "scheduler", true);
  if (auto s = commit(fail); !s) spdlog::error("reconcile: commit failed: {}", s.error().message);
  release_ended();
}

void AgentHub::health_changes(WriteBatch& b, const std::string& node, bool ok, const std::string& reason,
                              int64_t now) {
  const auto& table = service_.table();
  const topology::NodeId id = table.cluster().find_node(node);
  if (id < 0) return;
  const auto health = table.health(id);
  if (health == sched::NodeHealth::kRemoved) return;
  const std::string& current = table.health_reason(id);
  const bool drained_by_check = health == sched::NodeHealth::kDrain && current.rfind("health: ", 0) == 0;
  if (!ok) {
    const std::string why = "health: " + (reason.empty() ? std::string("check failed") : reason);
    if (health == sched::NodeHealth::kDown || (health == sched::NodeHealth::kDrain && !drained_by_check) ||
        current == why)
      return;
    b.nodes.push_back({node, sched::NodeHealth::kDrain, why});
    b.events.push_back({"node:" + node, now, "agent:" + node, "drain: " + why});
  } else if (drained_by_check) {
    b.nodes.push_back({node, sched::NodeHealth::kUp, ""});
    b.events.push_back({"node:" + node, now, "agent:" + node, "resume: health check passes again"});
  }
}

void AgentHub::on_health(Conn& c, const json& m) {
  const std::string node = m.at("node");
  if (removed_.count(node)) return;  // left this connection when an admin removed it
  if (std::find(c.nodes.begin(), c.nodes.end(), node) == c.nodes.end())
    throw json::other_error::create(502, "node " + node + " is not registered on this connection", nullptr);
  WriteBatch b;
  health_changes(b, node, m.at("ok").get<bool>(), m.value("reason", ""), service_.now());
  if (!b.empty()) (void)commit(b);
}

// Fields are read before the request is taken off pending_, so a malformed answer (a bad message) leaves
// the API caller to the request timeout instead of never answering it.
void AgentHub::on_answer(const json& m) {
  auto it = pending_.find(integer(m, "req", -1));
  if (it == pending_.end()) return;  // timed out already
  const std::string type = m["type"];
  int status = 200;
  json body;
  if (type == "exec_started") {
    body = {{"pid", integer(m, "pid", 0)}};
  } else if (type == "exec_failed") {
    status = 502;
    body = {{"error", {{"code", "exec_failed"}, {"message", m.value("message", "")}}}};
  } else if (m.contains("error") && m["error"].is_string()) {
    status = 404;
    body = {{"error", {{"code", "not_found"}, {"message", m["error"]}}}};
  } else {
    const std::string data = m.value("data", "");
    const int64_t offset = std::clamp<int64_t>(integer(m, "offset", 0), 0, int64_t{1} << 62);
    body = {{"rank", integer(m, "rank", 0)},
            {"stream", m.value("stream", "out")},
            {"offset", offset},
            {"data", data},
            {"size", integer(m, "size", 0)},
            {"next_offset", offset + static_cast<int64_t>(data.size())}};
  }
  Answer answer = std::move(it->second.answer);
  pending_.erase(it);
  answer(status, std::move(body));
}

void AgentHub::request_logs(const store::JobRecord& r, int rank, const std::string& stream, int64_t offset,
                            int64_t max_bytes, Answer answer) {
  auto fail = [&](int status, const char* code, const std::string& msg) {
    answer(status, {{"error", {{"code", code}, {"message", msg}}}});
  };
  if (r.nodes.empty() || r.attempt == 0) return fail(404, "not_found", "job has not run");
  // Which node holds the rank: one per GPU in node order (env), one per node (none), node 0 (mpi).
  std::string node;
  const auto& c = service_.table().cluster();
  if (r.spec.launcher == jobs::Launcher::kMpi) {
    if (rank >= 0 && rank < r.spec.total_gpus()) node = r.nodes.front();
  } else if (r.spec.launcher == jobs::Launcher::kNone) {
    if (rank >= 0 && rank < static_cast<int>(r.nodes.size())) node = r.nodes[static_cast<size_t>(rank)];
  } else {
    int first = 0;
    for (const auto& name : r.nodes) {
      const auto id = c.find_node(name);
      int here = 0;
      for (auto g : r.gpus) here += c.node_of(g) == id;
      for (const auto& s : r.slices) here += c.node_of(s.gpu) == id;
      if (rank >= first && rank < first + here) node = name;
      first += here;
    }
  }
  if (node.empty())
    return fail(404, "not_found", "job " + std::to_string(r.id) + " has no rank " + std::to_string(rank));
  if (!connected(node)) return fail(503, "unavailable", "node " + node + " is not connected");
  const int64_t req = next_req_++;
  pending_[req] = {std::move(answer), node, service_.now() + options_.request_timeout_s};
  send_to_node(node, {{"type", "logs"},
                      {"v", 1},
                      {"req", req},
                      {"alloc", alloc_id(r.id, r.attempt)},
                      {"node", node},
                      {"rank", rank},
                      {"stream", stream},
                      {"offset", offset},
                      {"max_bytes", max_bytes}});
}

void AgentHub::request_exec(const std::string& alloc, const std::string& token, const std::string& node,
                            std::vector<std::string> argv, Answer answer) {
  auto fail = [&](int status, const char* code, const std::string& msg) {
    answer(status, {{"error", {{"code", code}, {"message", msg}}}});
  };
  if (!enabled() || !same_secret(token, exec_token(options_.secret, alloc)))
    return fail(403, "forbidden", "bad exec token for allocation " + alloc);
  auto t = tracks_.find(alloc);
  if (!live_job(alloc) || t == tracks_.end() || t->second.ended)
    return fail(404, "not_found", "allocation " + alloc + " is not live");
  if (std::count(t->second.nodes.begin(), t->second.nodes.end(), node) == 0)
    return fail(404, "not_found", "allocation " + alloc + " has no node " + node);
  if (!connected(node)) return fail(503, "unavailable", "node " + node + " is not connected");
  const int64_t req = next_req_++;
  pending_[req] = {std::move(answer), node, service_.now() + options_.request_timeout_s};
  send_to_node(node,
               {{"type", "exec"}, {"v", 1}, {"req", req}, {"alloc", alloc}, {"node", node}, {"argv", argv}});
}

size_t AgentHub::connected_nodes() const {
  size_t n = 0;
  for (const auto& [name, l] : links_) n += l.peer != nullptr;
  return n;
}

bool AgentHub::connected(const std::string& node) const {
  auto it = links_.find(node);
  return it != links_.end() && it->second.peer != nullptr;
}

std::optional<int64_t> AgentHub::last_heartbeat(const std::string& node) const {
  auto it = links_.find(node);
  if (it == links_.end()) return std::nullopt;
  return it->second.last_seen;
}

}  // namespace railyard::daemon
