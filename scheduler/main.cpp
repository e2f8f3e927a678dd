// railyard-scheduler: the central controller (issue 5, first slice).
//
//   railyard-scheduler [--listen HOST:PORT] [--db PATH] [--cluster FILE | --preset NAME --sus N] [--private]
//                      [--config FILE] [--web-root DIR] [--agent-secret-file PATH] [--node-keys]
//                      [--heartbeat-timeout S]
//                      [--reconcile-grace S] [--launch-timeout S] [--compact-wait S] [--compact-wait-max S]
//                      [--compact-wait-share X] [--pass-budget-ms MS] [--high-qos-users U,U...]
//                      [--tls-cert PEM --tls-key PEM] [--max-connections N] [--header-timeout S]
//                      [--unix-socket PATH [--admin-group NAME]]
//                      [--ha-etcd URL[,URL...] --ha-name NAME [--ha-advertise URL] [--ha-ttl S]
//                       [--ha-state etcd|shared] [--ha-log-keep N] [--ha-etcd-ca PEM]]
//   railyard-scheduler token create --db PATH --user U [--role user|admin] [--expires 90d|never]
//   railyard-scheduler node-key issue|rotate --db PATH --node NAME... [--key-file F] [--grace S] [--force]
//   railyard-scheduler routes        (the route table as JSON: method, path, role)
//
// Command-line parsing and the small commands; serving is the Daemon's (daemon_root.hpp: the HTTP server is
// the event loop, the Service holds the state and the scheduling loop, the Router maps requests onto it,
// WebSocket upgrades go to the AgentHub and the WatchHub).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>

#include "scheduler/api/auth.hpp"
#include "scheduler/api/router.hpp"
#include "scheduler/daemon/config.hpp"
#include "scheduler/daemon_root.hpp"
#include "scheduler/node_key_cmd.hpp"
#include "scheduler/queue/priority.hpp"
#include "scheduler/store/sqlite_store.hpp"

namespace {

using namespace railyard;

int fail(const std::string& message, int code = 1) {
  std::cerr << "railyard-scheduler: " << message << "\n";
  return code;
}

int token_create(const std::string& db, const std::string& user, const std::string& role_name,
                 const std::string& expires) {
  auto role = store::parse_role(role_name);
  if (!role) return fail("--role " + role_name + ": must be user or admin", 2);
  if (user.empty()) return fail("--user: must not be empty", 2);
  auto life = api::parse_lifetime(expires);
  if (!life) return fail("--" + life.error().message, 2);
  auto st = store::SqliteStateStore::open(db);
  if (!st) return fail(st.error().message);
  auto token = daemon::generate_token();
  if (!token) return fail(token.error().message);
  store::TokenRecord t{daemon::sha256_hex(*token), user, *role};
  t.created = wall_clock_seconds();
  if (*life) t.expires = t.created + **life;
  if (auto s = (*st)->add_token(t); !s) return fail(s.error().message);
  std::cerr << "created " << (*role == store::Role::kAdmin ? "an " : "a ") << role_name << " token for "
            << user << " (id " << t.id() << ", " << (*life ? "expires in " + expires : "never expires")
            << "; shown once; store it safely)\n";
  std::cout << *token << std::endl;
  return 0;
}

// The options of serving (the default command); `config_file`: --config.
void add_serve_options(CLI::App& app, daemon::DaemonConfig& config, std::string& config_file) {
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
                 "for a placement on its minimum (one holding a compact reservation that makes it faster waits "
                 "until it starts, at most --compact-wait-max; scheduler/README.md); 0: off; default 300")
      ->check(CLI::Range(0, 86400));
  app.add_option("--compact-wait-max", config.compact_wait_max_s,
                 "longest seconds a multi-node job waits for a placement on its fewest leaf groups; "
                 "default 604800 (7 days)")
      ->check(CLI::Range(0, daemon::kMaxCompactWaitMaxS));
  char share[32];
  std::snprintf(share, sizeof share, "%g", config.compact_wait_share);
  app.add_option("--compact-wait-share", config.compact_wait_share,
                 std::string("a compact wait that buys the job no speed by the cost model (a non-blocking "
                             "fabric), or has no reservation, lasts at most this many times the job's time "
                             "limit; default ") + share)
      ->check(CLI::Range(0.0, daemon::kMaxCompactWaitShare));
  app.add_option("--pass-budget-ms", config.pass_budget_ms,
                 "longest a scheduling pass may take, in milliseconds: it stops between jobs, the jobs it did "
                 "not reach keep their reason, and another pass follows (scheduler/README.md); 0: no bound; "
                 "default 1000")
      ->check(CLI::Range(0, 60000));
  const sched::PolicyConfig defaults;
  app.add_option("--priority-weights", config.priority_weights,
                 "multifactor priority weights to change, e.g. size=0,age=2000 (keys qos, age, fairshare, size; "
                 "defaults " + sched::priority_weights_text(defaults) + ")");
  app.add_option("--fairshare-half-life", config.fairshare_half_life_s,
                 "seconds in which a user's or project's past GPU use loses half its weight in the fair-share "
                 "factor; default 604800 (7 days)")
      ->check(CLI::Range(daemon::kMinFairShareHalfLifeS, daemon::kMaxFairShareHalfLifeS));
  app.add_option("--high-qos-users", config.high_qos_users,
                 "users who may submit QoS high besides admins (a high job goes before every normal one and may "
                 "preempt scavenger jobs): \"alice,bob\", \"*\" for everyone; default: admins only");
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
  app.add_option("--max-connections-per-address", config.max_connections_per_address,
                 "TCP connections open at once from one address; one more is answered 503 and closed. "
                 "Default 512; 0: no bound")
      ->check(CLI::Range(0, 1'048'576));
  app.add_option(
      "--unix-socket", config.unix_socket,
      "also accept on this Unix socket (mode --unix-socket-mode, removed on exit): a request without a "
      "token is made by the connecting Unix user (SO_PEERCRED), an admin when root, the scheduler's own "
      "user or in --admin-group");
  app.add_option("--unix-socket-mode", config.unix_socket_mode,
                 "the Unix socket's mode from its creation, octal: 0666 (default: every local user may "
                 "connect, each as who the kernel says) or 0600 (only the scheduler's user)");
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
  app.add_option("--ha-state", config.ha_state,
                 "where the state lives with --ha-etcd: etcd (the default: each scheduler keeps its own --db, "
                 "the leader's every write is replicated through etcd before it is acknowledged) or shared (one "
                 "--db on storage every scheduler mounts)")
      ->check(CLI::IsMember({"etcd", "shared"}));
  app.add_option("--ha-log-keep", config.ha_log_keep,
                 "replicated state: entries etcd keeps behind the leader once every live scheduler applied them "
                 "(a scheduler restarting within them catches up without a snapshot); a live one more than 4 "
                 "times this behind rebuilds from a snapshot. Default 20000")
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
  app.add_option("--ha-etcd-ca", config.ha_etcd_ca,
                 "PEM CA bundle that verifies https:// --ha-etcd endpoints (default: the system's trust store)");
  app.add_option("--ha-etcd-cert", config.ha_etcd_cert,
                 "PEM client certificate shown to etcd members that require one (--client-cert-auth); with "
                 "--ha-etcd-key");
  app.add_option("--ha-etcd-key", config.ha_etcd_key, "the private key of --ha-etcd-cert (PEM)");
}

// The config-file keys whose flags the command line gave: flags win over the file.
std::set<std::string> flags_given(const CLI::App& app) {
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
                                                        {"compact_wait_max", "--compact-wait-max"},
                                                        {"compact_wait_share", "--compact-wait-share"},
                                                        {"pass_budget_ms", "--pass-budget-ms"},
                                                        {"priority_weights", "--priority-weights"},
                                                        {"fairshare_half_life", "--fairshare-half-life"},
                                                        {"tls_cert", "--tls-cert"},
                                                        {"tls_key", "--tls-key"},
                                                        {"submit_durability", "--submit-durability"},
                                                        {"max_connections", "--max-connections"},
                                                        {"header_timeout", "--header-timeout"},
                                                        {"max_connections_per_address",
                                                         "--max-connections-per-address"},
                                                        {"unix_socket", "--unix-socket"},
                                                        {"unix_socket_mode", "--unix-socket-mode"},
                                                        {"admin_group", "--admin-group"},
                                                        {"high_qos_users", "--high-qos-users"},
                                                        {"ha_etcd", "--ha-etcd"},
                                                        {"ha_name", "--ha-name"},
                                                        {"ha_advertise", "--ha-advertise"},
                                                        {"ha_ttl", "--ha-ttl"},
                                                        {"ha_state", "--ha-state"},
                                                        {"ha_log_keep", "--ha-log-keep"},
                                                        {"ha_etcd_ca", "--ha-etcd-ca"},
                                                        {"ha_etcd_cert", "--ha-etcd-cert"},
                                                        {"ha_etcd_key", "--ha-etcd-key"}};
  for (const auto& [key, flag] : dashed)
    if (app.count(flag) > 0) given.insert(key);
  return given;
}

}  // namespace

int main(int argc, char** argv) {
  store::configure_sqlite();
  spdlog::set_default_logger(spdlog::stderr_color_mt("railyard-scheduler"));
  CLI::App app{"railyard-scheduler: the Railyard job scheduler daemon"};
  daemon::DaemonConfig config;
  std::string config_file;
  add_serve_options(app, config, config_file);

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
    if (auto s = daemon::merge_config_file(config_file, flags_given(app), config); !s)
      return fail(s.error().message, 2);
  }
  return Daemon(config, "/proc/self/exe").run();
}
