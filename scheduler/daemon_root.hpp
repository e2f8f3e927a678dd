// The composition root of `railyard-scheduler` serving: builds the daemon's parts in order (with HA, a
// standby until this process leads; the store, fenced with its epoch; the Service and its worker threads;
// the agent and watch hubs; the router and the HTTP server) and runs the event loop. Each step owns what
// it builds until the daemon stops; the parts are destroyed in the reverse order.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "scheduler/api/router.hpp"
#include "scheduler/api/server.hpp"
#include "scheduler/api/watch.hpp"
#include "scheduler/daemon/agents.hpp"
#include "scheduler/daemon/config.hpp"
#include "scheduler/daemon/service.hpp"
#include "scheduler/ha/elector.hpp"
#include "scheduler/ha/replication.hpp"
#include "scheduler/store/sqlite_store.hpp"

namespace railyard {

int64_t wall_clock_seconds();

// Exit status of a leader that stopped leading (high availability): a supervisor restarts it as a standby.
inline constexpr int kExitDeposed = 75;

class Daemon {
 public:
  // `exe`: this program's path (the default web root is found beside it).
  Daemon(daemon::DaemonConfig config, std::string exe);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Until stopped (SIGINT/SIGTERM): the exit status, 0; 1 when a part failed; 2 for a bad configuration.
  // A leader that loses its lease exits kExitDeposed at once (no step can follow).
  int run();

 private:
  struct Failed {
    std::string message;
    int exit_code = 1;
  };
  using Step = std::optional<Failed>;
  Step elect();          // with --ha-etcd: serve as a standby until leading (epoch_); "stopped" ends run()
  // With replicated state: the log's options; opens the own database and follows the log while a standby.
  ha::LogOptions log_options() const;
  net::ClientTls etcd_tls() const;  // --ha-etcd-ca, --ha-etcd-cert, --ha-etcd-key
  bool replicated() const { return !config_.ha_etcd.empty() && config_.ha_state == "etcd"; }
  // Opens the own database (rebuilt from a snapshot when the log is trimmed past it) and follows the log.
  Step follow_log(const std::string& name, std::unique_ptr<store::SqliteStateStore>& own,
                  std::unique_ptr<ha::LogFollower>& follower);
  Step rebuild_if_behind(std::unique_ptr<store::SqliteStateStore>& own, const std::string& name);
  // Won the election: the rest of the log, an unfinished entry cleared, a first leader's rows as entry 1.
  Step take_over_log(store::SqliteStateStore& own, ha::LogFollower& follower);
  Step open_service();   // the store (fenced when leading), the Service, its policy and worker threads
  Step open_hubs();      // the agent hub (secret, node keys, timeouts) and the watch hub
  Step open_http();      // the router, WebSocket acceptor, limits, TLS, Unix socket; then listen

  daemon::DaemonConfig config_;
  std::string exe_;
  daemon::ListenAddress listen_;
  std::optional<topology::Cluster> cluster_;
  std::unique_ptr<ha::Elector> elector_;
  int64_t epoch_ = 0;
  std::string snapshot_key_;         // replicated state: what a controller shows to get a snapshot
  std::atomic<int64_t> log_head_{0};  // replicated state: the last entry this leader wrote
  std::atomic<int64_t> unreplicated_since_ms_{0};  // when etcd began refusing its writes; 0: it takes them
  // The jobs a standby kept while following the log (its follower's thread until the takeover stops it).
  store::WarmJobs warm_jobs_;
  std::unique_ptr<store::SqliteStateStore> submit_store_;  // submits commit on their own connection
  api::HttpServer server_;  // the event loop
  std::unique_ptr<ha::LogTrimmer> trimmer_;  // replicated state, leading: keeps etcd's log bounded
  std::unique_ptr<daemon::Service> service_;
  std::unique_ptr<daemon::AgentHub> hub_;
  std::unique_ptr<api::WatchHub> watch_;
  std::unique_ptr<api::Router> router_;
};

}  // namespace railyard
