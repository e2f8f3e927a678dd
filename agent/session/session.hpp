// Session: the agent's side of scheduler/PROTOCOL.md, without any networking. The transport (main.cpp's
// WebSocket client, or a test's fake) hands it text frames and a send function; a timer calls tick().
//
//   connected(send) --hello--> register {nodes+inventory+health, running, finished, mac} --registered-->
//   heartbeats every heartbeat_s      orders: launch --> Launcher/Supervisor --> launched | launch_failed
//                                             kill   --> Supervisor::cancel  --> alloc_finished(cancelled)
//                                             exec   --> orted in the held mpi allocation --> exec_started
//                                             logs   --> log_chunk;  ack --> FinishedStore::ack
//   tick(): Supervisor::poll per node --> alloc_finished (stored until ack); rank 0 stdout --> MllogTracker
//           + /proc telemetry --> metrics (at most once per metrics_interval per allocation); health.
//           Every node's supervisor and the telemetry share one GroupLiveness: at most one /proc scan per
//           tick for the whole agent, and none when kill(-pgid, 0) answers.
//
// One Session hosts every node of the agent process; each node has its own state directory
// <state_dir>/<node>, Launcher and Supervisor. Workers outlive the connection and the agent process:
// create() finds them again with recover(). Thread safety: none; call everything from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/launch/cgroup.hpp"
#include "agent/launch/container.hpp"
#include "agent/launch/request.hpp"
#include "agent/session/health.hpp"
#include "agent/session/protocol.hpp"
#include "common/fd.hpp"
#include "common/result.hpp"

namespace railyard::agent {

class GroupLiveness;

struct SessionOptions {
  std::string agent_id;       // "host:pid"
  std::string secret;         // the cluster secret (opt-in); "" when key_files are given
  // Per-node keys (common/protocol/key_file.hpp): read again at every `hello`, so a rotated key is used from
  // the next connection on; none = use `secret`.
  std::vector<std::string> key_files;
  std::string scheduler_url;  // http(s)://HOST:PORT, given to workers as RAILYARD_URL ("" = not set)
  std::string ca_file;        // CA bundle for https, given to workers as RAILYARD_CA_FILE ("" = not set)
  std::filesystem::path state_dir;
  std::vector<std::string> nodes;
  std::string emulate;  // built-in profile; "" = probe the hardware (fallback: none)
  bool allow_root_jobs = false;
  bool cgroups = true;        // per-allocation cgroups with limits (agent/launch/cgroup.hpp)
  // Required (the default): Session::create fails where no cgroup can be made, and a job whose group cannot
  // be made is refused. Best effort: such jobs run without limits, with a note.
  IsolationMode isolation = IsolationMode::kRequired;
  std::string cgroup_parent;  // inside each hierarchy; "" = the agent's own group
  std::optional<mode_t> job_umask = 077;
  std::string exec_helper;  // "" = railyard-agent-exec next to this executable
  std::string mpirun = "mpirun";
  // Parent of the mpi ranks' own output directories, the same path on every node (mpirun's
  // --output-filename names it for all of them); "" = <state_dir>/mpi-output.
  std::filesystem::path mpi_output_dir;
  // Image jobs (agent/launch/container.hpp): whether to look for an engine at start, and how to run it.
  bool containers = true;
  ContainerOptions container;
  std::chrono::milliseconds grace{10000};
  std::chrono::milliseconds metrics_interval{1000};
  std::chrono::milliseconds telemetry_interval{5000};  // metrics with telemetry only, when no events
  HealthOptions health;
  std::function<void(const std::string&)> log;  // default: stderr
};

class Session {
 public:
  using Clock = std::chrono::steady_clock;
  using Send = std::function<void(const std::string&)>;

  // Discovers every node, creates its state directory and adopts the workers recover() finds there.
  static Result<std::unique_ptr<Session>> create(SessionOptions options);
  ~Session();

  void connected(Send send);  // a new connection: waits for `hello`
  void disconnected();        // workers keep running; reports wait for the next registration
  void receive(std::string_view text);
  void tick(Clock::time_point now);

  // Cancels every allocation on every node (SIGTERM, SIGKILL after grace); keep calling tick() until
  // allocations() is 0. For `--kill-workers-on-exit` (the local cluster: jobs go with their nodes).
  void cancel_all(const std::string& reason);

  bool registered() const { return registered_; }
  std::chrono::milliseconds heartbeat_interval() const { return heartbeat_; }
  size_t allocations() const;  // supervised allocations, every node
  size_t unacknowledged() const { return finished_.size(); }
  // Epoch fencing (issue 30): the highest leader epoch seen (kept in <state_dir>/epoch across restarts; 0 =
  // none), and the messages refused because they carried an older one. A `hello` from an older epoch (a
  // deposed leader) is refused too, and stale_leader() turns true until the next connected(): the transport
  // should close and try another scheduler.
  int64_t epoch() const { return epoch_; }
  int64_t stale_refused() const { return stale_refused_; }
  bool stale_leader() const { return stale_leader_; }
  // Mutual authentication (issue 44): messages refused because they were not sealed with this
  // connection's session key (PROTOCOL.md "Handshake and authentication"): a `registered` that does not
  // verify leaves the agent unregistered; an order after it is logged and never executed.
  int64_t unverified_refused() const { return unverified_refused_; }

  struct Node;
  struct Alloc;
  struct EngineTask;
  struct ImagePull;

 private:
  explicit Session(SessionOptions options);

  void send(const nlohmann::json& msg);
  void log(const std::string& text) const;
  void on_hello(const nlohmann::json& msg);
  // Whether a frame may be acted on: `hello` and, before registration, `error` need no seal; `registered`
  // must verify with the session key of this connection's challenges, every later message with the same
  // key and a higher counter. A refusal is logged, counted and answered with error `unauthorized`.
  bool authentic(std::string_view text, const nlohmann::json& msg, const std::string& type);
  // The key the scheduler seals with: the cluster secret, or the key of the first node of
  // `registered.nodes` this agent hosts; "" when there is none.
  std::string sealing_key(const nlohmann::json& registered) const;
  void on_registered(const nlohmann::json& msg);
  void on_launch(const nlohmann::json& msg);
  void on_kill(const std::string& alloc, const std::string& node, const std::string& reason);
  void on_exec(const nlohmann::json& msg);
  void on_logs(const nlohmann::json& msg);
  // Rank `rank`'s log on node `n`, opened through AllocDir (never by a path the job could redirect).
  Result<Fd> open_rank_log(const Node& n, long long job, const std::string& alloc, int rank,
                           const std::string& stream) const;
  void answer_error(const std::string& code, const std::string& message);
  Node* node(const std::string& name);

  // Image jobs (session_images.cpp). A launch of an image job whose image this node has not got waits for
  // one pull of that image (its launch and exec orders kept in order, answered when the pull ends); a kill
  // drops its orders. Engine commands run as child processes polled by tick(), never holding the loop.
  // False: the image is here (the request's image now names the cached one); true: the order waits.
  Result<bool> wait_for_image(const nlohmann::json& order, LaunchRequest& request,
                              const std::optional<Credentials>& user);
  bool queued_behind_pull(const std::string& alloc, const nlohmann::json& order);
  bool drop_queued(const std::string& alloc);
  void start_pull(const std::string& image, const std::string& source);
  void pull_done(const std::string& image, int status, const std::string& output);
  void run_engine(std::vector<std::string> argv, std::function<void(int, const std::string&)> done,
                  std::function<void(const std::string&)> progress = {});
  void report_pull_progress(Clock::time_point now);
  void on_images(const nlohmann::json& msg);
  void poll_engine_tasks();
  // The allocation's env files; and its containers, when `engine` (an engine client was killed, or the
  // agent did not start them): a client that exits by itself has removed its container (--rm) already,
  // and a removal per allocation would cost every image job an engine command on a busy node.
  void remove_containers(Node& n, const std::string& alloc, bool engine = true);
  void run_removals(Clock::time_point now);
  void reap_orphan_containers(Node& n);

  void poll_node(Node& n, Clock::time_point now);
  void finished(Node& n, const std::string& alloc, long long job, const std::string& state, int code);
  void stream_metrics(Node& n, Alloc& a, const std::string& alloc, Clock::time_point now, bool final);
  protocol::RegisterNode node_entry(const Node& n) const;
  // The key a node's MACs and exec tokens are made with: its node key, or the cluster secret.
  const std::string& key_of(const std::string& node) const;
  // Reads key_files again (keeping the keys read before when it cannot be read); no-op without one.
  void reload_keys();

  SessionOptions options_;
  std::map<std::string, std::string> keys_;  // node -> key, from key_file
  std::vector<std::unique_ptr<Node>> nodes_;
  FinishedStore finished_;
  Send send_;
  bool registered_ = false;
  std::chrono::milliseconds heartbeat_{5000};
  Clock::time_point next_heartbeat_{};
  std::unique_ptr<GroupLiveness> groups_;  // refreshed at the start of every tick
  std::shared_ptr<const ContainerRuntime> containers_;  // null: no image jobs here (containers_why_ says why)
  std::string containers_why_;
  std::vector<std::unique_ptr<EngineTask>> engine_tasks_;
  struct Removal {  // an allocation's containers to remove (remove_containers), retried until done
    std::string node, node_dir, alloc;
    int attempts = 0;
    Clock::time_point at;
    bool running = false;
  };
  std::vector<Removal> removals_;
  std::map<std::string, std::unique_ptr<ImagePull>> pulls_;  // by the image as the job names it
  std::map<std::string, std::string> images_;  // cached here: the image as named -> the reference to run
  std::string challenge_;        // the scheduler's, from this connection's hello
  std::string agent_challenge_;  // ours, sent in register; "" until a hello came
  std::optional<protocol::OrderVerifier> verifier_;  // set once `registered` verified
  int64_t unverified_refused_ = 0;
  int64_t epoch_ = 0;
  int64_t stale_refused_ = 0;
  bool stale_leader_ = false;
  // False (and counted, and answered with error stale_epoch) when `msg` carries an epoch older than epoch_;
  // a newer one is remembered.
  bool accept_epoch(const nlohmann::json& msg, const std::string& type);
};

}  // namespace railyard::agent
