#include "scheduler/daemon_root.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/protocol/key_file.hpp"
#include "scheduler/api/auth.hpp"
#include "scheduler/api/static_files.hpp"
#include "scheduler/ha/etcd.hpp"
#include "scheduler/ha/standby.hpp"
#include "topology/io_json.hpp"

namespace railyard {
namespace {

int exit_with(const std::string& message, int code) {
  std::cerr << "railyard-scheduler: " << message << "\n";
  return code;
}

// Every connection is a file descriptor: raises the soft RLIMIT_NOFILE to the hard one, and lowers the
// connection cap to what the limit leaves after kReservedFds (database, logs, etcd), with a warning.
api::ServerLimits server_limits(const daemon::DaemonConfig& config) {
  constexpr rlim_t kReservedFds = 128;
  api::ServerLimits limits;
  limits.max_connections = static_cast<size_t>(config.max_connections);
  limits.header_timeout = std::chrono::seconds(config.header_timeout_s);
  limits.max_connections_per_address = static_cast<size_t>(config.max_connections_per_address);
  rlimit fds{};
  if (::getrlimit(RLIMIT_NOFILE, &fds) != 0) return limits;
  if (fds.rlim_cur < fds.rlim_max) {
    rlimit raised{fds.rlim_max, fds.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) fds = raised;
  }
  const rlim_t room = fds.rlim_cur > kReservedFds ? fds.rlim_cur - kReservedFds : 1;
  if (fds.rlim_cur != RLIM_INFINITY && limits.max_connections > room) {
    spdlog::warn(
        "--max-connections {} is more than the file-descriptor limit ({}) leaves room for: {} (raise "
        "`ulimit -n` / LimitNOFILE)",
        limits.max_connections, fds.rlim_cur, room);
    limits.max_connections = room;
  }
  return limits;
}

int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The hub's view of a WebSocket connection.
class HubPeer final : public daemon::Peer {
 public:
  explicit HubPeer(std::shared_ptr<api::WsPeer> ws) : ws_(std::move(ws)) {}
  void send(std::string text) override { ws_->send(std::move(text)); }
  void close() override { ws_->close(); }
  std::string remote_address() const override { return ws_->remote_address(); }

 private:
  std::shared_ptr<api::WsPeer> ws_;
};

Result<std::string> read_secret(const std::string& path) {
  if (path.empty()) return std::string();
  auto text = protocol::read_private_file(path);  // refused when others can read it, as ssh does
  if (!text) return railyard::Error{text.error().code, "--agent-secret-file: " + text.error().message};
  std::string s = std::move(*text);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.size() < 16)
    return invalid("--agent-secret-file " + path + ": the secret must have at least 16 characters");
  return s;
}

void tick_every_second(api::HttpServer& server, daemon::AgentHub& hub) {
  server.post_after(std::chrono::seconds(1), [&server, &hub] {
    hub.tick();
    tick_every_second(server, hub);
  });
}

// A leader that lost its lease, or found a newer epoch in the database, ends at once: no pass, no order to an
// agent and no write can follow (agents keep their workers running; the next leader reconciles).
[[noreturn]] void step_down(const std::string& why) {
  spdlog::critical("ha: no longer the leader ({}); exiting so that nothing more is done under this epoch", why);
  spdlog::default_logger()->flush();
  std::_Exit(kExitDeposed);
}

// GET /api/v1/ha/snapshot on a standby: its database as one file, to who shows the snapshot key.
api::HttpResponse snapshot_answer(const api::HttpRequest& req, const std::string& db, const std::string& key) {
  const std::string bearer = api::bearer_token(req.authorization).value_or("");
  if (key.empty() || bearer.size() != key.size() || CRYPTO_memcmp(bearer.data(), key.data(), key.size()) != 0)
    return {401, "application/json", R"({"error":{"code":"unauthorized","message":"snapshot key required"}})", {}};
  const std::string out = db + ".serving";
  if (auto s = store::SqliteStateStore::snapshot_to(db, out); !s)
    return {503, "application/json", nlohmann::json{{"error", {{"code", "unavailable"}, {"message", s.error().message}}}}.dump(), {}};
  std::ifstream in(out, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::error_code ec;
  std::filesystem::remove(out, ec);
  return {200, "application/octet-stream", std::move(bytes), {}};
}

// Serves as a standby (ha/standby.hpp) on the daemon's address until the elector wins: the epoch; an error
// when stopped (SIGINT/SIGTERM) first. The standby's listener is closed before the leader's opens.
Result<int64_t> serve_as_standby(ha::Elector& elector, const daemon::ListenAddress& listen,
                                 const daemon::DaemonConfig& config, const ha::Position& position,
                                 const std::string& snapshot_key) {
  api::HttpServer server;
  server.set_limits(server_limits(config));
  server.set_handler([&elector, &position, &config, &snapshot_key](api::HttpRequest&& req, api::Reply reply) {
    if (position && req.method == "GET" && req.target == "/api/v1/ha/snapshot")
      return reply(snapshot_answer(req, config.db, snapshot_key));
    if (auto r = ha::ha_route(req, elector, position)) return reply(std::move(*r));
    reply(ha::standby_answer(req, elector));
  });
  if (!config.tls_cert.empty())
    if (auto s = server.enable_tls(config.tls_cert, config.tls_key); !s) return s.error();
  auto port = server.listen(listen.host, listen.port);
  if (!port) return port.error();
  std::cout << "standby on " << listen.host << ":" << *port << std::endl;
  Result<int64_t> won = Error{ErrorCode::kUnavailable, "stopped"};
  std::atomic<bool> done{false};
  std::thread campaign([&] {
    won = elector.campaign();
    done = true;
    server.post([&server] { server.stop(); });
  });
  server.run();
  // Stopped by a signal while campaigning: end the campaign. Once it has won, the elector must go on (its
  // keepalive and watchdog keep the lease and stop a leader that loses it).
  const bool stopped = !done.load();
  if (stopped) elector.stop();
  campaign.join();
  if (stopped) return Error{ErrorCode::kUnavailable, "stopped"};  // a win just now is handed back (~Elector)
  return won;
}

// Who is an admin among the Unix socket's callers: root, this process's user, members of --admin-group.
Result<api::PeerPolicy> peer_policy(const daemon::DaemonConfig& config) {
  api::PeerPolicy peer{static_cast<uint32_t>(::geteuid()), std::nullopt};
  if (config.admin_group.empty()) return peer;
  auto gid = api::admin_group_id(config.admin_group);
  if (!gid) return gid.error();
  peer.admin_gid = *gid;
  return peer;
}

}  // namespace

int64_t wall_clock_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Daemon::Daemon(daemon::DaemonConfig config, std::string exe) : config_(std::move(config)), exe_(std::move(exe)) {}

Daemon::~Daemon() = default;

int Daemon::run() {
  auto listen = daemon::parse_listen(config_.listen);
  if (!listen) return exit_with(listen.error().message, 2);
  listen_ = *listen;
  auto cluster = daemon::load_cluster(config_);
  if (!cluster) return exit_with(cluster.error().message, 2);
  cluster_ = std::move(*cluster);
  for (Step (Daemon::*step)() : {&Daemon::elect, &Daemon::open_service, &Daemon::open_hubs, &Daemon::open_http})
    if (Step failed = (this->*step)()) {
      if (failed->message == "stopped") return 0;  // stopped while a standby
      return exit_with(failed->message, failed->exit_code);
    }
  server_.run();
  spdlog::info("stopped");
  return 0;
}

Daemon::Step Daemon::elect() {
  if (config_.ha_etcd.empty()) return std::nullopt;
  if (listen_.port == 0) return Failed{"--ha-etcd needs a fixed --listen port (clients and agents list it)", 2};
  if (config_.ha_etcd_cert.empty() != config_.ha_etcd_key.empty())
    return Failed{"--ha-etcd-cert and --ha-etcd-key go together", 2};
  if (!config_.ha_etcd_cert.empty() || !config_.ha_etcd_ca.empty())
    if (auto s = net::check_client_tls(etcd_tls()); !s) return Failed{"etcd TLS: " + s.error().message, 2};
  ha::ElectorOptions eo;
  eo.endpoints = ha::split_endpoints(config_.ha_etcd);
  eo.tls = etcd_tls();
  eo.name = config_.ha_name.empty() ? listen_.host + ":" + std::to_string(listen_.port) : config_.ha_name;
  eo.address = !config_.ha_advertise.empty()
                   ? config_.ha_advertise
                   : std::string(config_.tls_cert.empty() ? "http://" : "https://") + listen_.host + ":" +
                         std::to_string(listen_.port);
  eo.ttl_s = config_.ha_ttl_s;
  eo.margin = std::chrono::milliseconds(std::max(500, config_.ha_ttl_s * 300));  // 1.5 s for the default 5 s
  spdlog::info("ha: {} at {}, etcd {}, lease TTL {} s", eo.name, eo.address, config_.ha_etcd, eo.ttl_s);
  elector_ = std::make_unique<ha::Elector>(eo, step_down);
  // Replicated state: while a standby, this scheduler's own database follows the leader's log.
  std::unique_ptr<store::SqliteStateStore> own;
  std::unique_ptr<ha::LogFollower> follower;
  if (replicated())
    if (Step failed = follow_log(eo.name, own, follower)) return failed;
  ha::Position position;
  if (follower)
    position = [f = follower.get()] { return ha::LogPosition{f->applied(), f->failure()}; };
  auto won = serve_as_standby(*elector_, listen_, config_, position, snapshot_key_);
  if (!won) return Failed{won.error().message, 1};
  epoch_ = *won;
  if (follower) return take_over_log(*own, *follower);
  return std::nullopt;
}

Daemon::Step Daemon::follow_log(const std::string& name, std::unique_ptr<store::SqliteStateStore>& own,
                                std::unique_ptr<ha::LogFollower>& follower) {
  auto st = store::SqliteStateStore::open(config_.db);
  if (!st) return Failed{st.error().message, 1};
  own = std::move(*st);
  if (auto key = ha::snapshot_key(log_options()); key) snapshot_key_ = *key;
  else spdlog::warn("ha: no snapshot key from etcd ({}): this scheduler serves no snapshots", key.error().message);
  if (Step failed = rebuild_if_behind(own, name)) return failed;
  auto applied = own->replicated_seq();
  if (!applied) return Failed{applied.error().message, 1};
  spdlog::info("ha: state replicated through etcd; {} holds the log up to entry {}", config_.db, *applied);
  follower = std::make_unique<ha::LogFollower>(
      log_options(), name, *applied,
      [this, store = own.get()](std::span<const ha::LogEntry> entries) {
        std::vector<store::ReplicatedEntry> rows;
        rows.reserve(entries.size());
        for (const auto& e : entries) rows.push_back({e.seq, e.changeset});
        return store->apply_replicated(rows, &warm_jobs_);
      },
      std::chrono::milliseconds(50),
      [](const Error& e) {
        // Behind the trimmed log: the next start rebuilds this database from a snapshot.
        if (e.code == ErrorCode::kNotFound) step_down(e.message + "; restarting rebuilds from a snapshot");
      },
      // A warm standby: every job read now, and the jobs each entry changes read again as it is applied, so
      // that a takeover's load does not read and parse them (the bulk of loading a large state).
      [this, store = own.get()] {
        if (auto s = store->warm_jobs(warm_jobs_); !s)
          spdlog::warn("ha: warming the standby's copy: {}", s.error().message);
      });
  return std::nullopt;
}

// Leading: no other leader can append now. Everything the log holds first, then what a deposed leader left
// unfinished goes, and this database is where the log ends.
Daemon::Step Daemon::take_over_log(store::SqliteStateStore& own, ha::LogFollower& follower) {
  follower.stop();
  if (auto s = follower.catch_up(); !s)
    return Failed{"ha: catching up with the replicated log: " + s.error().message +
                      " (this scheduler cannot lead; remove its database to rebuild it from the log)",
                  1};
  log_head_ = follower.applied();
  auto writer = std::make_shared<ha::LogWriter>(log_options(), epoch_);
  if (auto s = writer->clear_after(follower.applied()); !s) step_down(s.error().message);
  spdlog::info("ha: caught up with the replicated log at entry {}", follower.applied());
  if (follower.applied() > 0) return std::nullopt;
  // The first leader: what its database held before (the first admin token) is the log's first entry.
  own.set_on_fenced(step_down);
  own.replicate_through([writer](int64_t seq, const std::string& changes) { return writer->append(seq, changes); });
  if (auto s = own.replicate_existing(config_.db + ".seed"); !s)
    return Failed{"ha: replicating the database's rows: " + s.error().message, 1};
  if (auto seq = own.replicated_seq()) log_head_ = *seq;
  return std::nullopt;
}

// A database older than the log's base (trimmed past it) or gone: a snapshot of another controller's
// replaces it, and the log goes on from the entry the snapshot holds.
Daemon::Step Daemon::rebuild_if_behind(std::unique_ptr<store::SqliteStateStore>& own, const std::string& name) {
  auto applied = own->replicated_seq();
  if (!applied) return Failed{applied.error().message, 1};
  ha::EtcdClient etcd(log_options().endpoints, log_options().timeout, etcd_tls());
  auto base = ha::log_base(etcd, log_options().prefix);
  if (!base) {
    spdlog::warn("ha: the log's base is not known yet ({}); following finds out", base.error().message);
    return std::nullopt;
  }
  if (*applied >= *base) return std::nullopt;
  spdlog::warn("ha: {} holds the log up to entry {}, the log is trimmed up to {}: rebuilding from a snapshot",
               config_.db, *applied, *base);
  auto bytes = ha::fetch_snapshot(log_options(), name, snapshot_key_);
  if (!bytes) return Failed{bytes.error().message, 1};
  const std::string fresh = config_.db + ".snapshot";
  {
    // Mode 0600 from its creation: it holds node keys, as the database does.
    const int fd = ::open(fresh.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                         ::write(fd, bytes->data(), bytes->size()) == static_cast<ssize_t>(bytes->size()) &&
                         ::fsync(fd) == 0;
    if (fd >= 0) ::close(fd);
    if (!written) return Failed{"ha: cannot write " + fresh, 1};
  }
  auto copy = store::SqliteStateStore::open(fresh);
  if (!copy) return Failed{"ha: the snapshot does not open: " + copy.error().message, 1};
  auto held = (*copy)->replicated_seq();
  if (!held || *held < *base)
    return Failed{"ha: the snapshot holds the log only up to entry " + (held ? std::to_string(*held) : "?") +
                      ", before its base " + std::to_string(*base),
                  1};
  copy->reset();
  own.reset();
  std::error_code ec;
  for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(config_.db + suffix, ec);
  std::filesystem::rename(fresh, config_.db, ec);
  if (ec) return Failed{"ha: replacing " + config_.db + ": " + ec.message(), 1};
  auto reopened = store::SqliteStateStore::open(config_.db);
  if (!reopened) return Failed{reopened.error().message, 1};
  own = std::move(*reopened);
  spdlog::info("ha: {} rebuilt from a snapshot: the log up to entry {}", config_.db, *held);
  return std::nullopt;
}

net::ClientTls Daemon::etcd_tls() const {
  return {config_.ha_etcd_ca, config_.ha_etcd_cert, config_.ha_etcd_key};
}

ha::LogOptions Daemon::log_options() const {
  ha::LogOptions o;
  o.endpoints = ha::split_endpoints(config_.ha_etcd);
  o.tls = etcd_tls();
  return o;
}

// With HA only the epoch holder gets here: it opens the shared database, fences it with its epoch (a
// database claimed by a newer one refuses it), and reconciles with the agents as a restart does.
Daemon::Step Daemon::open_service() {
  auto st = store::SqliteStateStore::open(config_.db);
  if (!st) return Failed{st.error().message, 1};
  auto submit_st = store::SqliteStateStore::open(config_.db);
  if (!submit_st) return Failed{submit_st.error().message, 1};
  if (epoch_ > 0) {
    if (auto s = (*st)->fence(epoch_, true); !s) step_down(s.error().message);
    if (auto s = (*submit_st)->fence(epoch_, false); !s) step_down(s.error().message);
    (*st)->set_on_fenced(step_down);
    (*submit_st)->set_on_fenced(step_down);
    if (replicated()) {
      ha::TrimOptions trim;
      trim.keep = config_.ha_log_keep;
      trim.keep_max = config_.ha_log_keep * 4;
      trimmer_ = std::make_unique<ha::LogTrimmer>(log_options(), epoch_, elector_->options().name,
                                                  [this] { return log_head_.load(); }, trim);
      // Each connection commits on its own thread: a writer (an etcd client) each.
      for (auto* s : {st->get(), submit_st->get()})
        s->replicate_through([this, writer = std::make_shared<ha::LogWriter>(log_options(), epoch_)](
                                 int64_t seq, const std::string& changes) {
          Status appended = writer->append(seq, changes);
          if (appended) log_head_ = seq;  // the write lock orders the two connections: seq only grows
          int64_t none = 0;
          if (appended) unreplicated_since_ms_ = 0;
          else if (appended.error().code == ErrorCode::kUnavailable)
            unreplicated_since_ms_.compare_exchange_strong(none, wall_clock_ms());
          return appended;
        });
    }
    spdlog::info("ha: leading with epoch {}; database {} claimed", epoch_, config_.db);
  }
  spdlog::info("cluster {}: {} nodes, {} GPUs; db {} (schema v{})", cluster_->name(), cluster_->node_count(),
               cluster_->gpu_count(), config_.db, (*st)->schema_version());
  // A standby that took over loads with the jobs it kept while following, instead of reading them again.
  std::optional<store::StoredState> warm;
  if (warm_jobs_.complete) {
    const size_t kept = warm_jobs_.jobs.size();
    auto state = (*st)->load(warm_jobs_);
    if (!state) return Failed{state.error().message, 1};
    spdlog::info("ha: the copy kept while a standby held {} jobs; {} loaded (from it when the two agree)", kept,
                 state->jobs.size());
    warm = std::move(*state);
  }
  daemon::Loop loop{[this](std::function<void()> fn) { server_.post(std::move(fn)); },
                    [this](std::chrono::milliseconds delay, std::function<void()> fn) {
                      server_.post_after(delay, std::move(fn));
                    }};
  service_ = std::make_unique<daemon::Service>(*cluster_, std::move(*st), std::move(loop), wall_clock_seconds);
  service_->set_clock_ms(wall_clock_ms);
  auto policy = daemon::policy_of(config_);
  if (!policy) return Failed{policy.error().message, 2};
  service_->set_policy(*policy);
  service_->set_pass_budget(std::chrono::milliseconds(config_.pass_budget_ms));
  service_->track_usage(config_.fairshare_half_life_s);
  if (auto s = service_->set_high_qos_users(config_.high_qos_users); !s) return Failed{s.error().message, 2};
  auto durability = daemon::parse_submit_durability(config_.submit_durability);
  if (!durability) return Failed{durability.error().message, 2};
  if (auto s = service_->set_submit_durability(*durability); !s) return Failed{s.error().message, 2};
  if (*durability == store::Durability::kWritten)
    spdlog::warn(
        "submits are acknowledged once written to the log, before it is synced (--submit-durability "
        "written): a killed scheduler loses none of them, a crash of the machine can lose the last ~20 ms");
  service_->run_passes_on_thread();  // schedule() off the event loop (daemon/pass_runner.hpp)
  service_->commit_submits_on_thread(std::move(*submit_st));  // and submit commits too
  service_->sync_log_on_thread();                             // and the delayed sync's fsync
  service_->checkpoint_on_thread();                           // and the log's checkpoints
  if (auto s = warm ? service_->open(std::move(*warm)) : service_->open(); !s)
    return Failed{s.error().message, 1};
  return std::nullopt;
}

Daemon::Step Daemon::open_hubs() {
  auto secret = read_secret(config_.agent_secret_file);
  if (!secret) return Failed{secret.error().message, 2};
  if (secret->empty() && !config_.node_keys)
    spdlog::warn("no --agent-secret-file and no --node-keys: agents will be refused");
  daemon::AgentHubOptions o;
  o.secret = *secret;
  o.node_keys = config_.node_keys;
  o.heartbeat_timeout_s = config_.heartbeat_timeout_s;
  // Heartbeats often enough that two may be lost before the timeout: min(5 s, timeout / 3), at least 1 s.
  o.heartbeat_interval_s = static_cast<int>(std::clamp<int64_t>(config_.heartbeat_timeout_s / 3, 1, 5));
  o.reconcile_grace_s = config_.reconcile_grace_s >= 0 ? config_.reconcile_grace_s : config_.heartbeat_timeout_s;
  o.launch_timeout_s = config_.launch_timeout_s;
  o.epoch = epoch_;
  hub_ = std::make_unique<daemon::AgentHub>(*service_, o);
  hub_->start();
  watch_ = std::make_unique<api::WatchHub>(*service_, config_.private_reads);
  watch_->start();
  hub_->set_metrics_listener([this](jobs::JobId job, const nlohmann::json& ev) { watch_->on_metrics(job, ev); });
  return std::nullopt;
}

Daemon::Step Daemon::open_http() {
  auto peer = peer_policy(config_);
  if (!peer) return Failed{peer.error().message, 2};
  if (watch_) watch_->set_peer_policy(*peer);
  const std::string web_root = config_.web_root == "none" ? ""
                               : config_.web_root.empty() ? api::default_web_root(exe_)
                                                          : config_.web_root;
  if (!web_root.empty()) spdlog::info("serving web files from {}", web_root);
  router_ = std::make_unique<api::Router>(
      *service_,
      api::RouterOptions{config_.private_reads, PROJECT_VERSION, topology::write_cluster_json(*cluster_), web_root,
                         *peer});
  router_->set_agent_hub(hub_.get());
  if (elector_)
    router_->set_ha_route([this, leading = elector_.get()](const api::HttpRequest& req) {
      ha::Position position;
      if (replicated()) position = [this] { return ha::LogPosition{log_head_.load(), ""}; };
      return ha::ha_route(req, *leading, position);
    });
  if (replicated()) {
    // While etcd does not take the leader's writes (no quorum), reads are answered from what this leader
    // holds, marked as possibly stale; writes are refused (503, Retry-After) until it does, or until the
    // lease runs out and this leader stops.
    server_.set_handler([this](api::HttpRequest&& req, api::Reply reply) {
      const int64_t since = unreplicated_since_ms_.load();
      if (since == 0) return router_->handle(std::move(req), reply);
      router_->handle(std::move(req), [reply, since](api::HttpResponse r) {
        r.headers.emplace_back("X-Railyard-Stale",
                               "etcd has not taken this leader's writes for " +
                                   std::to_string(wall_clock_ms() - since) + " ms: newer state may exist");
        reply(std::move(r));
      });
    });
  } else {
    server_.set_handler([this](api::HttpRequest&& req, api::Reply reply) { router_->handle(std::move(req), reply); });
  }
  server_.set_ws_acceptor(
      [this](const api::HttpRequest& req, std::shared_ptr<api::WsPeer> ws) -> std::optional<api::WsHandlers> {
        const std::string path = req.target.substr(0, req.target.find('?'));
        if (path == "/api/v1/watch") return watch_->accept(req, ws);
        if (path != "/api/v1/agent") return std::nullopt;
        auto peer = std::make_shared<HubPeer>(std::move(ws));
        daemon::Peer* key = peer.get();
        hub_->on_open(peer);
        return api::WsHandlers{[this, key](std::string_view text) { hub_->on_message(key, text); },
                               [this, key] { hub_->on_close(key); }};
      });
  tick_every_second(server_, *hub_);
  server_.set_body_limit(&api::Router::body_limit);
  server_.set_concurrent(&api::Router::concurrent);
  server_.set_limits(server_limits(config_));
  if (config_.tls_cert.empty() != config_.tls_key.empty()) return Failed{"--tls-cert and --tls-key go together", 2};
  if (!config_.tls_cert.empty()) {
    if (auto s = server_.enable_tls(config_.tls_cert, config_.tls_key); !s) return Failed{s.error().message, 2};
    spdlog::info("TLS on: HTTPS and WSS only (certificate {})", config_.tls_cert);
  }
  if (!config_.unix_socket.empty()) {
    auto mode = daemon::parse_socket_mode(config_.unix_socket_mode);
    if (!mode) return Failed{mode.error().message, 2};
    if (auto s = server_.listen_unix(config_.unix_socket, *mode); !s) return Failed{s.error().message, 1};
    spdlog::info("unix socket {} (mode {:04o}): requests without a token are made by the connecting Unix user",
                 config_.unix_socket, *mode);
  }
  auto port = server_.listen(listen_.host, listen_.port);
  if (!port) return Failed{port.error().message, 1};
  std::cout << "listening on " << listen_.host << ":" << *port << std::endl;
  return std::nullopt;
}

}  // namespace railyard
