// AgentHub: the scheduler's side of the agent protocol (scheduler/PROTOCOL.md), free of sockets. A
// connection is a Peer (send/close); the WebSocket glue in api/server.cpp calls on_open/on_message/on_close.
//
//   agent ──hello/register──► decode ──► authenticate (cluster secret, or each node's own key) ──► link nodes
//   (takeover, inventory, fencing of reported allocations) ──► reconcile (agent_register.cpp)
//   pass places a job ──observer──► Track(alloc) ──launch──► agents ──launched/alloc_finished──► commit
//   job ends (API cancel, failure, node DOWN) ──pre-commit──► GPU hold written with the change ──observer──►
//   kill to the nodes still running it; its GPUs stay held (JobTable::gpu_holds) until each node confirmed
//   or went away, then the hold is deleted (WriteBatch::released)
//   scheduler restart ──► holds reloaded; a held node that registers without the allocation confirms it,
//   one that reports it is told to kill it; one that never registers within the grace goes DOWN → released
//   tick() every second ──► heartbeat timeouts → node DOWN, jobs NODE_FAIL / requeued; end of grace;
//   launch orders unanswered for launch_timeout_s → job FAILED / requeued
//
// Every state change is a WriteBatch committed through Service::commit() (store, then memory, then
// observers), with an audit event naming its actor ("agent:<node>", "scheduler"). The hub's own maps
// (connections, tracks of live allocations) are derived state: rebuilt from the table on start().
//
// Thread safety: none; everything runs on the daemon's single event loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/protocol/mac.hpp"
#include "common/protocol/messages.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::daemon {

// One connection as the hub sees it. send() queues a text frame; close() ends the connection (the glue
// then calls on_close).
class Peer {
 public:
  virtual ~Peer() = default;
  virtual void send(std::string text) = 0;
  virtual void close() = 0;
  // The peer's IP address as the scheduler sees it ("" when unknown); used as MASTER_ADDR.
  virtual std::string remote_address() const { return {}; }
};

struct AgentHubOptions {
  std::string secret;  // the cluster secret (opt-in for small clusters); empty: not accepted
  // Per-node keys (scheduler/PROTOCOL.md "Node keys"): a register whose nodes each carry a MAC made with that
  // node's key from the store (table node_keys) is accepted for those nodes. With neither this nor a
  // secret, every agent is refused.
  bool node_keys = false;
  int64_t heartbeat_timeout_s = 30;
  int64_t reconcile_grace_s = 30;
  int heartbeat_interval_s = 5;
  int64_t request_timeout_s = 10;  // logs / exec requests the agent does not answer
  int64_t launch_timeout_s = 120;  // a connected node that answers no launch order fails the job
  // The leader's epoch (issue 30), stamped as "epoch" on every message to agents, which refuse orders from an
  // epoch older than one they saw; 0 (no HA): not sent.
  int64_t epoch = 0;
};

struct AgentHubStats {
  int64_t refused_total = 0;
  int64_t bad_messages_total = 0;
  int64_t launches_total = 0;
};

// The protocol's MACs have one definition, shared with the agent (common/protocol/mac.hpp).
using protocol::exec_token;
using protocol::hmac_sha256_hex;
using protocol::node_mac;
using protocol::register_mac;
// "<job>.<attempt>"
std::string alloc_id(JobId job, int attempt);

// MASTER_PORT for an allocation: the first port in [20000, 50000), probing upward from a start derived
// from the job and attempt, that is not in `taken` (the ports of other live allocations on the same first
// node), so two jobs led by one node never get the same port.
int master_port_for(JobId job, int attempt, const std::set<int>& taken);

class AgentHub {
 public:
  // An answer to an asynchronous API request (logs, exec): HTTP status and JSON body.
  using Answer = std::function<void(int status, nlohmann::json body)>;
  using MetricsListener = std::function<void(JobId job, const nlohmann::json& events)>;

  AgentHub(Service& service, AgentHubOptions options);

  // Registers the hub as the service's observer, starts the reconcile grace period and tracks the
  // allocations the store says are live. Call once, after Service::open().
  void start();

  void on_open(const std::shared_ptr<Peer>& peer);
  void on_message(Peer* peer, std::string_view text);
  void on_close(Peer* peer);
  // Heartbeat timeouts, the end of the grace period, request timeouts. Call about once a second.
  void tick();

  bool enabled() const { return !options_.secret.empty() || options_.node_keys; }
  const AgentHubStats& stats() const { return stats_; }
  size_t connected_nodes() const;
  // The last frame from the node's connection; nullopt when the node never registered.
  std::optional<int64_t> last_heartbeat(const std::string& node) const;
  bool connected(const std::string& node) const;
  // Whether a job of `user` can run: refused only when every connected node's agent reports it cannot
  // switch users (not root) and none runs as `user` (the agent would refuse it: PROTOCOL.md "runs_as").
  Status can_run_as(const std::string& user) const;
  void set_metrics_listener(MetricsListener l) { metrics_listener_ = std::move(l); }

  // Reads a rank's log through its node's agent. 404 unknown rank, 503 node not connected.
  // The node's image cache from its agent; with `pull`, the agent starts pulling that image first.
  void request_images(const std::string& node, const std::optional<std::string>& pull, Answer answer);
  void request_logs(const store::JobRecord& job, int rank, const std::string& stream, int64_t offset,
                    int64_t max_bytes, Answer answer);
  // POST /api/v1/allocs/ALLOC/exec (railyard-agent-exec). 403 bad token, 404 unknown alloc/node, 503, 502.
  void request_exec(const std::string& alloc, const std::string& token, const std::string& node,
                    std::vector<std::string> argv, Answer answer);

 private:
  struct Conn {
    std::shared_ptr<Peer> peer;
    std::string challenge;
    std::string agent;
    bool registered = false;
    // Seals `registered` and every later message to this agent (PROTOCOL.md "Handshake and
    // authentication"); unset before registration and when no key of this connection was verified.
    std::optional<protocol::OrderSealer> sealer;
    int bad_in_row = 0;
    std::vector<std::string> nodes;
  };
  struct Link {            // a node's agent
    Peer* peer = nullptr;  // null once its connection closed
    std::string agent;
    int64_t last_seen = 0;
    std::optional<protocol::RunsAs> runs_as;  // from its register; absent: an agent that can switch users
  };
  // A live (or ending) allocation. An ended one restored from a persisted hold has only the hold's nodes.
  struct Track {
    JobId job = 0;
    std::vector<std::string> nodes;
    std::vector<topology::GpuId> gpus;
    std::set<std::string> launch_sent, launched, finished, absent;
    bool ended = false;     // the job left STARTING/RUNNING; waiting for kills to be confirmed
    bool restored = false;  // live or held when the scheduler started (reconcile rules apply)
    std::optional<double> run_start;
    int master_port = 0;    // MASTER_PORT of the env launcher: unique among live tracks on the same first node
    int64_t launch_deadline = 0;  // the last launch order sent + launch_timeout_s
  };
  struct Pending {
    Answer answer;
    std::string node;
    int64_t deadline = 0;
  };

  // The master ports of the live allocations, by the node that leads them (their first): what a new
  // allocation's port must differ from (master_port_for). Made once for a whole batch of starts and added to
  // as they are tracked: a scan of every track per start made applying a pass that starts tens of thousands
  // of jobs quadratic.
  using PortsInUse = std::unordered_map<std::string, std::set<int>>;
  PortsInUse ports_in_use() const;
  void refuse(Conn& c, const std::string& reason);
  void send(Peer* p, const nlohmann::json& msg);
  void send_to_node(const std::string& node, const nlohmann::json& msg);
  void error(Peer* p, const std::string& code, const std::string& message);
  void bad_message(Conn& c, const std::string& message);
  void handle(Conn& c, const nlohmann::json& m);
  // Whether `node` is registered on connection `c` (reports and answers speak only for those).
  bool owns(const Conn& c, const std::string& node) const;
  // Refuses a report or answer about a node or allocation the connection does not own: logged, answered
  // as a bad message (throws).
  [[noreturn]] void not_owned(const Conn& c, const std::string& what) const;

  // Registration (agent_register.cpp): decode -> authenticate -> link nodes -> reconcile.
  struct Linking;
  void on_register(Conn& c, const nlohmann::json& m);
  // The key each node's MAC was verified with (empty with the cluster secret, which speaks for all).
  Result<std::map<std::string, std::string>> authenticate(const Conn& c, const protocol::Register& reg);
  // The key (current, or previous within its grace) that `mac` was made with; "" for a node outside the
  // cluster (it proves nothing and is rejected when linked).
  Result<std::string> check_node_key(const Conn& c, const std::string& node, const std::string& mac);
  // Starts sealing c's messages with the session key of the key that authenticated it: the cluster secret,
  // or the key of the first accepted node.
  void start_sealing(Conn& c, const protocol::Register& reg, const std::map<std::string, std::string>& keys,
                     const std::vector<std::string>& accepted);
  // Whether `token` is the exec token of `alloc`: with the cluster secret, or with the key (or the previous
  // key, within its grace) of the allocation's first node, whose agent starts mpirun.
  bool exec_token_ok(const std::string& alloc, const std::string& token, const std::string& first_node);
  void link_node(Conn& c, const protocol::RegisterNode& n, Linking& out);
  void fence_running(const std::string& node, const protocol::RunningAlloc& run, Linking& out);
  void apply_register_finished(Conn& c, const std::vector<nlohmann::json>& finished);
  void reconcile(Conn& c);

  void on_launched(const protocol::Launched& m);
  void on_launch_failed(const protocol::LaunchFailed& m);
  void on_alloc_finished(Peer* from, const protocol::AllocFinished& m);
  void on_metrics(const Conn& c, const protocol::Metrics& m);
  void on_answer(const Conn& c, const nlohmann::json& m);
  // A launch waiting for its image: the job's reason says so, and the launch timeout starts again.
  void on_launch_progress(const protocol::LaunchProgress& m);
  void on_health(Conn& c, const nlohmann::json& m);
  // A node's health check result (from `health` or register.nodes[].health): a failing check drains the
  // node with "health: <reason>"; a passing one resumes a node that a health check drained (never one an
  // admin drained). Appends to `b`.
  void health_changes(WriteBatch& b, const std::string& node, bool ok, const std::string& reason, int64_t now);

  void on_batch(const WriteBatch& b);
  void track_started(const store::JobRecord& r, PortsInUse& ports);
  // Whether `node` may still run `t`: sent its launch, has not reported its end, and is connected, or
  // (restored allocations, agents enabled) has not registered since the restart and the grace is not over.
  bool outstanding(const Track& t, const std::string& node) const;
  // Pre-commit hook: a GpuHold for each allocation whose job `b` takes out of STARTING/RUNNING (or to a
  // new attempt) while a node may still run it.
  void add_holds(WriteBatch& b) const;
  void end_track(const std::string& alloc, Track& t);
  // Track `alloc` (t) is ended: its flag and ended_, kept in step here only.
  void mark_ended(const std::string& alloc, Track& t) {
    t.ended = true;
    ended_.insert(alloc);
  }
  // Forgets an ended allocation once no node is outstanding; deletes its hold (a commit) if it had one.
  void maybe_release(const std::string& alloc);
  void release_ended();
  // A node removed by an admin leaves its connection (which closes when it has no node left).
  void unlink(const std::string& node);
  void send_launch(const std::string& alloc, const Track& t, const std::string& node);
  // Ends a live job: `end` (FAILED, TIMEOUT, NODE_FAIL, COMPLETED), or PENDING when it asked for requeue
  // and `may_requeue`. Appends to `b` (not committed).
  void end_job(WriteBatch& b, const store::JobRecord& r, jobs::JobState end, std::optional<int> exit_code,
               const std::string& reason, const std::string& actor, bool may_requeue);
  void nodes_down(const std::vector<std::string>& names, const std::string& reason);
  void launch_timeouts(int64_t now);
  const store::JobRecord* live_job(const std::string& alloc) const;
  Status commit(WriteBatch b);
  Status commit_report(WriteBatch b);
  // Adds to `b` the move of r's job to RUNNING once every node that must launch it has (mpi: the first).
  void running_if_launched(WriteBatch& b, const store::JobRecord& r, const Track& t, const std::string& alloc,
                           const std::string& node);

  Service& service_;
  AgentHubOptions options_;
  AgentHubStats stats_;
  int64_t grace_end_ = 0;
  bool grace_over_ = false;
  std::unordered_map<Peer*, Conn> conns_;
  std::map<std::string, Link> links_;
  std::map<std::string, Track> tracks_;  // by allocation id
  std::set<std::string> ended_;          // the tracks that are ended: what release_ended() looks at, not all
  std::set<std::string> removed_;        // nodes whose health is kRemoved
  std::map<int64_t, Pending> pending_;   // logs / exec requests by req id
  int64_t next_req_ = 1;
  MetricsListener metrics_listener_;
  std::shared_ptr<char> alive_ = std::make_shared<char>();  // for callbacks the service may run later
};

}  // namespace railyard::daemon
