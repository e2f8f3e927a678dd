// The messages of the agent protocol (scheduler/PROTOCOL.md), one struct each, shared by the scheduler and
// the agent. to_json writes the fields (encode() adds "type" and "v"); from_json reads them strictly
// (fields.hpp): a missing required field or a mistyped one throws a nlohmann::json exception naming the
// field. Fields the protocol marks optional are std::optional or have the default the protocol gives.
// Unknown fields are ignored (a newer peer may add some), and so are "type", "v" and "epoch", which the
// receiver's dispatcher reads.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace railyard::protocol {

using nlohmann::json;

inline constexpr int kVersion = 1;
inline constexpr size_t kMaxFrameBytes = 1 << 20;
inline constexpr size_t kMaxNodesPerConnection = 4096;

// {"type": T::kType, "v": 1, ...fields}
template <class T>
json encode(const T& m) {
  json j = m;
  j["type"] = T::kType;
  j["v"] = kVersion;
  return j;
}

// --- handshake ---------------------------------------------------------------------------------------

struct Hello {
  static constexpr const char* kType = "hello";
  std::string challenge;
  std::string server;
};

struct HealthState {  // register.nodes[].health
  bool ok = true;
  std::string reason;
};

struct RunningAlloc {  // register.nodes[].running[]
  std::string alloc;
  int64_t job = 0;
  std::vector<int> ranks;
  std::vector<int64_t> pids;
};

// register.nodes[].runs_as: who the agent runs as. An agent that is not root cannot switch users: it runs a
// job only for its own user and refuses every other user's (launch_failed), and says so here so the
// scheduler can refuse such jobs at submit. Absent (older agents): treated as able to switch users.
struct RunsAs {
  int64_t uid = 0;
  std::string user;
  bool switch_users = true;
};

struct RegisterNode {
  std::string name;
  json inventory = json::object();  // discovery's result; the scheduler reads "gpus"
  std::vector<RunningAlloc> running;
  std::optional<HealthState> health;
  std::optional<std::string> mac;  // per-node keys: node_mac() with this node's key
  std::optional<RunsAs> runs_as;
  // The container engine this node runs image jobs with ("podman 4.3.1 (runc)"); absent: none (no engine,
  // or it could not start a container when the agent started). Image jobs are placed only where present.
  std::optional<std::string> containers;
};

struct Register {
  static constexpr const char* kType = "register";
  std::string agent;
  std::vector<RegisterNode> nodes;
  std::vector<json> finished;      // alloc_finished reports, each read as AllocFinished when applied
  std::optional<std::string> mac;  // cluster secret: register_mac() over every node name
  // The agent's own fresh challenge (random_hex(32)), half of the connection's session key (mac.hpp): the
  // scheduler seals `registered` and every later message with it. Absent (older agents): "".
  std::optional<std::string> agent_challenge;
  std::vector<std::string> names() const;
};

struct Rejected {
  std::string name;
  std::string reason;
};

struct Kill {  // also registered.kill[] (then without type)
  static constexpr const char* kType = "kill";
  std::string alloc;
  std::string node;
  std::string reason;
};

struct Registered {
  static constexpr const char* kType = "registered";
  int heartbeat_s = 5;
  std::vector<std::string> nodes;
  std::vector<Rejected> rejected;
  std::vector<Kill> kill;
};

// --- agent -> scheduler ------------------------------------------------------------------------------

struct Heartbeat {
  static constexpr const char* kType = "heartbeat";
  std::vector<std::string> nodes;
  double time = 0;
};

struct RankPid {
  int rank = 0;
  int64_t pid = 0;
};

struct Launched {
  static constexpr const char* kType = "launched";
  std::string alloc;
  int64_t job = 0;
  std::string node;
  std::vector<RankPid> ranks;
};

struct LaunchFailed {
  static constexpr const char* kType = "launch_failed";
  std::string alloc;
  int64_t job = 0;
  std::string node;
  std::string message;
};

struct AllocFinished {
  static constexpr const char* kType = "alloc_finished";
  std::string alloc;
  int64_t job = 0;
  std::string node;
  std::string state;  // completed failed cancelled timeout lost
  std::optional<int> exit_code;
  int signal = 0;
  std::string message;
  std::optional<int64_t> seq;  // set by the agent's FinishedStore; acked by the scheduler
};

struct Metrics {
  static constexpr const char* kType = "metrics";
  std::string alloc;
  int64_t job = 0;
  std::string node;
  json events = json::array();  // MLLOG events, each an object with "key"
  std::optional<json> telemetry;
  int malformed = 0;
};

struct Health {
  static constexpr const char* kType = "health";
  std::string node;
  bool ok = true;
  std::string reason;
};

// `req` names a request (logs, exec) and is echoed as given in the answer: any JSON value for the agent; the
// scheduler sends integers and reads its answers' as integers.
struct LogChunk {
  static constexpr const char* kType = "log_chunk";
  json req;
  std::string alloc;
  int rank = 0;
  std::string stream = "out";
  int64_t offset = 0;
  std::string data;
  int64_t size = 0;
  std::optional<int64_t> next_offset;
  std::optional<std::string> error;
};

// The answer to `images`: the engine's cache ([{"id", "names", "size_bytes", "created"}]) and the images
// being pulled; `error` when the node has no engine or listing failed.
struct ImageList {
  static constexpr const char* kType = "image_list";
  json req;
  std::string node;
  json images = json::array();
  std::vector<std::string> pulling;
  std::optional<std::string> error;
};

// While a launch waits for its image: what the pull has done, every few seconds. The scheduler shows it as
// the job's reason and counts it as an answer to the launch order (a pull may take longer than the launch
// timeout).
struct LaunchProgress {
  static constexpr const char* kType = "launch_progress";
  std::string alloc;
  int64_t job = 0;
  std::string node;
  std::string message;
};

struct ExecStarted {
  static constexpr const char* kType = "exec_started";
  json req;
  int64_t pid = 0;
};

struct ExecFailed {
  static constexpr const char* kType = "exec_failed";
  json req;
  std::string message;
};

// --- scheduler -> agent ------------------------------------------------------------------------------

struct NodeGpus {
  std::string name;
  std::vector<int> gpus;  // local indices
};

struct Launch {
  static constexpr const char* kType = "launch";
  std::string alloc;
  int64_t job = 0;
  std::string node;
  int node_rank = 0;
  std::vector<NodeGpus> nodes;
  json spec;  // the job spec as in the API (jobs/spec_json.hpp reads it)
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
  std::optional<int64_t> time_limit_s;
};

struct Exec {
  static constexpr const char* kType = "exec";
  json req;
  std::string alloc;
  std::string node;
  std::vector<std::string> argv;
};

// The engine's image cache of one node (railyard node images), and with `pull` set, a prefetch: the agent
// starts pulling that image (as for a job) and answers at once with the cache as it is.
struct Images {
  static constexpr const char* kType = "images";
  json req;
  std::string node;
  std::optional<std::string> pull;
};

struct Logs {
  static constexpr const char* kType = "logs";
  json req;
  std::string alloc;
  std::string node;
  int rank = 0;
  std::string stream = "out";
  int64_t offset = 0;
  int64_t max_bytes = 0;
};

struct Ack {
  static constexpr const char* kType = "ack";
  int64_t seq = 0;
};

struct Error {
  static constexpr const char* kType = "error";
  std::string code;
  std::string message;
};

#define RAILYARD_PROTOCOL_JSON(T)      \
  void to_json(json& j, const T& m);   \
  void from_json(const json& j, T& m);
RAILYARD_PROTOCOL_JSON(Hello)
RAILYARD_PROTOCOL_JSON(HealthState)
RAILYARD_PROTOCOL_JSON(RunningAlloc)
RAILYARD_PROTOCOL_JSON(RunsAs)
RAILYARD_PROTOCOL_JSON(RegisterNode)
RAILYARD_PROTOCOL_JSON(Register)
RAILYARD_PROTOCOL_JSON(Rejected)
RAILYARD_PROTOCOL_JSON(Kill)
RAILYARD_PROTOCOL_JSON(Registered)
RAILYARD_PROTOCOL_JSON(Heartbeat)
RAILYARD_PROTOCOL_JSON(RankPid)
RAILYARD_PROTOCOL_JSON(Launched)
RAILYARD_PROTOCOL_JSON(LaunchFailed)
RAILYARD_PROTOCOL_JSON(AllocFinished)
RAILYARD_PROTOCOL_JSON(Metrics)
RAILYARD_PROTOCOL_JSON(Health)
RAILYARD_PROTOCOL_JSON(LogChunk)
RAILYARD_PROTOCOL_JSON(ExecStarted)
RAILYARD_PROTOCOL_JSON(ExecFailed)
RAILYARD_PROTOCOL_JSON(NodeGpus)
RAILYARD_PROTOCOL_JSON(Launch)
RAILYARD_PROTOCOL_JSON(Exec)
RAILYARD_PROTOCOL_JSON(Logs)
RAILYARD_PROTOCOL_JSON(Images)
RAILYARD_PROTOCOL_JSON(ImageList)
RAILYARD_PROTOCOL_JSON(LaunchProgress)
RAILYARD_PROTOCOL_JSON(Ack)
RAILYARD_PROTOCOL_JSON(Error)
#undef RAILYARD_PROTOCOL_JSON

// "<job>.<attempt>"
std::string alloc_id(int64_t job, int attempt);
// The job id of an allocation id; 0 when it does not parse.
int64_t job_of_alloc(const std::string& alloc);

}  // namespace railyard::protocol
