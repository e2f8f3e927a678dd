#include "common/protocol/messages.hpp"

#include "common/protocol/fields.hpp"

namespace railyard::protocol {

using field::get;
using field::get_or;
using field::opt;

std::vector<std::string> Register::names() const {
  std::vector<std::string> out;
  for (const auto& n : nodes) out.push_back(n.name);
  return out;
}

void to_json(json& j, const Hello& m) { j = {{"challenge", m.challenge}, {"server", m.server}}; }
void from_json(const json& j, Hello& m) {
  m.challenge = get<std::string>(j, "challenge");
  m.server = get_or<std::string>(j, "server", "");
}

void to_json(json& j, const HealthState& m) { j = {{"ok", m.ok}, {"reason", m.reason}}; }
void from_json(const json& j, HealthState& m) {
  m.ok = get<bool>(j, "ok");
  m.reason = get_or<std::string>(j, "reason", "");
}

void to_json(json& j, const RunningAlloc& m) {
  j = {{"alloc", m.alloc}, {"job", m.job}, {"ranks", m.ranks}, {"pids", m.pids}};
}
void from_json(const json& j, RunningAlloc& m) {
  m.alloc = get<std::string>(j, "alloc");
  m.job = get_or<int64_t>(j, "job", 0);
  m.ranks = get_or<std::vector<int>>(j, "ranks", {});
  m.pids = get_or<std::vector<int64_t>>(j, "pids", {});
}

void to_json(json& j, const RunsAs& m) { j = {{"uid", m.uid}, {"user", m.user}, {"switch_users", m.switch_users}}; }
void from_json(const json& j, RunsAs& m) {
  m.uid = get<int64_t>(j, "uid");
  m.user = get_or<std::string>(j, "user", "");
  m.switch_users = get<bool>(j, "switch_users");
}

void to_json(json& j, const RegisterNode& m) {
  j = {{"name", m.name}, {"inventory", m.inventory}, {"running", m.running}};
  if (m.health) j["health"] = *m.health;
  if (m.mac) j["mac"] = *m.mac;
  if (m.runs_as) j["runs_as"] = *m.runs_as;
  if (m.containers) j["containers"] = *m.containers;
}
void from_json(const json& j, RegisterNode& m) {
  m.name = get<std::string>(j, "name");
  m.inventory = get_or<json>(j, "inventory", json::object());
  if (!m.inventory.is_object()) field::wrong(j, "inventory", "an object");
  m.running = get_or<std::vector<RunningAlloc>>(j, "running", {});
  m.health = opt<HealthState>(j, "health");
  m.mac = opt<std::string>(j, "mac");
  m.runs_as = opt<RunsAs>(j, "runs_as");
  m.containers = opt<std::string>(j, "containers");
}

void to_json(json& j, const Register& m) {
  j = {{"agent", m.agent}, {"nodes", m.nodes}, {"finished", m.finished}};
  if (m.mac) j["mac"] = *m.mac;
  if (m.agent_challenge) j["agent_challenge"] = *m.agent_challenge;
}
void from_json(const json& j, Register& m) {
  m.agent = get<std::string>(j, "agent");
  m.nodes = get<std::vector<RegisterNode>>(j, "nodes");
  m.finished = get_or<std::vector<json>>(j, "finished", {});
  m.mac = opt<std::string>(j, "mac");
  m.agent_challenge = opt<std::string>(j, "agent_challenge");
}

void to_json(json& j, const Rejected& m) { j = {{"name", m.name}, {"reason", m.reason}}; }
void from_json(const json& j, Rejected& m) {
  m.name = get<std::string>(j, "name");
  m.reason = get_or<std::string>(j, "reason", "");
}

void to_json(json& j, const Kill& m) { j = {{"alloc", m.alloc}, {"node", m.node}, {"reason", m.reason}}; }
void from_json(const json& j, Kill& m) {
  m.alloc = get<std::string>(j, "alloc");
  m.node = get<std::string>(j, "node");
  m.reason = get_or<std::string>(j, "reason", "");
}

void to_json(json& j, const Registered& m) {
  j = {{"heartbeat_s", m.heartbeat_s}, {"nodes", m.nodes}, {"rejected", m.rejected}, {"kill", m.kill}};
}
void from_json(const json& j, Registered& m) {
  m.heartbeat_s = get_or<int>(j, "heartbeat_s", 5);
  m.nodes = get_or<std::vector<std::string>>(j, "nodes", {});
  m.rejected = get_or<std::vector<Rejected>>(j, "rejected", {});
  m.kill = get_or<std::vector<Kill>>(j, "kill", {});
}

void to_json(json& j, const Heartbeat& m) { j = {{"nodes", m.nodes}, {"time", m.time}}; }
void from_json(const json& j, Heartbeat& m) {
  m.nodes = get_or<std::vector<std::string>>(j, "nodes", {});
  m.time = get_or<double>(j, "time", 0);
}

void to_json(json& j, const RankPid& m) { j = {{"rank", m.rank}, {"pid", m.pid}}; }
void from_json(const json& j, RankPid& m) {
  m.rank = get<int>(j, "rank");
  m.pid = get<int64_t>(j, "pid");
}

void to_json(json& j, const Launched& m) {
  j = {{"alloc", m.alloc}, {"job", m.job}, {"node", m.node}, {"ranks", m.ranks}};
}
void from_json(const json& j, Launched& m) {
  m.alloc = get<std::string>(j, "alloc");
  m.job = get<int64_t>(j, "job");
  m.node = get<std::string>(j, "node");
  m.ranks = get_or<std::vector<RankPid>>(j, "ranks", {});
}

void to_json(json& j, const LaunchFailed& m) {
  j = {{"alloc", m.alloc}, {"job", m.job}, {"node", m.node}, {"message", m.message}};
}
void from_json(const json& j, LaunchFailed& m) {
  m.alloc = get<std::string>(j, "alloc");
  m.job = get<int64_t>(j, "job");
  m.node = get<std::string>(j, "node");
  m.message = get_or<std::string>(j, "message", "");
}

void to_json(json& j, const AllocFinished& m) {
  j = {{"alloc", m.alloc}, {"job", m.job},       {"node", m.node},
       {"state", m.state}, {"signal", m.signal}, {"message", m.message}};
  j["exit_code"] = m.exit_code ? json(*m.exit_code) : json();
  if (m.seq) j["seq"] = *m.seq;
}
void from_json(const json& j, AllocFinished& m) {
  m.alloc = get<std::string>(j, "alloc");
  m.job = get<int64_t>(j, "job");
  m.node = get<std::string>(j, "node");
  m.state = get<std::string>(j, "state");
  m.exit_code = opt<int>(j, "exit_code");
  m.signal = get_or<int>(j, "signal", 0);
  m.message = get_or<std::string>(j, "message", "");
  m.seq = opt<int64_t>(j, "seq");
}

void to_json(json& j, const Metrics& m) {
  j = {{"alloc", m.alloc}, {"job", m.job}, {"node", m.node}, {"events", m.events}, {"malformed", m.malformed}};
  if (m.telemetry) j["telemetry"] = *m.telemetry;
}
void from_json(const json& j, Metrics& m) {
  m.alloc = get<std::string>(j, "alloc");
  m.job = get<int64_t>(j, "job");
  m.node = get<std::string>(j, "node");
  m.events = get_or<json>(j, "events", json::array());
  if (!m.events.is_array()) field::wrong(j, "events", "an array");
  m.telemetry = opt<json>(j, "telemetry");
  if (m.telemetry && !m.telemetry->is_object()) field::wrong(j, "telemetry", "an object");
  m.malformed = get_or<int>(j, "malformed", 0);
}

void to_json(json& j, const Health& m) { j = {{"node", m.node}, {"ok", m.ok}, {"reason", m.reason}}; }
void from_json(const json& j, Health& m) {
  m.node = get<std::string>(j, "node");
  m.ok = get<bool>(j, "ok");
  m.reason = get_or<std::string>(j, "reason", "");
}

void to_json(json& j, const LogChunk& m) {
  j = {{"req", m.req},       {"alloc", m.alloc}, {"rank", m.rank}, {"stream", m.stream},
       {"offset", m.offset}, {"data", m.data},   {"size", m.size}};
  if (m.next_offset) j["next_offset"] = *m.next_offset;
  if (m.error) j["error"] = *m.error;
}
void from_json(const json& j, LogChunk& m) {
  m.req = get<json>(j, "req");
  m.alloc = get_or<std::string>(j, "alloc", "");
  m.rank = get_or<int>(j, "rank", 0);
  m.stream = get_or<std::string>(j, "stream", "out");
  m.offset = get_or<int64_t>(j, "offset", 0);
  m.data = get_or<std::string>(j, "data", "");
  m.size = get_or<int64_t>(j, "size", 0);
  m.next_offset = opt<int64_t>(j, "next_offset");
  m.error = opt<std::string>(j, "error");
}

void to_json(json& j, const ExecStarted& m) { j = {{"req", m.req}, {"pid", m.pid}}; }
void from_json(const json& j, ExecStarted& m) {
  m.req = get<json>(j, "req");
  m.pid = get_or<int64_t>(j, "pid", 0);
}

void to_json(json& j, const ExecFailed& m) { j = {{"req", m.req}, {"message", m.message}}; }
void from_json(const json& j, ExecFailed& m) {
  m.req = get<json>(j, "req");
  m.message = get_or<std::string>(j, "message", "");
}

void to_json(json& j, const NodeGpus& m) { j = {{"name", m.name}, {"gpus", m.gpus}}; }
void from_json(const json& j, NodeGpus& m) {
  m.name = get<std::string>(j, "name");
  m.gpus = get<std::vector<int>>(j, "gpus");
}

void to_json(json& j, const Launch& m) {
  j = {{"alloc", m.alloc}, {"job", m.job},   {"node", m.node},
       {"node_rank", m.node_rank}, {"nodes", m.nodes}, {"spec", m.spec}};
  if (m.master_addr) j["master_addr"] = *m.master_addr;
  if (m.master_port) j["master_port"] = *m.master_port;
  if (m.time_limit_s) j["time_limit_s"] = *m.time_limit_s;
}
void from_json(const json& j, Launch& m) {
  m.alloc = get<std::string>(j, "alloc");
  m.job = get<int64_t>(j, "job");
  m.node = get<std::string>(j, "node");
  m.node_rank = get<int>(j, "node_rank");
  m.nodes = get<std::vector<NodeGpus>>(j, "nodes");
  m.spec = get<json>(j, "spec");
  m.master_addr = opt<std::string>(j, "master_addr");
  m.master_port = opt<int>(j, "master_port");
  m.time_limit_s = opt<int64_t>(j, "time_limit_s");
}

void to_json(json& j, const Exec& m) {
  j = {{"req", m.req}, {"alloc", m.alloc}, {"node", m.node}, {"argv", m.argv}};
}
void from_json(const json& j, Exec& m) {
  m.req = get<json>(j, "req");
  m.alloc = get<std::string>(j, "alloc");
  m.node = get<std::string>(j, "node");
  m.argv = get<std::vector<std::string>>(j, "argv");
}

void to_json(json& j, const Logs& m) {
  j = {{"req", m.req},       {"alloc", m.alloc},   {"node", m.node}, {"rank", m.rank},
       {"stream", m.stream}, {"offset", m.offset}, {"max_bytes", m.max_bytes}};
}
void from_json(const json& j, Logs& m) {
  m.req = get<json>(j, "req");
  m.alloc = get<std::string>(j, "alloc");
  m.node = get<std::string>(j, "node");
  m.rank = get<int>(j, "rank");
  m.stream = get<std::string>(j, "stream");
  m.offset = get<int64_t>(j, "offset");
  m.max_bytes = get_or<int64_t>(j, "max_bytes", 0);
}

void to_json(json& j, const Images& m) {
  j = {{"req", m.req}, {"node", m.node}};
  if (m.pull) j["pull"] = *m.pull;
}
void from_json(const json& j, Images& m) {
  m.req = get<json>(j, "req");
  m.node = get<std::string>(j, "node");
  m.pull = opt<std::string>(j, "pull");
}

void to_json(json& j, const ImageList& m) {
  j = {{"req", m.req}, {"node", m.node}, {"images", m.images}, {"pulling", m.pulling}};
  if (m.error) j["error"] = *m.error;
}
void from_json(const json& j, ImageList& m) {
  m.req = get<json>(j, "req");
  m.node = get_or<std::string>(j, "node", "");
  m.images = get_or<json>(j, "images", json::array());
  if (!m.images.is_array()) field::wrong(j, "images", "an array");
  m.pulling = get_or<std::vector<std::string>>(j, "pulling", {});
  m.error = opt<std::string>(j, "error");
}

void to_json(json& j, const LaunchProgress& m) {
  j = {{"alloc", m.alloc}, {"job", m.job}, {"node", m.node}, {"message", m.message}};
}
void from_json(const json& j, LaunchProgress& m) {
  m.alloc = get<std::string>(j, "alloc");
  m.job = get_or<int64_t>(j, "job", 0);
  m.node = get<std::string>(j, "node");
  m.message = get_or<std::string>(j, "message", "");
}

void to_json(json& j, const Ack& m) { j = {{"seq", m.seq}}; }
void from_json(const json& j, Ack& m) { m.seq = get<int64_t>(j, "seq"); }

void to_json(json& j, const Error& m) { j = {{"code", m.code}, {"message", m.message}}; }
void from_json(const json& j, Error& m) {
  m.code = get_or<std::string>(j, "code", "?");
  m.message = get_or<std::string>(j, "message", "");
}

std::string alloc_id(int64_t job, int attempt) { return std::to_string(job) + "." + std::to_string(attempt); }

int64_t job_of_alloc(const std::string& alloc) {
  try {
    size_t used = 0;
    const long long job = std::stoll(alloc, &used);
    return used > 0 && (used == alloc.size() || alloc[used] == '.') ? job : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace railyard::protocol
