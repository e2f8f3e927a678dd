// `railyard nodes`, `drain`, `resume`, `node remove|add|rotate-key`, `token create|list|revoke`, `cluster status`.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/job_util.hpp"
#include "cli/local_cluster.hpp"
#include "cli/output.hpp"
#include "common/hostlist.hpp"
#include "common/protocol/key_file.hpp"

namespace railyard::cli {
namespace {

using Json = nlohmann::json;

// --- nodes -------------------------------------------------------------------------------------------

struct NodesOptions {
  ServerOptions server;
  std::vector<std::string> filter;
  std::string state;
  bool json = false;
};

void run_nodes(const NodesOptions& o) {
  const auto wanted_list = expand_nodes_or_fail(o.filter);
  const std::set<std::string> wanted(wanted_list.begin(), wanted_list.end());
  Api api(o.server);
  Json answer = api.get("/nodes");
  Json nodes = Json::array();
  for (auto& n : answer["nodes"]) {
    if (!wanted.empty() && !wanted.count(n.value("name", ""))) continue;
    if (!o.state.empty() && n.value("health", "") != o.state) continue;
    nodes.push_back(n);
  }
  if (o.json) return print_json({{"nodes", nodes}});
  Table t({"NODE", "STATE", "TYPE", "GPUS", "USED", "FREE", "LEAF", "REASON"});
  int total = 0, used = 0;
  for (const auto& n : nodes) {
    const int gpus = n.value("gpus", 0);
    const int alloc = n.value("gpus_allocated", 0);
    total += gpus;
    used += alloc;
    const std::string health = n.value("health", "?");
    t.add({n.value("name", ""), health, n.value("gpu_type", ""), std::to_string(gpus), std::to_string(alloc),
           std::to_string(gpus - alloc), cell(n.value("leaf", Json())), cell(n.value("reason", Json()))},
          {Color::kNone, state_color(health)});
  }
  if (t.empty()) {
    std::cerr << "railyard: no nodes match" << std::endl;
    if (!wanted.empty()) throw CLI::RuntimeError(kExitNotFound);
    return;
  }
  t.print();
  std::cout << nodes.size() << " nodes, " << used << "/" << total << " GPUs used\n";
}

void add_nodes_command(CLI::App& app) {
  auto o = std::make_shared<NodesOptions>();
  auto* cmd = app.add_subcommand("nodes", "List nodes: state, GPUs used and free, reason");
  cmd->add_option("nodes", o->filter, "Only these nodes (host lists: dgx[001-016,020])");
  cmd->add_option("--state", o->state, "Only nodes in this state (up, drain, down)");
  cmd->add_flag("--json", o->json, "The API's JSON: {\"nodes\": [...]}");
  add_server_options(*cmd, o->server);
  cmd->footer(R"(Examples:
  railyard nodes
  railyard nodes 'dgx[001-004]' --json
  railyard nodes --state drain

Exit codes: 0 ok, 1 scheduler unreachable, 2 bad node list, 3 no node matches the list.)");
  cmd->callback([o] { run_nodes(*o); });
}

// --- drain, resume, node remove ----------------------------------------------------------------------

struct NodeActionOptions {
  ServerOptions server;
  std::vector<std::string> nodes;
  std::string reason;
};

// POSTs /nodes/NAME/ACTION for every node; reports each, exits with the worst code.
void run_node_action(const NodeActionOptions& o, const std::string& action) {
  const auto names = expand_nodes_or_fail(o.nodes);
  Api api(o.server);
  api.require_token();
  const Json body = o.reason.empty() ? Json::object() : Json{{"reason", o.reason}};
  int worst = kExitOk;
  for (const auto& name : names) {
    auto r = api.call("POST", "/nodes/" + url_encode(name) + "/" + action, body);
    if (!r) {
      if (r.error().code == ErrorCode::kUnavailable) fail(r.error());
      std::cerr << "railyard: " << r.error().message << std::endl;
      worst = std::max(worst, exit_code(r.error().code));
      continue;
    }
    std::cout << name << " " << r->value("health", action == "remove" ? "removed" : "") << "\n";
  }
  if (worst != kExitOk) throw CLI::RuntimeError(worst);
}

CLI::App* add_node_action(CLI::App& parent, const std::string& name, const std::string& action,
                          const std::string& help, const std::string& example) {
  auto o = std::make_shared<NodeActionOptions>();
  auto* cmd = parent.add_subcommand(name, help);
  cmd->add_option("nodes", o->nodes, "Node names or host lists (dgx[001-016,020])")->required();
  if (action == "drain") cmd->add_option("--reason", o->reason, "Why (shown in `railyard nodes`)")->required();
  add_server_options(*cmd, o->server);
  cmd->footer("Admin only.\n\nExamples:\n  " + example +
              "\n\nExit codes: 0 ok, 1 scheduler unreachable, 2 bad node list, 3 unknown node or not an admin.");
  cmd->callback([o, action] { run_node_action(*o, action); });
  return cmd;
}

// --- token create, list, revoke -------------------------------------------------------------------------

struct TokenOptions {
  ServerOptions server;
  std::string db, user, role = "user", state_dir, expires;
  bool admin = false, json = false;
  std::vector<std::string> ids;
};

// The scheduler's database: --db, else the local cluster's (`railyard up`) under --state-dir.
std::string scheduler_db(const std::string& db, const std::string& state_dir) {
  if (!db.empty()) return db;
  const std::string dir = state_dir.empty() ? default_state_dir() : state_dir;
  const std::string local = dir + "/railyard.db";
  if (!std::filesystem::exists(local))
    fail_usage("give --db with the scheduler's database (railyard-scheduler --db); no local cluster at " + dir);
  return local;
}

// Runs `railyard-scheduler ARGS...` on the scheduler's host (its output goes to ours); exits with its
// exit status.
void run_scheduler_tool(const std::vector<std::string>& args, const std::string& hint) {
  const std::string bin = find_program("railyard-scheduler");
  if (bin.empty()) fail(not_found("railyard-scheduler not found; on the scheduler's host run: railyard-scheduler " + hint));
  std::vector<char*> argv{const_cast<char*>(bin.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(bin.c_str(), argv.data());
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 127) throw CLI::RuntimeError(kExitInternal);
  if (WEXITSTATUS(status) != 0) throw CLI::RuntimeError(WEXITSTATUS(status));
}

// --db or --state-dir: on the database; else through the API as an admin (a token, or a unix: URL); with
// neither, on the local cluster's database when there is one.
void run_token_create(const TokenOptions& o) {
  const std::string role = o.admin ? "admin" : o.role;
  Api api(o.server);
  if (o.db.empty() && o.state_dir.empty() && api.identified()) {
    Json body = {{"user", o.user}, {"role", role}};
    if (!o.expires.empty()) body["expires"] = o.expires;
    const Json t = api.post("/tokens", body);
    std::cerr << "created " << (role == "admin" ? "an " : "a ") << role << " token for " << o.user << " (id "
              << t.value("id", "") << ", expires "
              << (t["expires"].is_null() ? "never" : format_time(t["expires"]))
              << "; shown once; store it safely)" << std::endl;
    std::cout << t.value("token", "") << std::endl;
    return;
  }
  const std::string db = scheduler_db(o.db, o.state_dir);
  const std::string expires = o.expires.empty() ? "90d" : o.expires;
  run_scheduler_tool({"token", "create", "--db", db, "--user", o.user, "--role", role, "--expires", expires},
                     "token create --db DB --user " + o.user + " --role " + role);
}

std::string token_state(const Json& t) {
  if (!t["revoked"].is_null()) return "revoked";
  const auto now = static_cast<int64_t>(std::time(nullptr));
  if (!t["expires"].is_null() && t["expires"].get<int64_t>() <= now) return "expired";
  return "active";
}

void run_token_list(const TokenOptions& o) {
  Api api(o.server);
  api.require_token();
  const Json answer = api.get("/tokens");
  if (o.json) return print_json(answer);
  Table t({"ID", "USER", "ROLE", "CREATED", "EXPIRES", "LAST USED", "STATE"});
  auto when = [](const Json& v, const char* none) {
    return v.is_null() || v == 0 ? std::string(none) : format_time(v);
  };
  for (const auto& k : answer.value("tokens", Json::array()))
    t.add({k.value("id", ""), k.value("user", ""), k.value("role", ""), when(k["created"], "-"),
           when(k["expires"], "never"), when(k["last_used"], "never"), token_state(k)});
  t.print();
}

void run_token_revoke(const TokenOptions& o) {
  Api api(o.server);
  api.require_token();
  int worst = kExitOk;
  for (const auto& id : o.ids) {
    auto r = api.call("POST", "/tokens/" + url_encode(id) + "/revoke", Json::object());
    if (!r) {
      if (r.error().code == ErrorCode::kUnavailable) fail(r.error());
      std::cerr << "railyard: " << r.error().message << std::endl;
      worst = std::max(worst, exit_code(r.error().code));
      continue;
    }
    std::cout << id << " revoked\n";
  }
  if (worst != kExitOk) throw CLI::RuntimeError(worst);
}

// --- node add, node rotate-key ------------------------------------------------------------------------

struct NodeKeyOptions {
  ServerOptions server;
  std::vector<std::string> nodes;
  std::string db, state_dir, key_file, key_dir;
  long long grace_s = 600;
  bool force = false;
};

// --db or --state-dir: on the database (railyard-scheduler node-key); else through the API as an admin (a
// token, or a unix: URL): what a scheduler with replicated state needs, so every controller has the key;
// with neither, on the local cluster's database when there is one.
void run_node_key(const NodeKeyOptions& o, bool rotate) {
  Api api(o.server);
  if (o.db.empty() && o.state_dir.empty() && api.identified()) {
    std::string lines;
    const auto nodes = expand_nodes_or_fail(o.nodes);
    for (const auto& n : nodes) {
      Json body = {{"rotate", rotate}};
      if (rotate) body["grace"] = o.grace_s;
      if (!rotate && o.force) body["force"] = true;
      const Json k = api.post("/nodes/" + url_encode(n) + "/key", body);
      const std::string line = protocol::key_file_line(n, k.value("key", ""));
      if (!o.key_dir.empty()) write_private_file(o.key_dir + "/" + n + ".key", line);
      lines += line;
    }
    const char* verb = rotate ? "rotated" : "issued";
    if (!o.key_dir.empty()) {
      std::cerr << verb << " the key of " << nodes.size() << " node(s) into " << o.key_dir << "/NAME.key (mode 0600)\n";
    } else if (!o.key_file.empty()) {
      write_private_file(o.key_file, lines);
      std::cerr << verb << " the key of " << nodes.size() << " node(s) into " << o.key_file << " (mode 0600)\n";
    } else {
      std::cerr << verb << " the key of " << nodes.size() << " node(s) (shown once; give each agent its line with --key-file)\n";
      std::cout << lines << std::flush;
    }
    return;
  }
  std::vector<std::string> args{"node-key", rotate ? "rotate" : "issue", "--db", scheduler_db(o.db, o.state_dir)};
  for (const auto& n : expand_nodes_or_fail(o.nodes)) args.insert(args.end(), {"--node", n});
  if (!o.key_file.empty()) args.insert(args.end(), {"--key-file", o.key_file});
  if (!o.key_dir.empty()) args.insert(args.end(), {"--key-dir", o.key_dir});
  if (rotate) args.insert(args.end(), {"--grace", std::to_string(o.grace_s)});
  if (!rotate && o.force) args.push_back("--force");
  run_scheduler_tool(args, "node-key " + std::string(rotate ? "rotate" : "issue") + " --db DB --node NAME");
}

void add_node_key_commands(CLI::App& node) {
  for (const bool rotate : {false, true}) {
    auto o = std::make_shared<NodeKeyOptions>();
    auto* cmd = node.add_subcommand(rotate ? "rotate-key" : "add",
                                    rotate ? "Issue a node a new agent key; the old one works until --grace ends"
                                           : "Issue a node its agent key (per-node credentials)");
    cmd->add_option("nodes", o->nodes, "Node names or host lists (dgx[001-016,020])")->required();
    cmd->add_option("--key-file", o->key_file, "Write the \"NAME KEY\" lines to this file (0600) instead of stdout");
    cmd->add_option("--key-dir", o->key_dir, "Write one key file per node, DIR/NAME.key (0600)")->excludes("--key-file");
    cmd->add_option("--db", o->db,
                    "On the scheduler's database (default: through the API with an admin token, else the local "
                    "cluster's database, see `railyard up`)");
    cmd->add_option("--state-dir", o->state_dir, "Local cluster state folder (default: " + default_state_dir() + ")");
    add_server_options(*cmd, o->server);
    if (rotate)
      cmd->add_option("--grace", o->grace_s, "Seconds the old key keeps working (0: none)")
          ->check(CLI::Range(0LL, 30LL * 86400))
          ->capture_default_str();
    else
      cmd->add_flag("--force", o->force, "Replace a key the node already has, at once");
    cmd->footer(std::string(rotate ? R"(The agent reads its key file again when it reconnects, or at once on SIGHUP; running jobs are
not touched. The old key stops working when the grace ends or when the agent registers with the new one.

Examples:
  railyard node rotate-key dgx017 --key-file /etc/railyard/node.key --grace 300)"
                                   : R"(The key is shown once (or written with --key-file / --key-dir); the agent takes it with
railyard-agent --key-file. The scheduler keeps it in its database (mode 0600) and accepts it at once.

Examples:
  railyard node add dgx017 --key-file dgx017.key
  railyard node add 'dgx[001-032]' --key-dir keys/ --db /var/lib/railyard/state.db)") +
                "\n\nWith an admin token (or a unix: URL) and no --db: through the API (POST /api/v1/nodes/NAME/key), "
                "which replicated HA state needs; with --db: runs `railyard-scheduler node-key` on the scheduler's "
                "host.\n\nExit codes: 0 ok, 1 failure, 2 bad "
                "arguments, a node that already has a key (add) or has none (rotate-key), 3 railyard-scheduler not found.");
    cmd->callback([o, rotate] { run_node_key(*o, rotate); });
  }
}

void add_token_command(CLI::App& app) {
  auto* token = app.add_subcommand("token", "API tokens: create, list, revoke (admin)");
  token->require_subcommand(1);
  auto o = std::make_shared<TokenOptions>();
  auto* cmd = token->add_subcommand("create", "Create a token; prints it alone on the last line");
  cmd->add_option("--user", o->user, "The token's user")->required();
  cmd->add_flag("--admin", o->admin, "An admin token (the same as --role admin)");
  cmd->add_option("--role", o->role, "user or admin")->check(CLI::IsMember({"user", "admin"}))->capture_default_str();
  cmd->add_option("--expires", o->expires,
                  "Lifetime: N followed by s, m, h, d or w (30d), or never (default 90d)");
  cmd->add_option("--db", o->db, "Create it on the scheduler's database instead of through the API");
  cmd->add_option("--state-dir", o->state_dir,
                  "... on the local cluster's database in this folder (see `railyard up`)");
  add_server_options(*cmd, o->server);
  cmd->footer(R"(With an admin token configured, through the API (POST /api/v1/tokens); with --db (on the
scheduler's host: the first admin token), or with no token configured and a local cluster, on the database.
Tokens last 90 days unless --expires says otherwise.

Examples:
  railyard token create --user ada --expires 30d
  railyard token create --user ops --admin --expires never
  railyard token create --db /var/lib/railyard/state.db --user ops --admin

Exit codes: 0 ok, 1 failure, 2 bad arguments or no database, 3 not an admin or railyard-scheduler not found.)");
  cmd->callback([o] { run_token_create(*o); });

  auto l = std::make_shared<TokenOptions>();
  auto* list =
      token->add_subcommand("list", "Every token: id, user, role, created, expires, last used, state");
  list->add_flag("--json", l->json, "The API's JSON");
  add_server_options(*list, l->server);
  list->footer(
      "Admin only. Secrets are never shown: a token is named by its id.\n\nExit codes: 0 ok, 1 "
      "scheduler unreachable, 3 not an admin.");
  list->callback([l] { run_token_list(*l); });

  auto r = std::make_shared<TokenOptions>();
  auto* revoke =
      token->add_subcommand("revoke", "Revoke tokens by id (`railyard token list`): refused from now on");
  revoke->add_option("ids", r->ids, "Token ids")->required();
  add_server_options(*revoke, r->server);
  revoke->footer(
      "Admin only.\n\nExamples:\n  railyard token revoke 3f2a9c1b7e4d\n\nExit codes: 0 ok, 1 "
      "scheduler unreachable, 3 unknown id or not an admin.");
  revoke->callback([r] { run_token_revoke(*r); });
}

}  // namespace

// --- cluster status (high availability) ------------------------------------------------------------

struct ClusterStatusOptions {
  ServerOptions server;
  bool json = false;
};

std::string format_utc_ms(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// Asks every scheduler of the URL list for GET /api/v1/leader: who leads, since when, with which epoch, and
// how each scheduler answers.
void run_cluster_status(const ClusterStatusOptions& o) {
  Api api(o.server);
  Json answers = Json::array();
  Json leader = nullptr;
  for (size_t i = 0; i < api.urls().size(); ++i) {
    auto r = api.call_at(i, "GET", "/leader");
    Json a = {{"url", api.urls()[i]}};
    if (r) {
      a["answer"] = *r;
      if (leader.is_null() && r->contains("leader") && !(*r)["leader"].is_null()) leader = (*r)["leader"];
    } else {
      a["error"] = r.error().message;
    }
    answers.push_back(std::move(a));
  }
  if (o.json) {
    std::cout << Json{{"leader", leader}, {"schedulers", answers}}.dump(2) << std::endl;
    return;
  }
  if (leader.is_null()) {
    std::cout << "leader: none answered (no scheduler with --ha-etcd reachable, or no leader elected yet)\n";
  } else {
    const int64_t since = leader.value("since_ms", int64_t{0});
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    std::cout << "leader: " << leader.value("name", "") << " at " << leader.value("address", "") << ", epoch "
              << leader.value("epoch", int64_t{0}) << ", since " << format_utc_ms(since) << " ("
              << format_seconds(static_cast<double>(now - since) / 1000.0) << ")\n";
  }
  // With replicated state each answers how far its database is in the leader's log: the lag is the leader's
  // position less its own (entries not applied yet).
  int64_t head = -1;
  for (const auto& a : answers)
    if (a.contains("answer")) {
      const Json& self = a["answer"].value("self", Json::object());
      if (self.value("role", "") == "leader" && self.contains("applied")) head = self["applied"].get<int64_t>();
    }
  std::printf("%-16s %-28s %-9s %-10s %-6s %s\n", "SCHEDULER", "URL", "ROLE", "APPLIED", "LAG", "STATE");
  for (const auto& a : answers) {
    if (a.contains("error")) {
      std::printf("%-16s %-28s %-9s %-10s %-6s %s\n", "-", a["url"].get<std::string>().c_str(), "-", "-", "-",
                  ("unreachable: " + a["error"].get<std::string>()).c_str());
      continue;
    }
    const Json& self = a["answer"].value("self", Json::object());
    std::string applied = "-", lag = "-";
    if (self.contains("applied")) {
      applied = std::to_string(self["applied"].get<int64_t>());
      if (head >= 0) lag = std::to_string(std::max<int64_t>(0, head - self["applied"].get<int64_t>()));
    }
    std::printf("%-16s %-28s %-9s %-10s %-6s %s\n", self.value("name", "?").c_str(), a["url"].get<std::string>().c_str(),
                self.value("role", "?").c_str(), applied.c_str(), lag.c_str(),
                self.value("following", "").empty() ? "up" : ("not following: " + self.value("following", "")).c_str());
  }
  std::fflush(stdout);
  if (leader.is_null()) fail({ErrorCode::kUnavailable, "no leader"});
}

void add_cluster_command(CLI::App& app) {
  auto o = std::make_shared<ClusterStatusOptions>();
  auto* cluster = app.add_subcommand("cluster", "The schedulers of a high-availability cluster");
  cluster->require_subcommand(1);
  auto* cmd = cluster->add_subcommand("status", "Which scheduler leads, since when, its epoch; the standbys");
  cmd->add_flag("--json", o->json, "{\"leader\": {...}, \"schedulers\": [{\"url\", \"answer\" | \"error\"}]}");
  add_server_options(*cmd, o->server);
  cmd->footer(R"(Asks every URL of --url / RAILYARD_URL (comma-separated) for GET /api/v1/leader.

Examples:
  RAILYARD_URL=http://127.0.0.1:8601,http://127.0.0.1:8602,http://127.0.0.1:8603 railyard cluster status

Exit codes: 0 a leader answered, 1 none did.)");
  cmd->callback([o] { run_cluster_status(*o); });
}

void add_node_commands(CLI::App& app) {
  add_cluster_command(app);
  add_nodes_command(app);
  add_node_action(app, "drain", "drain", "Stop placing jobs on nodes (running jobs stay)",
                  "railyard drain 'dgx[001-004]' --reason 'bad fan'");
  add_node_action(app, "resume", "resume", "Put drained nodes back in service", "railyard resume dgx003");
  auto* node = app.add_subcommand("node", "Node administration");
  node->require_subcommand(1);
  add_node_action(*node, "remove", "remove", "Remove nodes from the cluster", "railyard node remove dgx017");
  add_node_key_commands(*node);
  add_node_images_command(*node);
  add_image_commands(app);
  add_token_command(app);
}

}  // namespace railyard::cli
