// Registration of an agent's connection (scheduler/PROTOCOL.md "Handshake and authentication"), in four
// steps: decode the register strictly; authenticate it (the cluster secret speaks for every node, a node
// key only for its own node); link each accepted node to the connection (takeover, inventory, health,
// fencing of the allocations it reports); reconcile (reports kept while away, launches the node missed,
// allocations a restarted scheduler finds on no node).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/protocol/fields.hpp"
#include "scheduler/daemon/agents.hpp"

namespace railyard::daemon {
namespace {

using nlohmann::json;

bool contains_node(const std::vector<std::string>& nodes, const std::string& n) {
  return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
}

}  // namespace

// What linking the nodes of one register produces: the answer's lists and the batch to commit.
struct AgentHub::Linking {
  std::vector<std::string> accepted;
  std::vector<protocol::Rejected> rejected;
  std::vector<protocol::Kill> kills;
  std::set<std::pair<std::string, std::string>> still_running;  // (alloc, node) as the agent reports
  WriteBatch batch;
};

void AgentHub::on_register(Conn& c, const json& m) {
  if (!enabled()) return refuse(c, "no --agent-secret-file and no --node-keys: the scheduler accepts no agents");
  protocol::Register reg;
  try {
    reg = m.get<protocol::Register>();
  } catch (const json::exception& e) {
    return refuse(c, std::string("bad register: ") + e.what());
  }
  c.agent = reg.agent;
  if (reg.nodes.size() > protocol::kMaxNodesPerConnection) return refuse(c, "more than 4096 nodes on one connection");
  auto keys = authenticate(c, reg);
  if (!keys) return refuse(c, keys.error().message);
  c.registered = true;
  Linking out;
  for (const auto& n : reg.nodes) link_node(c, n, out);
  start_sealing(c, reg, *keys, out.accepted);
  // Ended allocations (their GPUs held) that a node does not report: not running there any more.
  for (auto& [alloc, t] : tracks_)
    if (t.ended)
      for (const auto& name : c.nodes)
        if (contains_node(t.nodes, name) && !out.still_running.count({alloc, name})) t.finished.insert(name);
  if (auto s = commit(std::move(out.batch)); !s) spdlog::error("register: commit failed: {}", s.error().message);
  send(c.peer.get(), protocol::encode(protocol::Registered{static_cast<int>(options_.heartbeat_interval_s),
                                                           out.accepted, out.rejected, out.kills}));
  spdlog::info("agent {} registered {} nodes ({} rejected, {} fenced)", c.agent, out.accepted.size(),
               out.rejected.size(), out.kills.size());
  apply_register_finished(c, reg.finished);
  reconcile(c);
}

// The cluster secret (register.mac) speaks for every node; without it each node must carry a MAC made with
// its own key (register.nodes[].mac). Any failure refuses the whole connection: a key used for another
// node's name is a compromised or misconfigured agent, never a partial success.
Result<std::map<std::string, std::string>> AgentHub::authenticate(const Conn& c, const protocol::Register& reg) {
  std::map<std::string, std::string> keys;
  if (reg.mac) {
    if (options_.secret.empty())
      return invalid("agent " + c.agent + " sent a cluster-secret MAC, but this scheduler takes node keys only");
    if (!protocol::same_mac(*reg.mac, register_mac(options_.secret, c.challenge, c.agent, reg.names())))
      return invalid("bad MAC from agent " + c.agent);
    return keys;
  }
  if (!options_.node_keys) return invalid("register without a MAC from agent " + c.agent);
  for (const auto& n : reg.nodes) {
    if (!n.mac) return invalid("node " + n.name + " from agent " + c.agent + ": no MAC (per-node keys)");
    auto key = check_node_key(c, n.name, *n.mac);
    if (!key) return key.error();
    keys[n.name] = std::move(*key);
  }
  return keys;
}

// The agent picks the same key: the secret, or the key of the first name of `registered.nodes` it hosts.
// Every accepted node's MAC was verified (a cluster node without a key refuses the whole register), so
// that key is one the agent proved it holds. With no accepted node and no secret nothing is sealed, and
// the agent, unable to verify `registered`, stays unregistered.
void AgentHub::start_sealing(Conn& c, const protocol::Register& reg, const std::map<std::string, std::string>& keys,
                             const std::vector<std::string>& accepted) {
  std::string key;
  if (reg.mac) {
    key = options_.secret;
  } else if (!accepted.empty()) {
    auto it = keys.find(accepted.front());
    if (it != keys.end()) key = it->second;
  }
  if (key.empty()) return;
  c.sealer.emplace(protocol::session_key(key, c.challenge, reg.agent_challenge.value_or(""), c.agent));
}

// A node name outside the cluster proves nothing and needs no key: linking rejects it.
Result<std::string> AgentHub::check_node_key(const Conn& c, const std::string& node, const std::string& mac) {
  auto rec = service_.store().find_node_key(node);
  if (!rec) return internal_error("node keys unreadable: " + rec.error().message);
  if (!*rec) {
    if (service_.table().cluster().find_node(node) < 0) return std::string();
    return invalid("node " + node + " has no key: issue one with `railyard node add " + node + "`");
  }
  store::NodeKeyRecord& k = **rec;
  if (protocol::same_mac(mac, node_mac(k.key, c.challenge, c.agent, node))) {
    if (!k.previous_key.empty()) {  // the agent has the new key: the old one stops working now
      k.previous_key.clear();
      k.previous_until.reset();
      if (auto s = service_.store().put_node_key(k); !s) spdlog::error("node {}: {}", node, s.error().message);
      spdlog::info("node {} registered with its new key; the previous key no longer works", node);
    }
    return k.key;
  }
  const bool in_grace = !k.previous_key.empty() && k.previous_until && service_.now() < *k.previous_until;
  if (in_grace && protocol::same_mac(mac, node_mac(k.previous_key, c.challenge, c.agent, node))) {
    spdlog::info("node {} registered with its previous key (rotated; accepted until {})", node, *k.previous_until);
    return k.previous_key;
  }
  return invalid("bad MAC for node " + node + " from agent " + c.agent + ": not made with " + node + "'s key" +
                 (k.previous_key.empty() || in_grace ? "" : " (its previous key's grace has ended)"));
}

bool AgentHub::exec_token_ok(const std::string& alloc, const std::string& token, const std::string& first_node) {
  if (!options_.secret.empty() && protocol::same_mac(token, exec_token(options_.secret, alloc))) return true;
  if (!options_.node_keys || first_node.empty()) return false;
  auto rec = service_.store().find_node_key(first_node);
  if (!rec || !*rec) return false;
  const store::NodeKeyRecord& k = **rec;
  if (protocol::same_mac(token, exec_token(k.key, alloc))) return true;
  return !k.previous_key.empty() && k.previous_until && service_.now() < *k.previous_until &&
         protocol::same_mac(token, exec_token(k.previous_key, alloc));
}

void AgentHub::link_node(Conn& c, const protocol::RegisterNode& n, Linking& out) {
  const std::string& name = n.name;
  const int64_t now = service_.now();
  const auto& cluster = service_.table().cluster();
  const topology::NodeId id = cluster.find_node(name);
  if (id < 0) return out.rejected.push_back({name, "not in the cluster"});
  if (service_.table().health(id) == sched::NodeHealth::kRemoved) {
    const std::string why = "removed by an admin (" + service_.table().health_reason(id) +
                            "): POST /api/v1/nodes/" + name + "/resume first";
    spdlog::warn("agent {}: node {} refused: {}", c.agent, name, why);
    return out.rejected.push_back({name, why});
  }
  auto& link = links_[name];
  if (link.peer && link.peer != c.peer.get()) {
    if (auto old = conns_.find(link.peer); old != conns_.end()) {
      error(link.peer, "superseded", "node " + name + " registered by a newer connection");
      old->second.peer->close();
    }
  }
  link = {c.peer.get(), c.agent, now, n.runs_as};
  // Which nodes run image jobs is the pass's input: a change may place (or stop placing) image jobs.
  if (service_.table().containers(id) != n.containers.has_value()) {
    service_.table().set_containers(id, n.containers.has_value());
    service_.request_pass();
  }
  c.nodes.push_back(name);
  out.accepted.push_back(name);
  const int gpus = cluster.node(id).gpus;
  // More GPUs than the cluster says changes nothing (placements use the cluster's count); fewer drains.
  const int64_t reported = protocol::field::get_or<int64_t>(n.inventory, "gpus", gpus);
  const auto health = service_.table().health(id);
  WriteBatch& b = out.batch;
  if (reported < gpus && health != sched::NodeHealth::kDrain) {
    const std::string why = "inventory: " + std::to_string(reported) + " GPUs, cluster says " + std::to_string(gpus);
    b.nodes.push_back({name, sched::NodeHealth::kDrain, why});
    b.events.push_back({"node:" + name, now, "agent:" + name, "drain: " + why});
  } else if (health == sched::NodeHealth::kDown) {
    b.nodes.push_back({name, sched::NodeHealth::kUp, ""});
    b.events.push_back({"node:" + name, now, "agent:" + name, "up: agent " + c.agent + " registered"});
  }
  if (n.health && reported >= gpus) health_changes(b, name, n.health->ok, n.health->reason, now);
  for (const auto& run : n.running) fence_running(name, run, out);
}

// An allocation the agent reports running on `node`: kept when it is the job's current allocation and
// includes the node, otherwise put in the answer's kill list.
void AgentHub::fence_running(const std::string& node, const protocol::RunningAlloc& run, Linking& out) {
  const std::string& alloc = run.alloc;
  out.still_running.emplace(alloc, node);
  const store::JobRecord* r = live_job(alloc);
  auto t = tracks_.find(alloc);
  const bool current = r && t != tracks_.end() && !t->second.ended && contains_node(t->second.nodes, node);
  if (!current) {
    const std::string job = alloc.substr(0, alloc.find('.'));
    std::string why = "fenced: job " + job + " is not running";
    if (const auto* cur = service_.table().find(std::atoll(job.c_str())))
      why = cur->state == jobs::JobState::kStarting || cur->state == jobs::JobState::kRunning
                ? "fenced: job " + job + " runs as " + alloc_id(cur->id, cur->attempt)
                : "fenced: job " + job + " is " + std::string(jobs::to_string(cur->state));
    out.kills.push_back({alloc, node, why});
    return;
  }
  t->second.launch_sent.insert(node);
  t->second.launched.insert(node);
  t->second.absent.erase(node);
  // A launch whose report a restart lost (the report is written with a later transaction).
  running_if_launched(out.batch, *r, t->second, alloc, node);
}

// Outcomes the agent kept while disconnected, applied as if just received; each must be about a node this
// connection registered (one node's key cannot end another node's allocation).
void AgentHub::apply_register_finished(Conn& c, const std::vector<json>& finished) {
  for (const auto& f : finished) {
    try {
      const auto report = f.get<protocol::AllocFinished>();
      if (!owns(c, report.node))
        not_owned(c, "alloc_finished for node " + report.node + ", which is not registered on this connection");
      on_alloc_finished(c.peer.get(), report);
    } catch (const json::exception& e) {
      bad_message(c, std::string("bad register.finished: ") + e.what());
    }
  }
}

// Live allocations on these nodes that the agent did not report: never launched there (placed while the
// node was away) -> launch now; restored after a scheduler restart -> absent, and a job absent from every
// node is lost.
void AgentHub::reconcile(Conn& c) {
  std::vector<std::pair<std::string, std::string>> launches;
  std::vector<JobId> lost;
  for (auto& [alloc, t] : tracks_) {
    if (t.ended) continue;
    for (const auto& name : c.nodes) {
      if (!contains_node(t.nodes, name) || t.launched.count(name) || t.finished.count(name)) continue;
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
      end_job(fail, *r, jobs::JobState::kFailed, std::nullopt, "lost: not running on any node after scheduler restart",
              "scheduler", true);
  if (auto s = commit(fail); !s) spdlog::error("reconcile: commit failed: {}", s.error().message);
  release_ended();
}

}  // namespace railyard::daemon
