// The job lifecycle half of the AgentHub: allocations tracked from placement to the last confirmed exit,
// launch and kill orders, reports that move jobs on, heartbeat timeouts and the reconcile grace.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "jobs/spec_json.hpp"
#include "scheduler/daemon/agents.hpp"

namespace railyard::daemon {
namespace {

using jobs::JobState;
using nlohmann::json;

bool live(JobState s) { return s == JobState::kStarting || s == JobState::kRunning; }

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

// Agents' reports are the scheduler's own transitions: in the log at once, on disk within 2 × kLazySyncDelay
// (commit_pipeline.hpp). What an agent is told is durable (the ack of alloc_finished) waits for that.
Status AgentHub::commit(WriteBatch b) {
  b.durability = store::Durability::kWritten;
  return service_.commit(std::move(b));
}

// A launch or an end: written with the loop's next transaction (store::Durability::kDeferred). The agent
// repeats either until it is durable (alloc_finished until acked; launched when it re-registers).
Status AgentHub::commit_report(WriteBatch b) {
  b.durability = store::Durability::kDeferred;
  return service_.commit(std::move(b));
}

const store::JobRecord* AgentHub::live_job(const std::string& alloc) const {
  const size_t dot = alloc.find('.');
  if (dot == std::string::npos) return nullptr;
  const auto* r = service_.table().find(std::atoll(alloc.substr(0, dot).c_str()));
  if (!r || !live(r->state) || alloc_id(r->id, r->attempt) != alloc) return nullptr;
  return r;
}

void AgentHub::start() {
  const int64_t now = service_.now();
  grace_end_ = now + options_.reconcile_grace_s;
  const auto& table = service_.table();
  PortsInUse ports = ports_in_use();
  for (const auto& [id, r] : table.jobs()) {
    if (!live(r.state)) continue;
    track_started(r, ports);
    Track& t = tracks_.at(alloc_id(r.id, r.attempt));
    t.restored = true;
    t.launch_sent.insert(r.nodes.begin(), r.nodes.end());
  }
  for (const auto& [alloc, h] : table.gpu_holds()) {
    Track t;
    t.job = h.job;
    t.nodes = h.nodes;
    t.gpus = h.gpus;
    t.restored = true;
    t.launch_sent.insert(h.nodes.begin(), h.nodes.end());
    mark_ended(alloc, tracks_.emplace(alloc, std::move(t)).first->second);
  }
  for (topology::NodeId n = 0; n < table.cluster().node_count(); ++n)
    if (table.health(n) == sched::NodeHealth::kRemoved) removed_.insert(table.cluster().node(n).name);
  service_.add_pre_commit([this](WriteBatch& b) { add_holds(b); });
  service_.add_observer([this](const WriteBatch& b) { on_batch(b); });
  if (!tracks_.empty()) spdlog::info("{} allocations live or held at start", tracks_.size());
}

bool AgentHub::outstanding(const Track& t, const std::string& node) const {
  if (t.finished.count(node) || !t.launch_sent.count(node)) return false;
  if (connected(node)) return true;
  return t.restored && enabled() && !grace_over_ && !links_.count(node);
}

void AgentHub::add_holds(WriteBatch& b) const {
  for (const auto& after : b.updates) {
    const auto* before = service_.table().find(after.id);
    if (!before || !live(before->state) || (live(after.state) && after.attempt == before->attempt)) continue;
    const std::string alloc = alloc_id(before->id, before->attempt);
    auto it = tracks_.find(alloc);
    if (it == tracks_.end() || it->second.ended) continue;
    store::GpuHold h{alloc, before->id, it->second.gpus, {}};
    for (const auto& n : it->second.nodes)
      if (outstanding(it->second, n)) h.nodes.push_back(n);
    if (!h.nodes.empty() && !h.gpus.empty()) b.holds.push_back(std::move(h));
  }
}

// Called after every applied batch: new placements get launch orders, allocations whose job left
// STARTING/RUNNING (cancel, failure, requeue, node DOWN) get kill orders.
void AgentHub::on_batch(const WriteBatch& b) {
  std::optional<PortsInUse> ports;  // made at the batch's first start
  auto look = [&](const store::JobRecord& changed) {
    const auto* r = service_.table().find(changed.id);
    if (!r) return;
    if (live(r->state) && !tracks_.count(alloc_id(r->id, r->attempt))) {
      if (!ports) ports = ports_in_use();
      track_started(*r, *ports);
    }
    if (r->attempt == 0) return;  // never placed: no allocation to end (most updates of a big queue)
    // Its allocations are <job>.1 .. <job>.<attempt>: look them up instead of scanning every track.
    for (int a = 1; a <= r->attempt; ++a) {
      const std::string alloc = alloc_id(r->id, a);
      auto it = tracks_.find(alloc);
      if (it != tracks_.end() && !it->second.ended && !live_job(alloc)) end_track(alloc, it->second);
    }
  };
  for (const auto& r : b.updates) look(r);  // inserts are new PENDING jobs
  for (const auto& n : b.nodes) {
    if (n.health == sched::NodeHealth::kRemoved) {
      removed_.insert(n.name);
      unlink(n.name);
    } else if (removed_.erase(n.name) && enabled()) {
      // Resumed: its agent must register within the heartbeat timeout, or the node goes DOWN.
      links_[n.name] = {nullptr, "", service_.now()};
    }
  }
  release_ended();
}

void AgentHub::release_ended() {
  const std::vector<std::string> ended(ended_.begin(), ended_.end());  // maybe_release() erases from ended_
  for (const auto& a : ended) maybe_release(a);
}

void AgentHub::unlink(const std::string& node) {
  auto l = links_.find(node);
  if (l == links_.end()) return;
  if (auto c = conns_.find(l->second.peer); l->second.peer && c != conns_.end()) {
    std::erase(c->second.nodes, node);
    if (c->second.nodes.empty()) c->second.peer->close();
  }
  links_.erase(l);
  spdlog::info("node {} removed: its agent connection no longer speaks for it", node);
}

void AgentHub::track_started(const store::JobRecord& r, PortsInUse& ports) {
  const std::string alloc = alloc_id(r.id, r.attempt);
  Track t;
  t.job = r.id;
  t.nodes = r.nodes;
  t.gpus = r.gpus;
  for (const auto& s : r.slices) t.gpus.push_back(s.gpu);
  if (!t.nodes.empty()) {
    std::set<int>& taken = ports[t.nodes.front()];
    t.master_port = master_port_for(r.id, r.attempt, taken);
    taken.insert(t.master_port);
  }
  auto& tr = tracks_[alloc] = std::move(t);
  if (!enabled()) return;
  for (const auto& n : tr.nodes)
    if (connected(n)) send_launch(alloc, tr, n);
}

int master_port_for(JobId job, int attempt, const std::set<int>& taken) {
  constexpr int kFirst = 20000, kCount = 30000;
  const int start = static_cast<int>((job * 16 + attempt) % kCount);
  for (int i = 0; i < kCount; ++i) {
    const int port = kFirst + (start + i) % kCount;
    if (!taken.count(port)) return port;
  }
  return kFirst + start;  // 30,000 live allocations led by one node: cannot happen (GPUs run out first)
}

AgentHub::PortsInUse AgentHub::ports_in_use() const {
  PortsInUse out;
  for (const auto& [alloc, t] : tracks_)
    if (!t.ended && !t.nodes.empty()) out[t.nodes.front()].insert(t.master_port);
  return out;
}

void AgentHub::send_launch(const std::string& alloc, const Track& t, const std::string& node) {
  const auto* r = service_.table().find(t.job);
  if (!r) return;
  const auto& c = service_.table().cluster();
  protocol::Launch order;
  for (const auto& name : t.nodes) {
    const auto id = c.find_node(name);
    protocol::NodeGpus slots{name, {}};
    for (auto g : t.gpus)
      if (c.node_of(g) == id) slots.gpus.push_back(static_cast<int>(g - c.node(id).first_gpu));
    order.nodes.push_back(std::move(slots));
  }
  std::string master = t.nodes.front();
  if (auto l = links_.find(master); l != links_.end() && l->second.peer)
    if (auto a = l->second.peer->remote_address(); !a.empty()) master = a;
  const int node_rank = static_cast<int>(std::find(t.nodes.begin(), t.nodes.end(), node) - t.nodes.begin());
  json spec = jobs::to_json(r->spec);
  // A task's index reaches its processes in RAILYARD_ARRAY_TASK_ID (spec.env); the fields that say so for
  // the scheduler stay here, so an agent of an earlier version, which reads specs strictly, launches it too.
  // So do dependencies other than afterok ("after"): met before any launch, and none of an agent's business.
  spec.erase("array_job");
  spec.erase("array_task");
  spec.erase("after");
  order.alloc = alloc;
  order.job = t.job;
  order.node = node;
  order.node_rank = node_rank;
  order.spec = std::move(spec);
  order.master_addr = master;
  order.master_port = t.master_port;
  order.time_limit_s = r->spec.time_limit_s;
  send_to_node(node, protocol::encode(order));
  Track& sent = tracks_.at(alloc);
  sent.launch_sent.insert(node);
  sent.launch_deadline = service_.now() + options_.launch_timeout_s;
  ++stats_.launches_total;
}

// Kills go to the connected outstanding nodes; restored ones not registered yet are fenced when they do.
// The hold itself came with the batch that ended the job (add_holds).
void AgentHub::end_track(const std::string& alloc, Track& t) {
  mark_ended(alloc, t);
  std::vector<std::string> nodes;
  for (const auto& n : t.nodes) {
    if (!outstanding(t, n)) continue;
    nodes.push_back(n);
    if (!connected(n)) continue;
    const auto* r = service_.table().find(t.job);
    const std::string why =
        r ? "job " + std::to_string(t.job) + " is " + std::string(jobs::to_string(r->state)) : "job ended";
    send_to_node(n, protocol::encode(protocol::Kill{alloc, n, why}));
  }
  if (!nodes.empty() && !service_.table().holds(alloc)) {  // ended by a batch add_holds did not see
    spdlog::warn("allocation {}: GPUs held in memory only", alloc);
    service_.table().hold_gpus({alloc, t.job, t.gpus, std::move(nodes)});
  }
}

void AgentHub::maybe_release(const std::string& alloc) {
  auto it = tracks_.find(alloc);
  if (it == tracks_.end() || !it->second.ended) return;
  for (const auto& n : it->second.nodes)
    if (outstanding(it->second, n)) return;
  Track t = std::move(it->second);
  tracks_.erase(it);  // before the commit: its observers (on_batch) see the allocation gone
  ended_.erase(alloc);
  if (!service_.table().holds(alloc)) return;
  WriteBatch b;
  b.released.push_back(alloc);
  if (auto s = commit(b); !s) {
    spdlog::error("release of allocation {}: commit failed: {}", alloc, s.error().message);
    mark_ended(alloc, tracks_.emplace(alloc, std::move(t)).first->second);  // tried again on the next tick
    return;
  }
  service_.request_pass();
}

void AgentHub::end_job(WriteBatch& b, const store::JobRecord& r, JobState end, std::optional<int> exit_code,
                       const std::string& reason, const std::string& actor, bool may_requeue) {
  JobTable::end_changes(b, r, end, exit_code, reason, actor, may_requeue, service_.now());
}

void AgentHub::on_launched(const protocol::Launched& m) {
  const std::string &alloc = m.alloc, &node = m.node;
  const auto* r = live_job(alloc);
  auto t = tracks_.find(alloc);
  if (!r || t == tracks_.end() || t->second.ended || !contains(t->second.nodes, node)) {
    const bool outside = r && t != tracks_.end() && !t->second.ended;
    const std::string why = outside ? "fenced: allocation " + alloc + " does not include " + node
                                    : "fenced: allocation " + alloc + " is not live";
    if (outside) spdlog::warn("agent:{}: launched for allocation {}, which does not include it: fenced", node, alloc);
    send_to_node(node, protocol::encode(protocol::Kill{alloc, node, why}));
    return;
  }
  t->second.launched.insert(node);
  WriteBatch b;
  running_if_launched(b, *r, t->second, alloc, node);
  if (auto s = commit_report(b); !s) spdlog::error("launched: commit failed: {}", s.error().message);
}

void AgentHub::running_if_launched(WriteBatch& b, const store::JobRecord& r, const Track& t,
                                   const std::string& alloc, const std::string& node) {
  const bool all = r.spec.launcher == jobs::Launcher::kMpi ? t.launched.count(t.nodes.front()) > 0
                                                           : t.launched.size() >= t.nodes.size();
  if (all) JobTable::running_changes(b, r, "agent:" + node, "running as " + alloc, service_.now());
}

void AgentHub::on_launch_progress(const protocol::LaunchProgress& m) {
  auto t = tracks_.find(m.alloc);
  const auto* r = live_job(m.alloc);
  if (!r || t == tracks_.end() || t->second.ended || !contains(t->second.nodes, m.node) ||
      t->second.launched.count(m.node))
    return;
  t->second.launch_deadline = service_.now() + options_.launch_timeout_s;
  service_.table().note_starting(r->id, m.node + ": " + m.message);
}

void AgentHub::on_launch_failed(const protocol::LaunchFailed& m) {
  const std::string &alloc = m.alloc, &node = m.node;
  const auto* r = live_job(alloc);
  auto t = tracks_.find(alloc);
  if (r && t != tracks_.end() && !contains(t->second.nodes, node))
    spdlog::warn("agent:{}: launch_failed for allocation {}, which does not include it: ignored", node, alloc);
  if (!r || t == tracks_.end() || !contains(t->second.nodes, node)) return;
  t->second.finished.insert(node);
  WriteBatch b;
  end_job(b, *r, JobState::kFailed, std::nullopt, "launch failed on " + node + ": " + m.message,
          "agent:" + node, true);
  if (auto s = commit(b); !s) spdlog::error("launch_failed: commit failed: {}", s.error().message);
}

// Reliable: the ack goes out only once the outcome is on disk (or when there is nothing to record).
void AgentHub::on_alloc_finished(Peer* from, const protocol::AllocFinished& m) {
  const std::string &alloc = m.alloc, &node = m.node, &state = m.state;
  const std::optional<int64_t> seq = m.seq;
  auto t = tracks_.find(alloc);
  if (t != tracks_.end() && !contains(t->second.nodes, node)) {  // not its node: no effect (acked as stale)
    spdlog::warn("agent:{}: alloc_finished for allocation {}, which does not include it: ignored", node, alloc);
    t = tracks_.end();
  }
  if (t != tracks_.end()) t->second.finished.insert(node);
  const auto* r = live_job(alloc);
  Status s = ok();
  if (r && t != tracks_.end() && !t->second.ended) {
    const Track& tr = t->second;
    const std::optional<int> exit_code = m.exit_code;
    const std::string actor = "agent:" + node;
    WriteBatch b;
    if (state == "completed") {
      const bool decides = r->spec.launcher == jobs::Launcher::kMpi ? node == tr.nodes.front()
                                                                    : tr.finished.size() >= tr.nodes.size();
      if (decides) end_job(b, *r, JobState::kCompleted, 0, "", actor, false);
    } else {
      std::string why = node + ": " + state;
      if (exit_code) why += ", exit code " + std::to_string(*exit_code);
      if (m.signal != 0) why += ", signal " + std::to_string(m.signal);
      if (!m.message.empty()) why += " (" + m.message + ")";
      // out_of_memory: the kernel killed a process at the job's own cgroup limit; the job's failure (never
      // requeued: it would run out again), the node stays up.
      const JobState end = state == "timeout"         ? JobState::kTimeout
                           : state == "out_of_memory" ? JobState::kOutOfMemory
                                                      : JobState::kFailed;
      end_job(b, *r, end, exit_code, why, actor, end == JobState::kFailed);
    }
    s = commit_report(b);
    if (!s) spdlog::error("alloc_finished: commit failed: {}", s.error().message);
  }
  // Acked once the outcome is on disk, also for a duplicate: the first report may still be in the log only.
  if (auto c = conns_.find(from); s && seq && c != conns_.end())
    service_.when_durable(
        [this, alive = std::weak_ptr<char>(alive_), peer = std::weak_ptr<Peer>(c->second.peer), seq = *seq] {
          if (auto p = peer.lock(); p && !alive.expired()) send(p.get(), protocol::encode(protocol::Ack{seq}));
        });
  maybe_release(alloc);
}

// Metrics of a live allocation from one of its nodes; a node outside it is refused (it would write another
// node's job's curve and time-to-train).
void AgentHub::on_metrics(const Conn& c, const protocol::Metrics& m) {
  const std::string& alloc = m.alloc;
  const auto* r = live_job(alloc);
  auto t = tracks_.find(alloc);
  if (!r || t == tracks_.end()) return;
  if (!contains(t->second.nodes, m.node))
    not_owned(c, "metrics of allocation " + alloc + ", which does not include node " + m.node);
  const int64_t now = service_.now();
  WriteBatch b;
  std::optional<double> ttt;
  const json& events = m.events;
  for (const auto& e : events) {
    if (!e.is_object()) continue;
    const std::string key = e.value("key", "");
    const double time = e.contains("t") && e["t"].is_number() ? e["t"].get<double>() : double(now);
    b.metrics.push_back({r->id, alloc, key, time, e.dump()});
    if (key == "run_start") t->second.run_start = time;
    // The agent's word about the job's MLPerf log (lines it could not read, why a run has no
    // time-to-train): the user reads it in the job's history (show, the dashboard).
    if (key == "mllog" && e.contains("what") && e["what"].is_string())
      b.events.push_back({job_subject(r->id), now, "agent:" + m.node, e["what"].get<std::string>().substr(0, 300)});
    if (key == "time_to_train" && e.contains("value") && e["value"].is_number())
      ttt = e["value"].get<double>();
    if (r->spec.target && key == r->spec.target->metric && t->second.run_start && e.contains("value") &&
        e["value"].is_number() && e["value"].get<double>() >= r->spec.target->value && !ttt &&
        !r->time_to_train_s)
      ttt = time - *t->second.run_start;
  }
  if (m.telemetry) b.metrics.push_back({r->id, alloc, "telemetry", double(now), m.telemetry->dump()});
  if (ttt && !r->time_to_train_s) {
    store::JobRecord u = *r;
    u.time_to_train_s = ttt;
    b.events.push_back({job_subject(r->id), now, "agent:" + m.node,
                        "time to train " + std::to_string(*ttt) + " s"});
    b.updates.push_back(std::move(u));
  }
  if (auto s = commit(b); !s) return spdlog::error("metrics: commit failed: {}", s.error().message);
  if (metrics_listener_ && !events.empty()) metrics_listener_(r->id, events);
}

void AgentHub::nodes_down(const std::vector<std::string>& names, const std::string& reason) {
  if (names.empty()) return;
  WriteBatch b(service_.table().nodes_down_changes(names, reason, service_.now()));
  spdlog::warn("{} nodes DOWN: {}", names.size(), reason);
  if (auto s = commit(b); !s) spdlog::error("node down: commit failed: {}", s.error().message);
}

// A STARTING job whose launch a connected node has not answered (launched, launch_failed or
// alloc_finished) within launch_timeout_s fails (or is requeued); the kill that follows holds its GPUs
// until that node confirms or goes DOWN. Disconnected nodes are left to the heartbeat timeout.
void AgentHub::launch_timeouts(int64_t now) {
  WriteBatch b;
  for (const auto& [alloc, t] : tracks_) {
    const auto* r = live_job(alloc);
    if (t.ended || t.restored || !r || r->state != JobState::kStarting || now < t.launch_deadline) continue;
    std::string silent;
    for (const auto& n : t.nodes)
      if (t.launch_sent.count(n) && !t.launched.count(n) && !t.finished.count(n) && connected(n))
        silent += (silent.empty() ? "" : ", ") + n;
    if (silent.empty()) continue;
    end_job(b, *r, JobState::kFailed, std::nullopt,
            "launch timeout: no answer from " + silent + " within " +
                std::to_string(options_.launch_timeout_s) + " s",
            "scheduler", true);
  }
  if (b.empty()) return;
  spdlog::warn("{} jobs failed a launch timeout", b.updates.size());
  if (auto s = commit(b); !s) spdlog::error("launch timeout: commit failed: {}", s.error().message);
}

void AgentHub::tick() {
  const int64_t now = service_.now();
  std::vector<std::string> down;
  for (auto& [name, l] : links_) {
    if (now - l.last_seen < options_.heartbeat_timeout_s) continue;
    const auto id = service_.table().cluster().find_node(name);
    if (id < 0 || service_.table().health(id) == sched::NodeHealth::kDown ||
        service_.table().health(id) == sched::NodeHealth::kRemoved)
      continue;
    if (l.peer) {
      auto c = conns_.find(l.peer);
      l.peer = nullptr;  // the node leaves the connection; the connection stays for its other nodes
      if (c != conns_.end()) {
        std::erase(c->second.nodes, name);
        // None left: close it. A healed partition would otherwise revive it, its agent never re-registers
        // and is never told to kill the allocations it still runs (two copies of a requeued job).
        if (c->second.nodes.empty()) c->second.peer->close();
      }
    }
    down.push_back(name);
  }
  nodes_down(down, "no heartbeat for " + std::to_string(options_.heartbeat_timeout_s) + " s");
  if (!grace_over_ && enabled() && now >= grace_end_) {
    // End of the reconcile grace: nodes whose agent never registered are DOWN (their jobs NODE_FAIL).
    grace_over_ = true;
    std::vector<std::string> missing;
    const auto& c = service_.table().cluster();
    for (topology::NodeId n = 0; n < c.node_count(); ++n)
      if (!links_.count(c.node(n).name) && service_.table().health(n) != sched::NodeHealth::kDown &&
          service_.table().health(n) != sched::NodeHealth::kRemoved)
        missing.push_back(c.node(n).name);
    nodes_down(missing, "no agent registered");
  }
  launch_timeouts(now);
  release_ended();
  for (auto p = pending_.begin(); p != pending_.end();) {
    if (p->second.deadline > now) {
      ++p;
      continue;
    }
    p->second.answer(504, {{"error", {{"code", "timeout"}, {"message", "the agent did not answer"}}}});
    p = pending_.erase(p);
  }
}

}  // namespace railyard::daemon
