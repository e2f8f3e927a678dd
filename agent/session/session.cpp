#include "agent/session/session.hpp"

#include <pwd.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <optional>

#include "agent/launch/launcher.hpp"
#include "agent/launch/plan.hpp"
#include "agent/launch/proc.hpp"
#include "agent/launch/process.hpp"
#include "agent/launch/supervisor.hpp"
#include "agent/session/session_internal.hpp"
#include "agent/state/alloc_state.hpp"
#include "agent/streams/tailer.hpp"
#include "agent/streams/telemetry.hpp"
#include "common/json_text.hpp"
#include "common/protocol/key_file.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool safe_name(const std::string& s) {
  return !s.empty() && s.find('/') == std::string::npos && s != "." && s != ".." && s.front() != '.';
}

}  // namespace

Session::Session(SessionOptions options)
    : options_(std::move(options)),
      finished_(options_.state_dir),
      groups_(std::make_unique<GroupLiveness>()) {}

Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::create(SessionOptions options) {
  if (options.nodes.empty()) return invalid("no node to host");
  for (const auto& name : options.nodes)
    if (!safe_name(name)) return invalid("bad node name '" + name + "'");
  std::error_code ec;
  fs::create_directories(options.state_dir / "nodes", ec);
  if (ec) return internal_error("cannot create " + options.state_dir.string() + ": " + ec.message());
  std::unique_ptr<Session> s(new Session(std::move(options)));
  const SessionOptions& o = s->options_;
  if (o.containers) {
    ContainerOptions co = o.container;
    if (co.state_dir.empty()) co.state_dir = o.state_dir;
    auto engine = detect_container_runtime(co);
    if (engine) {
      s->containers_ = std::move(*engine);
    } else {
      s->containers_why_ = engine.error().message;
    }
  } else {
    s->containers_why_ = "disabled (--no-containers)";
  }
  s->log("containers: " + (s->containers_ ? s->containers_->describe() : "none (" + s->containers_why_ + ")"));
  for (const auto& name : o.nodes) {
    DiscoveryOptions d;
    d.node_name = name;
    d.emulate = o.emulate;
    auto inventory = discover(d);
    if (!inventory) return inventory.error();
    auto n = std::make_unique<Node>();
    n->name = name;
    n->dir = o.state_dir / "nodes" / name;
    n->inventory = std::move(*inventory);
    fs::create_directories(n->dir, ec);
    n->allocs_store = std::make_shared<AllocStore>(n->dir);
    LauncherOptions lo;
    lo.state_dir = n->dir;
    lo.allocs = n->allocs_store;
    lo.allow_root_jobs = o.allow_root_jobs;
    lo.cgroups = o.cgroups;
    lo.isolation = o.isolation;
    lo.cgroup.parent = o.cgroup_parent;
    lo.job_umask = o.job_umask;
    lo.exec_helper = o.exec_helper;
    lo.mpirun = o.mpirun;
    lo.mpi_output_dir = o.mpi_output_dir.empty() ? o.state_dir / "mpi-output" : o.mpi_output_dir;
    lo.containers = s->containers_;
    lo.log = [sp = s.get()](const std::string& text) { sp->log(text); };
    n->launcher = std::make_unique<Launcher>(lo, n->inventory);
    if (s->nodes_.empty()) s->log(n->launcher->cgroup_summary());  // the same for every node it hosts
    // Fail closed at start rather than take jobs only to refuse each one.
    if (o.cgroups && o.isolation == IsolationMode::kRequired && !n->launcher->isolates())
      return Error{ErrorCode::kUnavailable, "job isolation is required but " + n->launcher->cgroup_summary() +
                                                 "; start the agent with --isolation best-effort to run jobs "
                                                 "without limits, or --no-cgroups"};
    n->supervisor =
        std::make_unique<Supervisor>(SupervisorOptions{n->allocs_store, o.grace, std::chrono::milliseconds(20)});
    n->health = std::make_unique<HealthChecker>(o.health, n->inventory, n->dir);
    auto recovered = n->allocs_store->recover();
    // Allocations whose processes all ended while no agent watched them: their end is reported (lost), or
    // the scheduler would count them running until the job's time limit.
    for (const auto& alloc : recovered.removed) {
      s->log("allocation " + alloc + " on " + name + " ended while the agent was away");
      s->finished_.add(protocol::encode(protocol::AllocFinished{
          alloc, job_of_alloc(alloc), name, "lost", -1, 0, "its processes ended while the agent was not running", {}}));
    }
    for (auto& rec : recovered.alive) {
      Alloc a;
      a.job = rec.job_id;
      a.user = rec.user;  // "" in an older agent's record: no exec order is taken for it
      a.gpus = rec.gpus;
      for (const auto& r : rec.ranks) {
        a.pgids.push_back(r.pgid);
        if (r.rank != 0) continue;
        // Read again from the start (the tracker needs run_start), through the allocation directory: the
        // name is the job's to replace while the agent was away.
        auto dir = n->launcher->open_alloc_dir(rec.job_id, rec.alloc_id);
        auto log = dir ? dir->open_read("rank-0.out") : Result<Fd>(dir.error());
        if (!log) {
          s->log("not following rank 0's output of " + rec.alloc_id + ": " + log.error().message);
          continue;
        }
        a.tailer.emplace(std::move(*log));
        a.tracker.emplace();
      }
      s->log("adopted " + rec.alloc_id + " on " + name + " (" + std::to_string(rec.ranks.size()) +
             " processes)");
      n->allocs.emplace(rec.alloc_id, std::move(a));
      n->supervisor->adopt(std::move(rec));
    }
    s->reap_orphan_containers(*n);
    s->nodes_.push_back(std::move(n));
  }
  if (std::ifstream in(o.state_dir / "epoch"); in) in >> s->epoch_;
  if (!o.key_files.empty()) {
    auto keys = protocol::read_key_files(o.key_files, o.nodes);
    if (!keys) return keys.error();
    s->keys_ = std::move(*keys);
  }
  return s;
}

bool Session::accept_epoch(const json& msg, const std::string& type) {
  auto it = msg.find("epoch");
  if (it == msg.end() || !it->is_number_integer()) return true;  // a scheduler without HA
  const int64_t epoch = it->get<int64_t>();
  if (epoch < epoch_) {
    ++stale_refused_;
    if (type == "hello") stale_leader_ = true;
    log("refused '" + type + "' from epoch " + std::to_string(epoch) + ": epoch " + std::to_string(epoch_) +
        " leads (a deposed scheduler)");
    answer_error("stale_epoch", "epoch " + std::to_string(epoch) + " is older than " + std::to_string(epoch_));
    return false;
  }
  if (epoch > epoch_) {
    epoch_ = epoch;
    const fs::path path = options_.state_dir / "epoch", tmp = options_.state_dir / "epoch.tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << epoch_ << "\n";
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) log("cannot write " + path.string() + ": " + ec.message());
  }
  return true;
}

size_t Session::allocations() const {
  size_t total = 0;
  for (const auto& n : nodes_) total += n->supervisor->size();
  return total;
}

void Session::log(const std::string& text) const {
  if (options_.log)
    options_.log(text);
  else
    std::cerr << "railyard-agent: " << text << "\n";
}

void Session::send(const json& msg) {
  if (send_) send_(msg.dump(-1, ' ', false, json::error_handler_t::replace));
}

Session::Node* Session::node(const std::string& name) {
  for (auto& n : nodes_)
    if (n->name == name) return n.get();
  return nullptr;
}

void Session::connected(Send send) {
  send_ = std::move(send);
  registered_ = false;
  stale_leader_ = false;
  agent_challenge_.clear();
  verifier_.reset();
}

void Session::disconnected() {
  send_ = nullptr;
  registered_ = false;
  agent_challenge_.clear();
  verifier_.reset();
}

void Session::answer_error(const std::string& code, const std::string& message_text) {
  send(protocol::encode(protocol::Error{code, message_text}));
}

const std::string& Session::key_of(const std::string& node) const {
  auto it = keys_.find(node);
  return it != keys_.end() ? it->second : options_.secret;
}

void Session::reload_keys() {
  if (options_.key_files.empty()) return;
  auto keys = protocol::read_key_files(options_.key_files, options_.nodes);
  if (!keys) return log(keys.error().message + "; keeping the keys read before");
  keys_ = std::move(*keys);
}

void Session::receive(std::string_view text) {
  auto parsed = parse_json_bounded(text);
  if (!parsed) return answer_error("bad_message", parsed.error().message);
  json msg = std::move(*parsed);
  if (!msg.is_object() || !msg.contains("type") || !msg["type"].is_string())
    return answer_error("bad_message", "not a JSON object with a type");
  const std::string type = msg["type"];
  if (!authentic(text, msg, type)) return;
  if (!accept_epoch(msg, type)) return;
  try {
    if (type == "hello") return on_hello(msg);
    if (type == "registered") return on_registered(msg);
    if (type == "error") {
      const auto e = msg.get<protocol::Error>();
      return log("scheduler error " + e.code + ": " + e.message);
    }
    if (!registered_) return answer_error("not_registered", "'" + type + "' before registration");
    if (type == "launch") return on_launch(msg);
    if (type == "kill") {
      const auto k = msg.get<protocol::Kill>();
      return on_kill(k.alloc, k.node, k.reason);
    }
    if (type == "exec") return on_exec(msg);
    if (type == "logs") return on_logs(msg);
    if (type == "images") return on_images(msg);
    if (type == "ack") return finished_.ack(msg.get<protocol::Ack>().seq);
    answer_error("unknown_type", "unknown message type '" + type + "'");
  } catch (const json::exception& e) {
    answer_error("bad_message", type + ": " + e.what());
  }
}

std::string Session::sealing_key(const json& registered) const {
  if (keys_.empty()) return options_.secret;
  auto names = registered.find("nodes");
  if (names == registered.end() || !names->is_array()) return {};
  for (const auto& name : *names)
    if (name.is_string())
      if (auto k = keys_.find(name.get<std::string>()); k != keys_.end()) return k->second;
  return {};
}

bool Session::authentic(std::string_view text, const json& msg, const std::string& type) {
  std::string why;
  if (verifier_) {
    auto s = verifier_->verify(text, msg);
    if (s) return true;
    why = s.error().message;
  } else if (type == "registered") {
    const std::string key = sealing_key(msg);
    if (agent_challenge_.empty()) {
      why = "no register of ours on this connection";
    } else if (key.empty()) {
      why = "it accepts none of our nodes, so nothing proves it holds a key";
    } else {
      verifier_.emplace(protocol::session_key(key, challenge_, agent_challenge_, options_.agent_id));
      auto s = verifier_->verify(text, msg);
      if (s) return true;
      verifier_.reset();
      why = s.error().message;
    }
  } else {
    return true;  // hello; error (logged only); orders are answered not_registered
  }
  ++unverified_refused_;
  log("refused '" + type + "' from the scheduler: not sealed with this connection's key (" + why +
      "); nothing done");
  answer_error("unauthorized", "'" + type + "' refused: " + why);
  return false;
}

protocol::RegisterNode Session::node_entry(const Node& n) const {
  const Inventory& inv = n.inventory;
  json hcas = json::array();
  for (const auto& h : inv.hcas) hcas.push_back(h.name);
  protocol::RegisterNode entry;
  entry.name = n.name;
  entry.inventory = {{"profile", inv.profile}, {"gpu_type", inv.gpu_type},
                     {"gpus", inv.gpu_count},  {"gpu_memory_mib", inv.gpu_memory_bytes >> 20},
                     {"hcas", hcas},           {"source", inv.source}};
  for (const auto& rec : n.supervisor->records()) {
    protocol::RunningAlloc run{rec.alloc_id, rec.job_id, {}, {}};
    for (const auto& r : rec.ranks) {
      run.ranks.push_back(r.rank);
      run.pids.push_back(r.pid);
    }
    entry.running.push_back(std::move(run));
  }
  const HealthStatus& h = n.health->status();
  entry.health = protocol::HealthState{h.ok, h.reason};
  const uid_t self = ::geteuid();
  const struct passwd* me = ::getpwuid(self);
  entry.runs_as = protocol::RunsAs{self, me != nullptr ? me->pw_name : std::to_string(self), self == 0};
  if (containers_) entry.containers = containers_->describe();
  return entry;
}

// With node keys every node entry carries its own MAC (one key speaks only for its node); with the
// cluster secret one MAC covers them all.
void Session::on_hello(const json& msg) {
  const auto hello = msg.get<protocol::Hello>();
  if (!protocol::valid_challenge(hello.challenge)) {
    log("hello refused: its challenge is not 64 lower-case hex digits; not registering");
    return answer_error("bad_message", "hello: challenge must be 64 lower-case hex digits");
  }
  reload_keys();
  registered_ = false;
  verifier_.reset();
  challenge_ = hello.challenge;
  agent_challenge_ = protocol::random_hex(protocol::kChallengeBytes);
  protocol::Register reg;
  reg.agent = options_.agent_id;
  reg.agent_challenge = agent_challenge_;
  for (const auto& n : nodes_) {
    protocol::RegisterNode entry = node_entry(*n);
    if (!keys_.empty()) entry.mac = protocol::node_mac(key_of(n->name), hello.challenge, reg.agent, n->name);
    reg.nodes.push_back(std::move(entry));
  }
  reg.finished = finished_.pending();
  if (keys_.empty()) reg.mac = register_mac(options_.secret, hello.challenge, options_.agent_id, options_.nodes);
  send(protocol::encode(reg));
}

void Session::on_registered(const json& msg) {
  const auto answer = msg.get<protocol::Registered>();
  registered_ = true;
  heartbeat_ = std::chrono::seconds(std::max(1, answer.heartbeat_s));
  next_heartbeat_ = {};
  for (const auto& r : answer.rejected) log("node " + r.name + " rejected: " + r.reason);
  for (const auto& k : answer.kill) on_kill(k.alloc, k.node, k.reason.empty() ? "fenced" : k.reason);
  for (const auto& n : nodes_) {
    const HealthStatus& h = n->health->status();
    if (!h.ok) send(protocol::encode(protocol::Health{n->name, false, h.reason}));
  }
}

void Session::cancel_all(const std::string& reason) {
  for (auto& n : nodes_)
    for (const auto& rec : n->supervisor->records()) on_kill(rec.alloc_id, n->name, reason);
}

void Session::tick(Clock::time_point now) {
  if (registered_ && now >= next_heartbeat_) {
    send(protocol::encode(protocol::Heartbeat{
        options_.nodes, std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()}));
    next_heartbeat_ = now + heartbeat_;
  }
  groups_->refresh();
  poll_engine_tasks();
  if (containers_) run_removals(now);
  report_pull_progress(now);
  for (auto& n : nodes_) {
    poll_node(*n, now);
    if (auto h = n->health->poll(now); h && registered_) send(protocol::encode(protocol::Health{n->name, h->ok, h->reason}));
  }
}

}  // namespace railyard::agent
