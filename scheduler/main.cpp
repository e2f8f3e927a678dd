// railyard-scheduler: the central controller (issue 5, first slice).
//
//   railyard-scheduler [--listen HOST:PORT] [--db PATH] [--cluster FILE | --preset NAME --sus N] [--private]
//                      [--config FILE] [--web-root DIR] [--agent-secret-file PATH] [--node-keys]
//                      [--heartbeat-timeout S]
//                      [--reconcile-grace S] [--launch-timeout S] [--compact-wait S]
//                      [--tls-cert PEM --tls-key PEM] [--max-connections N] [--header-timeout S]
//                      [--unix-socket PATH [--admin-group NAME]]
//                      [--ha-etcd URL[,URL...] --ha-name NAME [--ha-advertise URL] [--ha-ttl S]]
//   railyard-scheduler token create --db PATH --user U [--role user|admin] [--expires 90d|never]
//   railyard-scheduler node-key issue|rotate --db PATH --node NAME... [--key-file F] [--grace S] [--force]
//   railyard-scheduler routes        (the route table as JSON: method, path, role)
//
// Wiring only: the HTTP server (api/server) is the event loop; the Service (daemon/) holds the state and the
// scheduling loop; the Router (api/router) maps requests onto the Service; WebSocket upgrades go to the
// AgentHub (/api/v1/agent) and the WatchHub (/api/v1/watch).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "scheduler/api/auth.hpp"
#include "scheduler/api/router.hpp"
#include "scheduler/api/server.hpp"
#include "scheduler/api/static_files.hpp"
#include "scheduler/api/watch.hpp"
#include "scheduler/daemon/agents.hpp"
#include "scheduler/daemon/config.hpp"
#include "scheduler/daemon/service.hpp"
#include "scheduler/ha/elector.hpp"
#include "scheduler/ha/etcd.hpp"
#include "scheduler/ha/standby.hpp"
#include "scheduler/node_key_cmd.hpp"
#include "scheduler/queue/priority.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "topology/io_json.hpp"

namespace {

using namespace railyard;

int fail(const std::string& message, int code = 1) {
  std::cerr << "railyard-scheduler: " << message << "\n";
  return code;
}

int64_t wall_clock_seconds();

int token_create(const std::string& db, const std::string& user, const std::string& role_name,
                 const std::string& expires) {
  auto role = store::parse_role(role_name);
  if (!role) return fail("--role " + role_name + ": must be user or admin", 2);
  if (user.empty()) return fail("--user: must not be empty", 2);
  auto life = api::parse_lifetime(expires);
  if (!life) return fail("--" + life.error().message, 2);
  auto st = store::SqliteStateStore::open(db);
  if (!st) return fail(st.error().message);
  auto token = api::generate_token();
  if (!token) return fail(token.error().message);
  store::TokenRecord t{api::sha256_hex(*token), user, *role};
  t.created = wall_clock_seconds();
  if (*life) t.expires = t.created + **life;
  if (auto s = (*st)->add_token(t); !s) return fail(s.error().message);
  std::cerr << "created " << (*role == store::Role::kAdmin ? "an " : "a ") << role_name << " token for "
            << user << " (id " << t.id() << ", " << (*life ? "expires in " + expires : "never expires")
            << "; shown once; store it safely)\n";
  std::cout << *token << std::endl;
  return 0;
}

// Every connection is a file descriptor: raises the soft RLIMIT_NOFILE to the hard one, and lowers the
// connection cap to what the limit leaves after kReservedFds (database, logs, etcd), with a warning.
api::ServerLimits server_limits(const daemon::DaemonConfig& config) {
  constexpr rlim_t kReservedFds = 128;
  api::ServerLimits limits{static_cast<size_t>(config.max_connections),
                           std::chrono::seconds(config.header_timeout_s)};
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

int64_t wall_clock_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
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
  std::ifstream in(path);
  if (!in) return not_found("--agent-secret-file " + path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
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

// Exit status of a leader that stopped leading (high availability): a supervisor restarts it as a standby.
constexpr int kExitDeposed = 75;

// A leader that lost its lease, or found a newer epoch in the database, ends at once: no pass, no order to an
// agent and no write can follow (agents keep their workers running; the next leader reconciles).
[[noreturn]] void step_down(const std::string& why) {
  spdlog::critical("ha: no longer the leader ({}); exiting so that nothing more is done under this epoch", why);
  spdlog::default_logger()->flush();
  std::_Exit(kExitDeposed);
}

// Serves as a standby (ha/standby.hpp) on the daemon's address until the elector wins: the epoch; an error
// when stopped (SIGINT/SIGTERM) first. The standby's listener is closed before the leader's opens.
Result<int64_t> serve_as_standby(ha::Elector& elector, const daemon::ListenAddress& listen,
                                 const daemon::DaemonConfig& config) {
  api::HttpServer server;
  server.set_limits(server_limits(config));
  server.set_handler([&elector](api::HttpRequest&& req, api::Reply reply) {
    if (auto r = ha::ha_route(req, elector)) return reply(std::move(*r));
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

int run_daemon(const daemon::DaemonConfig& config, const std::string& exe) {
  auto listen = daemon::parse_listen(config.listen);
  if (!listen) return fail(listen.error().message, 2);
  auto cluster = daemon::load_cluster(config);
  if (!cluster) return fail(cluster.error().message, 2);
  std::unique_ptr<ha::Elector> elector;
  int64_t epoch = 0;
  if (!config.ha_etcd.empty()) {
    if (listen->port == 0) return fail("--ha-etcd needs a fixed --listen port (clients and agents list it)", 2);
    ha::ElectorOptions eo;
    eo.endpoints = ha::split_endpoints(config.ha_etcd);
    eo.name = config.ha_name.empty() ? listen->host + ":" + std::to_string(listen->port) : config.ha_name;
    eo.address = !config.ha_advertise.empty()
                     ? config.ha_advertise
                     : std::string(config.tls_cert.empty() ? "http://" : "https://") + listen->host + ":" +
                           std::to_string(listen->port);
    eo.ttl_s = config.ha_ttl_s;
    eo.margin = std::chrono::milliseconds(std::max(500, config.ha_ttl_s * 300));  // 1.5 s for the default 5 s
    spdlog::info("ha: {} at {}, etcd {}, lease TTL {} s", eo.name, eo.address, config.ha_etcd, eo.ttl_s);
    elector = std::make_unique<ha::Elector>(eo, step_down);
    auto won = serve_as_standby(*elector, *listen, config);
    if (!won) {
      if (won.error().message == "stopped") return 0;
      return fail(won.error().message);
    }
    epoch = *won;
  }
  // With HA only the epoch holder gets here: it opens the shared database, fences it with its epoch (a
  // database claimed by a newer one refuses it), and reconciles with the agents as a restart does.
  auto st = store::SqliteStateStore::open(config.db);
  if (!st) return fail(st.error().message);
  auto submit_st = store::SqliteStateStore::open(config.db);  // submits commit on their own connection
  if (!submit_st) return fail(submit_st.error().message);
  if (epoch > 0) {
    if (auto s = (*st)->fence(epoch, true); !s) step_down(s.error().message);
    if (auto s = (*submit_st)->fence(epoch, false); !s) step_down(s.error().message);
    (*st)->set_on_fenced(step_down);
    (*submit_st)->set_on_fenced(step_down);
    spdlog::info("ha: leading with epoch {}; database {} claimed", epoch, config.db);
  }
  spdlog::info("cluster {}: {} nodes, {} GPUs; db {} (schema v{})", cluster->name(), cluster->node_count(),
               cluster->gpu_count(), config.db, (*st)->schema_version());

  api::HttpServer server;
  daemon::Loop loop{[&server](std::function<void()> fn) { server.post(std::move(fn)); },
                    [&server](std::chrono::milliseconds delay, std::function<void()> fn) {
                      server.post_after(delay, std::move(fn));
                    }};
  daemon::Service service(*cluster, std::move(*st), std::move(loop), wall_clock_seconds);
  service.set_clock_ms(wall_clock_ms);
  sched::PolicyConfig policy;
  policy.compact_wait_s = config.compact_wait_s;
  if (auto s = sched::apply_priority_weights(config.priority_weights, policy); !s)
    return fail("--priority-weights " + s.error().message, 2);
  service.set_policy(policy);
  auto durability = daemon::parse_submit_durability(config.submit_durability);
  if (!durability) return fail(durability.error().message, 2);
  if (auto s = service.set_submit_durability(*durability); !s) return fail(s.error().message, 2);
  if (*durability == store::Durability::kWritten)
    spdlog::warn(
        "submits are acknowledged once written to the log, before it is synced (--submit-durability "
        "written): a killed scheduler loses none of them, a crash of the machine can lose the last ~20 ms");
  service.run_passes_on_thread();  // schedule() off the event loop (daemon/service.hpp)
  service.commit_submits_on_thread(std::move(*submit_st));  // and submit commits too
  service.sync_log_on_thread();                             // and the delayed sync's fsync
  service.checkpoint_on_thread();                           // and the log's checkpoints
  if (auto s = service.open(); !s) return fail(s.error().message);
  auto secret = read_secret(config.agent_secret_file);
  if (!secret) return fail(secret.error().message, 2);
  if (secret->empty() && !config.node_keys) spdlog::warn("no --agent-secret-file and no --node-keys: agents will be refused");
  daemon::AgentHubOptions hub_options;
  hub_options.secret = *secret;
  hub_options.node_keys = config.node_keys;
  hub_options.heartbeat_timeout_s = config.heartbeat_timeout_s;
  // Heartbeats often enough that two may be lost before the timeout: min(5 s, timeout / 3), at least 1 s.
  hub_options.heartbeat_interval_s = static_cast<int>(std::clamp<int64_t>(config.heartbeat_timeout_s / 3, 1, 5));
  hub_options.reconcile_grace_s =
      config.reconcile_grace_s >= 0 ? config.reconcile_grace_s : config.heartbeat_timeout_s;
  hub_options.launch_timeout_s = config.launch_timeout_s;
  hub_options.epoch = epoch;
  daemon::AgentHub hub(service, hub_options);
  hub.start();
  api::WatchHub watch(service, config.private_reads);
  watch.start();
  hub.set_metrics_listener(
      [&watch](jobs::JobId job, const nlohmann::json& ev) { watch.on_metrics(job, ev); });
  auto peer = peer_policy(config);
  if (!peer) return fail(peer.error().message, 2);
  const std::string web_root = config.web_root == "none" ? ""
                               : config.web_root.empty() ? api::default_web_root(exe)
                                                         : config.web_root;
  if (!web_root.empty()) spdlog::info("serving web files from {}", web_root);
  api::Router router(service, {config.private_reads, PROJECT_VERSION, topology::write_cluster_json(*cluster),
                               web_root, *peer});
  router.set_agent_hub(&hub);
  if (elector)
    router.set_ha_route(
        [leading = elector.get()](const api::HttpRequest& req) { return ha::ha_route(req, *leading); });
  server.set_handler(
      [&router](api::HttpRequest&& req, api::Reply reply) { router.handle(std::move(req), reply); });
  server.set_ws_acceptor([&hub, &watch](const api::HttpRequest& req,
                                        std::shared_ptr<api::WsPeer> ws) -> std::optional<api::WsHandlers> {
    const std::string path = req.target.substr(0, req.target.find('?'));
    if (path == "/api/v1/watch") return watch.accept(req, ws);
    if (path != "/api/v1/agent") return std::nullopt;
    auto peer = std::make_shared<HubPeer>(std::move(ws));
    daemon::Peer* key = peer.get();
    hub.on_open(peer);
    return api::WsHandlers{[&hub, key](std::string_view text) { hub.on_message(key, text); },
                           [&hub, key] { hub.on_close(key); }};
  });
  tick_every_second(server, hub);
  server.set_body_limit(&api::Router::body_limit);
  server.set_concurrent(&api::Router::concurrent);
  server.set_limits(server_limits(config));
  if (config.tls_cert.empty() != config.tls_key.empty())
    return fail("--tls-cert and --tls-key go together", 2);
  if (!config.tls_cert.empty()) {
    if (auto s = server.enable_tls(config.tls_cert, config.tls_key); !s) return fail(s.error().message, 2);
    spdlog::info("TLS on: HTTPS and WSS only (certificate {})", config.tls_cert);
  }
  if (!config.unix_socket.empty()) {
    if (auto s = server.listen_unix(config.unix_socket); !s) return fail(s.error().message);
    spdlog::info("unix socket {}: requests without a token are made by the connecting Unix user",
                 config.unix_socket);
  }
  auto port = server.listen(listen->host, listen->port);
  if (!port) return fail(port.error().message);
  std::cout << "listening on " << listen->host << ":" << *port << std::endl;
  server.run();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("railyard-scheduler"));
  CLI::App app{"railyard-scheduler: the Railyard job scheduler daemon"};
  daemon::DaemonConfig config;
  std::string config_file;
  app.add_option("--listen", config.listen, "HOST:PORT to listen on (port 0: any free port)");
  app.add_option("--db", config.db, "SQLite database file (created when missing)");
  app.add_option("--cluster", config.cluster, "cluster file (JSON or Slurm topology.conf)");
  app.add_option("--preset", config.preset, "SuperPOD preset when no --cluster is given");
  app.add_option("--sus", config.sus, "scalable units of the preset")->check(CLI::Range(1, 10000));
  app.add_flag("--private", config.private_reads, "require a token on read-only routes too");
  app.add_option("--config", config_file, "JSON config file with the same keys; flags win");
  app.add_option("--web-root", config.web_root,
                 "directory of the dashboard's files, served at / ('none': off; default: "
                 "<exe>/../share/railyard/web, else ./web/dist)");
  app.add_option("--agent-secret-file", config.agent_secret_file,
                 "file holding the cluster secret agents may authenticate with (opt-in, small clusters: it speaks "
                 "for every node)");
  app.add_flag("--node-keys", config.node_keys,
               "accept agents by their own node keys (railyard-scheduler node-key issue; scheduler/PROTOCOL.md)");
  app.add_option("--heartbeat-timeout", config.heartbeat_timeout_s,
                 "seconds without a frame before a node is DOWN")
      ->check(CLI::Range(1, 86400));
  app.add_option("--reconcile-grace", config.reconcile_grace_s,
                 "seconds after start before unregistered nodes are DOWN (default: the heartbeat timeout)")
      ->check(CLI::Range(0, 86400));
  app.add_option("--launch-timeout", config.launch_timeout_s,
                 "seconds a connected node may leave a launch order unanswered before the job fails (or is "
                 "requeued); default 120")
      ->check(CLI::Range(1, 86400));
  app.add_option("--compact-wait", config.compact_wait_s,
                 "least seconds a multi-node job that fits now only on more leaf groups than its minimum waits "
                 "for a placement on its minimum (one holding a compact reservation waits until it starts, at "
                 "most 7 days; scheduler/README.md); 0: off; default 300")
      ->check(CLI::Range(0, 86400));
  const sched::PolicyConfig defaults;
  app.add_option("--priority-weights", config.priority_weights,
                 "multifactor priority weights to change, e.g. size=0,age=2000 (keys qos, age, fairshare, size; "
                 "defaults " + sched::priority_weights_text(defaults) + ")");
  app.add_option("--tls-cert", config.tls_cert, "PEM certificate chain: serve HTTPS/WSS only (with --tls-key)");
  app.add_option("--tls-key", config.tls_key, "PEM private key of --tls-cert");
  app.add_option(
         "--submit-durability", config.submit_durability,
         "when a submit is acknowledged: synced (on disk, the default) or written (in the database's "
         "log: a killed scheduler loses none, a crash of the machine can lose the last ~20 ms; fsynced "
         "within 20 ms)")
      ->check(CLI::IsMember({"synced", "written"}));
  app.add_option(
         "--max-connections", config.max_connections,
         "connections open at once (HTTP, WebSocket: agents and watchers count); one more is answered "
         "503 and closed. Default 4096; lowered to fit the file-descriptor limit")
      ->check(CLI::Range(1, 1'048'576));
  app.add_option("--header-timeout", config.header_timeout_s,
                 "seconds a connection may take to send a request's header, idle keep-alive included; slower "
                 "ones are closed (default 10)")
      ->check(CLI::Range(1, 3600));
  app.add_option(
      "--unix-socket", config.unix_socket,
      "also accept on this Unix socket (mode 0666, removed on exit): a request without a token is "
      "made by the connecting Unix user (SO_PEERCRED), an admin when root, the scheduler's own user "
      "or in --admin-group");
  app.add_option("--admin-group", config.admin_group,
                 "Unix group whose members are admins on the --unix-socket (default: none)");
  app.add_option("--ha-etcd", config.ha_etcd,
                 "high availability: etcd client URLs, comma-separated; the schedulers that share them elect a "
                 "leader, the others stand by (they answer /healthz and GET /api/v1/leader only) and take over "
                 "the shared --db when it fails");
  app.add_option("--ha-name", config.ha_name, "this scheduler's name among them (default: the --listen address)");
  app.add_option("--ha-advertise", config.ha_advertise,
                 "the URL clients and agents reach this scheduler at (default: http(s)://<--listen>)");
  app.add_option("--ha-ttl", config.ha_ttl_s,
                 "seconds of the leader's etcd lease: a dead leader is replaced after about this long; a leader "
                 "that cannot renew it stops 30% of it earlier")
      ->check(CLI::Range(2, 60));

  auto* token = app.add_subcommand("token", "manage API tokens");
  token->require_subcommand(1);
  auto* create = token->add_subcommand("create", "create a token; prints it alone on the last line");
  std::string token_db, token_user, token_role = "user";
  create->add_option("--db", token_db, "SQLite database file")->required();
  create->add_option("--user", token_user, "the token's user")->required();
  create->add_option("--role", token_role, "user or admin");
  std::string token_expires = "90d";
  create->add_option("--expires", token_expires,
                     "lifetime: N followed by s, m, h, d or w, or never (default 90d)");
  auto* routes = app.add_subcommand("routes", "print the HTTP route table as JSON (method, path, role)");
  const NodeKeyCommand node_key = add_node_key_command(app);
  CLI11_PARSE(app, argc, argv);

  if (*create) return token_create(token_db, token_user, token_role, token_expires);
  if (node_key.selected()) return node_key.run();
  if (*routes) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : api::Router::routes())
      out.push_back({{"method", r.method}, {"path", r.pattern}, {"role", api::to_string(r.access)}});
    std::cout << out.dump(1) << std::endl;
    return 0;
  }
  if (!config_file.empty()) {
    std::set<std::string> given;
    for (const char* key : {"listen", "db", "cluster", "preset", "sus", "private"})
      if (app.count(std::string("--") + key) > 0) given.insert(key);
    const std::pair<const char*, const char*> dashed[] = {{"web_root", "--web-root"},
                                                          {"agent_secret_file", "--agent-secret-file"},
                                                          {"node_keys", "--node-keys"},
                                                          {"heartbeat_timeout", "--heartbeat-timeout"},
                                                          {"reconcile_grace", "--reconcile-grace"},
                                                          {"launch_timeout", "--launch-timeout"},
                                                          {"compact_wait", "--compact-wait"},
                                                          {"priority_weights", "--priority-weights"},
                                                          {"tls_cert", "--tls-cert"},
                                                          {"tls_key", "--tls-key"},
                                                          {"submit_durability", "--submit-durability"},
                                                          {"max_connections", "--max-connections"},
                                                          {"header_timeout", "--header-timeout"},

                                                          {"unix_socket", "--unix-socket"},
                                                          {"admin_group", "--admin-group"}};
    for (const auto& [key, flag] : dashed)
      if (app.count(flag) > 0) given.insert(key);
    if (auto s = daemon::merge_config_file(config_file, given, config); !s) return fail(s.error().message, 2);
  }
  return run_daemon(config, "/proc/self/exe");
}
