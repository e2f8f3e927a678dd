// Connections and messages of the agent protocol. Registration is in agent_register.cpp, the job lifecycle
// half (tracks, launch, kill, node DOWN) in agent_lifecycle.cpp.
#include "scheduler/daemon/agents.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/json_text.hpp"
#include "common/protocol/fields.hpp"

namespace railyard::daemon {
namespace {

using nlohmann::json;

constexpr int kMaxBadInRow = 3;

}  // namespace

std::string alloc_id(JobId job, int attempt) { return protocol::alloc_id(job, attempt); }

AgentHub::AgentHub(Service& service, AgentHubOptions options)
    : service_(service), options_(std::move(options)) {
  service_.set_user_check([this, alive = std::weak_ptr<char>(alive_)](const std::string& user) -> Status {
    return alive.expired() ? ok() : can_run_as(user);
  });
}

void AgentHub::send(Peer* p, const json& msg) {
  if (!p) return;
  std::string text = msg.dump(-1, ' ', false, json::error_handler_t::replace);
  if (options_.epoch > 0 && text.size() > 2 && text.front() == '{')  // {"epoch":N,...}
    text.insert(1, "\"epoch\":" + std::to_string(options_.epoch) + ",");
  // The one place messages leave: after registration each is sealed (counter + MAC over these bytes).
  if (auto c = conns_.find(p); c != conns_.end() && c->second.sealer) text = c->second.sealer->seal(std::move(text));
  p->send(std::move(text));
}

void AgentHub::send_to_node(const std::string& node, const json& msg) {
  auto it = links_.find(node);
  if (it != links_.end()) send(it->second.peer, msg);
}

void AgentHub::error(Peer* p, const std::string& code, const std::string& message) {
  send(p, protocol::encode(protocol::Error{code, message}));
}

void AgentHub::on_open(const std::shared_ptr<Peer>& peer) {
  Conn c;
  c.peer = peer;
  c.challenge = protocol::random_hex(32);
  send(peer.get(), protocol::encode(protocol::Hello{c.challenge, "railyard 0.1"}));
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
  // Depth first: a register's inventory is copied before its MAC is checked, and a copy recurses.
  auto parsed = parse_json_bounded(text);
  if (!parsed) {
    if (!c.registered) return refuse(c, "first message: " + parsed.error().message);
    return bad_message(c, parsed.error().message);
  }
  json m = std::move(*parsed);
  if (!m.is_object() || !m.contains("type") || !m["type"].is_string()) {
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

bool AgentHub::owns(const Conn& c, const std::string& node) const {
  auto l = links_.find(node);
  return l != links_.end() && l->second.peer == c.peer.get();
}

void AgentHub::not_owned(const Conn& c, const std::string& what) const {
  spdlog::warn("agent {}: refused {}", c.agent, what);
  throw json::other_error::create(502, what, nullptr);
}

void AgentHub::handle(Conn& c, const json& m) {
  const std::string type = m["type"];
  if (type == "heartbeat") return;
  // Reports speak for one node: only the connection that node is registered on may send them (another
  // agent, or one whose node was taken over or timed out, is refused and changes nothing).
  auto owned = [&](const auto& report) {
    if (!owns(c, report.node)) not_owned(c, type + " for node " + report.node + ", which is not registered on this connection");
    return report;
  };
  if (type == "launched") return on_launched(owned(m.get<protocol::Launched>()));
  if (type == "launch_failed") return on_launch_failed(owned(m.get<protocol::LaunchFailed>()));
  if (type == "alloc_finished") return on_alloc_finished(c.peer.get(), owned(m.get<protocol::AllocFinished>()));
  if (type == "metrics") return on_metrics(c, owned(m.get<protocol::Metrics>()));
  if (type == "health") return on_health(c, m);
  if (type == "log_chunk" || type == "exec_started" || type == "exec_failed" || type == "image_list")
    return on_answer(c, m);
  if (type == "launch_progress") return on_launch_progress(owned(m.get<protocol::LaunchProgress>()));
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
  const auto h = m.get<protocol::Health>();
  if (removed_.count(h.node)) return;  // left this connection when an admin removed it
  if (std::find(c.nodes.begin(), c.nodes.end(), h.node) == c.nodes.end())
    not_owned(c, "health for node " + h.node + ", which is not registered on this connection");
  WriteBatch b;
  health_changes(b, h.node, h.ok, h.reason, service_.now());
  if (!b.empty()) (void)commit(b);
}

// Fields are read before the request is taken off pending_, so a malformed answer (a bad message) leaves
// the API caller to the request timeout instead of never answering it. Only the connection of the node the
// request went to may answer it (request ids are sequential, so another agent could guess one).
void AgentHub::on_answer(const Conn& c, const json& m) {
  const std::string type = m["type"];
  int status = 200;
  json body;
  int64_t req = 0;
  if (type == "exec_started") {
    const auto a = m.get<protocol::ExecStarted>();
    req = protocol::field::as<int64_t>(a.req, "req");
    body = {{"pid", a.pid}};
  } else if (type == "image_list") {
    const auto a = m.get<protocol::ImageList>();
    req = protocol::field::as<int64_t>(a.req, "req");
    if (a.error) {
      status = 502;
      body = {{"error", {{"code", "engine"}, {"message", *a.error}}}};
    } else {
      body = {{"node", a.node}, {"images", a.images}, {"pulling", a.pulling}};
    }
  } else if (type == "exec_failed") {
    const auto a = m.get<protocol::ExecFailed>();
    req = protocol::field::as<int64_t>(a.req, "req");
    status = 502;
    body = {{"error", {{"code", "exec_failed"}, {"message", a.message}}}};
  } else {
    const auto a = m.get<protocol::LogChunk>();
    req = protocol::field::as<int64_t>(a.req, "req");
    if (a.error) {
      status = 404;
      body = {{"error", {{"code", "not_found"}, {"message", *a.error}}}};
    } else {
      const int64_t offset = std::clamp<int64_t>(a.offset, 0, int64_t{1} << 62);
      body = {{"rank", a.rank},  {"stream", a.stream}, {"offset", offset},
              {"data", a.data},  {"size", a.size},     {"next_offset", offset + static_cast<int64_t>(a.data.size())}};
    }
  }
  auto it = pending_.find(req);
  if (it == pending_.end()) return;  // timed out already
  if (!owns(c, it->second.node))
    not_owned(c, type + " for request " + std::to_string(req) + ", which went to node " + it->second.node);
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
  // Which node holds the rank: one per node (none); one per GPU, filled in node order (env, and mpi, whose
  // hostfile gives each node one slot per GPU and mpirun maps ranks by slot). Rank 0 of an mpi job is on
  // node 0, whose log of it is mpirun's output, every rank's together.
  std::string node;
  const auto& c = service_.table().cluster();
  if (r.spec.launcher == jobs::Launcher::kNone) {
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
  send_to_node(node,
               protocol::encode(protocol::Logs{req, alloc_id(r.id, r.attempt), node, rank, stream, offset, max_bytes}));
}

void AgentHub::request_images(const std::string& node, const std::optional<std::string>& pull, Answer answer) {
  if (!connected(node))
    return answer(503, {{"error", {{"code", "unavailable"}, {"message", "node " + node + " is not connected"}}}});
  const int64_t req = next_req_++;
  pending_[req] = {std::move(answer), node, service_.now() + options_.request_timeout_s};
  send_to_node(node, protocol::encode(protocol::Images{req, node, pull}));
}

void AgentHub::request_exec(const std::string& alloc, const std::string& token, const std::string& node,
                            std::vector<std::string> argv, Answer answer) {
  auto fail = [&](int status, const char* code, const std::string& msg) {
    answer(status, {{"error", {{"code", code}, {"message", msg}}}});
  };
  auto t = tracks_.find(alloc);
  const std::string first = t != tracks_.end() && !t->second.nodes.empty() ? t->second.nodes.front() : "";
  if (!enabled() || !exec_token_ok(alloc, token, first))
    return fail(403, "forbidden", "bad exec token for allocation " + alloc);
  if (!live_job(alloc) || t == tracks_.end() || t->second.ended)
    return fail(404, "not_found", "allocation " + alloc + " is not live");
  if (std::count(t->second.nodes.begin(), t->second.nodes.end(), node) == 0)
    return fail(404, "not_found", "allocation " + alloc + " has no node " + node);
  if (!connected(node)) return fail(503, "unavailable", "node " + node + " is not connected");
  const int64_t req = next_req_++;
  pending_[req] = {std::move(answer), node, service_.now() + options_.request_timeout_s};
  send_to_node(node, protocol::encode(protocol::Exec{req, alloc, node, std::move(argv)}));
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

Status AgentHub::can_run_as(const std::string& user) const {
  std::set<std::string> owners;
  for (const auto& [name, l] : links_) {
    if (!l.peer) continue;
    if (!l.runs_as || l.runs_as->switch_users || l.runs_as->user == user) return ok();
    owners.insert(l.runs_as->user);
  }
  if (owners.empty()) return ok();  // no agent connected: nothing known yet
  std::string names;
  for (const auto& o : owners) names += (names.empty() ? "'" : ", '") + o + "'";
  return invalid("user: every connected agent runs as " + names + " and cannot switch users (not root): a job of user '" +
                 user + "' would be refused on every node; submit it as that user, or run the agents as root");
}

std::optional<int64_t> AgentHub::last_heartbeat(const std::string& node) const {
  auto it = links_.find(node);
  if (it == links_.end()) return std::nullopt;
  return it->second.last_seen;
}

}  // namespace railyard::daemon
