// `railyard up` / `railyard down`: see local_cluster.cpp for the flow.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>

#include "cli/api.hpp"
#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/job_util.hpp"
#include "cli/local_cluster.hpp"
#include "common/hostlist.hpp"
#include "topology/generator.hpp"
#include "topology/io.hpp"

namespace railyard::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
// sockaddr_un::sun_path holds 108 bytes, the terminating NUL included.
constexpr size_t kMaxUnixSocketPath = 108;

struct UpOptions {
  int nodes = 2;
  std::string profile = "dgx-h100";
  std::string state_dir;
  int port = 8600;
  int emulate_nodes = 0;
  int leaf_size = 32;
  double timeout_s = 60;
  bool no_agents = false;
  bool no_config = false;
  bool shared_secret = false;  // agents use one cluster secret instead of per-node keys
  std::vector<std::string> scheduler_args;  // appended to railyard-scheduler's command line
  int ha = 0;  // high availability: this many etcd members and schedulers (0: one scheduler, no etcd)
};

// A TCP port of 127.0.0.1 free now, for a process started next to bind (etcd's ports, the schedulers' fixed
// ports under --ha). Taken below the kernel's ephemeral range when there is room: a port from that range (what
// binding port 0 gives) can become the local port of any outgoing connection on this host before the process
// binds it, while one below it can only be taken by another listener.
int free_port() {
  auto bound = [](int want) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(want));
    socklen_t len = sizeof a;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    ::close(fd);
    return port;
  };
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  const int lowest = std::max(10000, ephemeral_low - 10000);
  if (ephemeral_low - lowest >= 1000) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> pick(lowest, ephemeral_low - 1);
    for (int i = 0; i < 100; ++i)
      if (int port = bound(pick(rng))) return port;
  }
  const int port = bound(0);
  if (port == 0) fail(internal_error("no free port on 127.0.0.1"));
  return port;
}

// `up --ha N`: N etcd members on loopback (data under DIR/etcd), recorded with role "etcd" so that `down`
// stops them last. Returns their client URLs, comma-separated.
std::string start_etcd_members(const std::string& dir, const std::string& pids, int n) {
  const std::string etcd = find_program("etcd");
  if (etcd.empty()) fail({ErrorCode::kNotFound, "etcd not found (deploy/bootstrap.sh installs etcd-server)"});
  std::vector<int> client, peer;
  std::string cluster, urls;
  for (int i = 1; i <= n; ++i) {
    client.push_back(free_port());
    peer.push_back(free_port());
    cluster += (i > 1 ? "," : "") + ("e" + std::to_string(i) + "=http://127.0.0.1:" + std::to_string(peer.back()));
    urls += (i > 1 ? "," : "") + ("http://127.0.0.1:" + std::to_string(client.back()));
  }
  for (int i = 1; i <= n; ++i) {
    const std::string name = "e" + std::to_string(i);
    const std::string c = "http://127.0.0.1:" + std::to_string(client[i - 1]);
    const std::string p = "http://127.0.0.1:" + std::to_string(peer[i - 1]);
    local::start_process(pids, "etcd",
                         {etcd, "--name", name, "--data-dir", dir + "/etcd/" + name, "--listen-client-urls", c,
                          "--advertise-client-urls", c, "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                          "--initial-cluster", cluster, "--initial-cluster-state", "new"},
                         dir + "/etcd-" + name + ".log");
  }
  return urls;
}

std::string random_secret() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char bytes[32];
  if (!in.read(reinterpret_cast<char*>(bytes), sizeof bytes)) fail(internal_error("cannot read /dev/urandom"));
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) out += {kHex[b >> 4], kHex[b & 15]};
  return out;
}

std::string require_program(const std::string& name) {
  std::string p = find_program(name);
  if (p.empty()) {
    std::string dirs;
    for (const auto& d : program_search_dirs()) dirs += "\n  " + d;
    fail(not_found(name + " not found; looked in (set RAILYARD_BIN_DIR to choose):" + dirs));
  }
  return p;
}

std::string tail_of(const std::string& path) {
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > 1500 ? all.substr(all.size() - 1500) : all;
}

// Waits for "listening on HOST:PORT" in the scheduler's log; returns the port.
int wait_for_listen(int pid, const std::string& log, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  while (Clock::now() < deadline) {
    const std::string text = tail_of(log);
    if (const size_t at = text.find("listening on "); at != std::string::npos) {
      const size_t eol = text.find('\n', at);
      if (eol != std::string::npos) {
        const std::string addr = text.substr(at + 13, eol - at - 13);
        return std::atoi(addr.c_str() + addr.rfind(':') + 1);
      }
    }
    if (!local::alive(pid)) fail(internal_error("railyard-scheduler exited at start; its log (" + log + "):\n" + text));
    sleep_for_seconds(0.05);
  }
  fail(internal_error("railyard-scheduler did not start listening within " + std::to_string(int(timeout_s)) +
                      " s; see " + log));
}

// `railyard-scheduler token create`, returning the token (its output's last line).
std::string create_token(const std::string& bin, const std::string& db, const std::string& user) {
  const std::string cmd =
      "'" + bin + "' token create --db '" + db + "' --user '" + user + "' --role admin --expires never 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) fail(internal_error("cannot run " + bin));
  std::string out;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (status != 0) fail(internal_error("token create failed: " + out));
  const size_t nl = out.rfind('\n');
  return nl == std::string::npos ? out : out.substr(nl + 1);
}

// `railyard-scheduler node-key issue --force` for every node, one key file each under `key_dir`.
void issue_node_keys(const std::string& bin, const std::string& db, const std::string& key_dir,
                     const std::vector<std::string>& names) {
  std::error_code ec;
  fs::create_directories(key_dir, ec);
  fs::permissions(key_dir, fs::perms::owner_all, ec);
  std::string cmd = "'" + bin + "' node-key issue --force --db '" + db + "' --key-dir '" + key_dir + "'";
  cmd += " --node '" + compress_hostlist(names) + "'";
  cmd += " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) fail(internal_error("cannot run " + bin));
  std::string out;
  char buf[512];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (::pclose(p) != 0) fail(internal_error("node-key issue failed: " + out));
}

std::string local_user() {
  if (const passwd* pw = ::getpwuid(::getuid())) return pw->pw_name;
  return "admin";
}

// Polls GET /nodes until `want` nodes are up.
void wait_for_nodes(const std::string& url, const std::string& token, size_t want, double timeout_s,
                    const std::string& dir) {
  Api api({.url = url, .token = token, .ca_file = {}, .timeout_s = 5});
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  size_t up = 0;
  while (Clock::now() < deadline) {
    auto nodes = api.call("GET", "/nodes");
    if (nodes) {
      up = 0;
      for (const auto& n : (*nodes)["nodes"]) up += n.value("health", "") == "up";
      if (up >= want) return;
    }
    sleep_for_seconds(0.2);
  }
  fail(internal_error("only " + std::to_string(up) + " of " + std::to_string(want) + " nodes came up within " +
                      std::to_string(int(timeout_s)) + " s; logs: " + dir + "/scheduler.log, " + dir +
                      "/agents/*.log (stop with: railyard down --state-dir " + dir + ")"));
}

// `up --ha`: scheduler `i`'s own database (the state is replicated through etcd; each keeps its copy).
std::string ha_database(const std::string& dir, int i) { return dir + "/s" + std::to_string(i) + "/railyard.db"; }

// Where `railyard up` keeps what its schedulers are started with.
struct SchedulerFiles {
  std::string program, dir, pids, db, cluster, secret, socket;
};

// Starts the scheduler (or, with --ha N, N of them) and waits until one listens: its pid, and the URL the
// agents and the CLI are given (with --ha the leader's first, then the others).
std::pair<int, std::string> start_schedulers(const UpOptions& o, const SchedulerFiles& f, const std::string& etcd_urls,
                                             bool with_socket) {
  const int schedulers = std::max(1, o.ha);
  std::error_code ec;
  std::vector<int> spids;
  std::vector<std::string> logs, urls;
  for (int i = 1; i <= schedulers; ++i) {
    const int port = o.ha == 0 ? o.port : o.port == 0 ? free_port() : o.port + i - 1;
    const std::string log = o.ha == 0 ? f.dir + "/scheduler.log" : f.dir + "/scheduler-s" + std::to_string(i) + ".log";
    const std::string db = o.ha == 0 ? f.db : ha_database(f.dir, i);
    fs::create_directories(fs::path(db).parent_path(), ec);
    std::vector<std::string> sargv{f.program, "--listen", "127.0.0.1:" + std::to_string(port), "--db", db,
                                   "--cluster", f.cluster};
    if (!o.no_agents && o.shared_secret) sargv.insert(sargv.end(), {"--agent-secret-file", f.secret});
    if (!o.no_agents && !o.shared_secret) sargv.push_back("--node-keys");
    if (auto web = find_web_root(); !web.empty()) sargv.insert(sargv.end(), {"--web-root", web});
    if (with_socket) sargv.insert(sargv.end(), {"--unix-socket", f.socket});
    // Not root: the agents cannot switch users, so every job runs as this user, and another local user
    // who reached the socket would run code as this user (and be its admin). The socket is then this
    // user's alone, from its creation.
    if (with_socket && ::geteuid() != 0) sargv.insert(sargv.end(), {"--unix-socket-mode", "0600"});
    if (o.ha > 0) {
      sargv.insert(sargv.end(), {"--ha-etcd", etcd_urls, "--ha-name", "s" + std::to_string(i)});
      fs::remove(log, ec);  // the leader is found by its "listening on" line: none from an earlier run
    }
    sargv.insert(sargv.end(), o.scheduler_args.begin(), o.scheduler_args.end());
    spids.push_back(local::start_process(f.pids, "scheduler", sargv, log));
    logs.push_back(log);
    urls.push_back("http://127.0.0.1:" + std::to_string(port));
    // s1 leads first: its database (the node keys and the token) becomes the replicated log's first entry,
    // which the others, starting empty, apply.
    if (o.ha > 0 && i == 1) wait_for_listen(spids.back(), log, o.timeout_s);
  }
  int spid = spids.front();
  std::string url;
  if (o.ha == 0) {
    url = "http://127.0.0.1:" + std::to_string(wait_for_listen(spid, logs.front(), o.timeout_s));
  } else {
    // The leader is the one that prints "listening on" (standbys print "standby on").
    const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000));
    for (size_t i = 0;; i = (i + 1) % spids.size()) {
      if (tail_of(logs[i]).find("listening on ") != std::string::npos) {
        spid = spids[i];
        break;
      }
      if (Clock::now() >= deadline)
        fail(internal_error("no scheduler was elected leader within " + std::to_string(int(o.timeout_s)) +
                            " s; see " + f.dir + "/scheduler-s*.log and " + f.dir + "/etcd-e*.log"));
      sleep_for_seconds(0.05);
    }
    // The leader first: the dashboard line below names it.
    const std::string lead = urls[static_cast<size_t>(std::find(spids.begin(), spids.end(), spid) - spids.begin())];
    url = lead;
    for (const auto& u : urls)
      if (u != lead) url += "," + u;
  }
  return {spid, url};
}

// Starts the agents of `names` (one per node, or --emulate-nodes N nodes per process): how many.
int start_agents(const UpOptions& o, const std::string& agent, const std::string& url, const std::string& dir,
                 const std::string& pids, const std::vector<std::string>& names, const std::string& secret_file,
                 const std::string& key_dir) {
  int agents = 0;
  const size_t group = o.emulate_nodes > 0 ? static_cast<size_t>(o.emulate_nodes) : 1;
  for (size_t i = 0; i < names.size(); i += group) {
    const std::vector<std::string> part(names.begin() + i, names.begin() + std::min(names.size(), i + group));
    const std::string first = part.front();
    std::vector<std::string> argv{agent, "--scheduler", url};
    if (o.shared_secret) argv.insert(argv.end(), {"--secret-file", secret_file});
    else
      for (const auto& n : part) argv.insert(argv.end(), {"--key-file", key_dir + "/" + n + ".key"});
    if (o.emulate_nodes > 0) argv.insert(argv.end(), {"--nodes", compress_hostlist(part)});
    else argv.insert(argv.end(), {"--node", first});
    argv.insert(argv.end(), {"--emulate", o.profile, "--state-dir", dir + "/agents/" + first, "--allow-root-jobs",
                                  "--kill-workers-on-exit"});
    // mpirun names one rank output path for every node of an allocation: on one machine, one shared by all.
    argv.insert(argv.end(), {"--mpi-output-dir", dir + "/agents/mpi-output"});
    // An unprivileged agent can make no cgroups: its jobs (the owner's own, see resolve_job_user) run
    // without limits, as they would started by hand.
    if (geteuid() != 0) argv.insert(argv.end(), {"--isolation", "best-effort"});
    local::start_process(pids, "agent", argv, dir + "/agents/" + first + ".log");
    ++agents;
  }
  return agents;
}

void run_up(const UpOptions& o) {
  const std::string dir = fs::absolute(o.state_dir.empty() ? default_state_dir() : o.state_dir).string();
  const std::string pids = dir + "/pids";
  std::error_code ec;
  fs::create_directories(dir + "/agents", ec);
  if (ec) fail(internal_error("cannot create " + dir + ": " + ec.message()));
  if (local::any_recorded_alive(pids))
    fail(invalid("a local cluster is already running from " + dir + "; stop it with: railyard down --state-dir " + dir));
  const std::string scheduler = require_program("railyard-scheduler");
  const std::string agent = o.no_agents ? "" : require_program("railyard-agent");

  const std::string prefix = o.profile.rfind("dgx", 0) == 0 ? "dgx" : "node";
  auto cluster = topology::generate_fat_tree(
      {.nodes = o.nodes, .leaf_size = o.leaf_size, .profile = o.profile, .node_prefix = prefix});
  if (!cluster) fail(cluster.error());
  const std::string cluster_file = dir + "/cluster.json";
  if (auto s = topology::save_cluster_file(*cluster, cluster_file, topology::FileFormat::kJson); !s) fail(s.error());
  const std::string secret_file = dir + "/secret";
  // Written in every mode (state dirs of earlier versions had one; tools look for it), but given to the
  // scheduler only with --shared-secret: by default it accepts each node's own key and nothing else.
  write_private_file(secret_file, random_secret() + "\n");

  // With --ha the first scheduler's database: the keys and the token are written there before it starts.
  // Each `up --ha` starts from a fresh replicated state (etcd's data and every scheduler's database): the
  // node keys are new at every run, and a database that held rows the log does not would not follow it.
  if (o.ha > 0)
    for (const char* old : {"etcd", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}) fs::remove_all(dir + "/" + old, ec);
  const std::string db = o.ha > 0 ? ha_database(dir, 1) : dir + "/railyard.db";
  fs::create_directories(fs::path(db).parent_path(), ec);
  std::vector<std::string> names;
  for (const auto& n : cluster->nodes()) names.push_back(n.name);
  // Per-node keys, before any scheduler starts: every node a fresh key (replacing any of an earlier run),
  // each in its own file under DIR/keys, which its agent alone is given.
  const std::string key_dir = dir + "/keys";
  if (!o.no_agents && !o.shared_secret) issue_node_keys(scheduler, db, key_dir, names);
  // With --ha N: N schedulers on ports PORT .. PORT+N-1 (free ones with --port 0), each with its own
  // database under DIR/sI/, elect their leader through N etcd members, and the leader's every write is
  // replicated through them to the others.
  const std::string etcd_urls = o.ha > 0 ? start_etcd_members(dir, pids, o.ha) : "";
  // The scheduler's Unix socket, where this host's users need no token (`railyard --url unix:PATH`). Not with
  // --ha (each leader in turn would take over one path), nor where the path is too long for a socket.
  const std::string sock = dir + "/railyard.sock";
  const bool with_socket = o.ha == 0 && sock.size() < kMaxUnixSocketPath;
  // Before the schedulers start: with --ha it must be in the first leader's database when it starts.
  const std::string token = create_token(scheduler, db, local_user());
  const auto [spid, url] = start_schedulers(o, {scheduler, dir, pids, db, cluster_file, secret_file, sock},
                                           etcd_urls, with_socket);

  const int agents = o.no_agents ? 0 : start_agents(o, agent, url, dir, pids, names, secret_file, key_dir);
  wait_for_nodes(url, token, names.size(), o.timeout_s, dir);

  if (!o.no_config)
    if (auto s = write_config_file(config_file_path(), {url, token, {}}); !s)
      std::cerr << "railyard: " << s.error().message << std::endl;
  std::cerr << "railyard: local cluster up: " << names.size() << " x " << o.profile << " nodes ("
            << compress_hostlist(names) << "), scheduler pid " << spid << ", " << agents << " agent process(es)\n"
            << "railyard: state and logs in " << dir << "; stop with: railyard down"
            << (o.state_dir.empty() ? "" : " --state-dir " + dir) << "\n"
            << "railyard: dashboard: " << url.substr(0, url.find(',')) << "/\n";
  if (with_socket)
    std::cerr << "railyard: unix socket: " << sock << " (RAILYARD_URL=unix:" << sock
              << " needs no token: you are the Unix user you run as)\n";
  if (!o.no_config) std::cerr << "railyard: URL and token written to " << config_file_path() << "\n";
  std::cout << "export RAILYARD_URL=" << url << "\nexport RAILYARD_TOKEN=" << token << std::endl;
}

void add_up_command(CLI::App& app) {
  auto o = std::make_shared<UpOptions>();
  auto* cmd = app.add_subcommand("up", "Start a local cluster: a scheduler and emulated-node agents on 127.0.0.1");
  cmd->add_option("--nodes", o->nodes, "Nodes to emulate")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--profile", o->profile, "Node profile (dgx-h100, dgx-a100, ...)")->capture_default_str();
  cmd->add_option("--state-dir", o->state_dir, "Database, logs, secret, pids (default: " + default_state_dir() + ")");
  cmd->add_option("--port", o->port, "Scheduler port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--emulate-nodes", o->emulate_nodes,
                  "Nodes per agent process (default: one agent per node)")
      ->check(at_least(1));
  cmd->add_option("--leaf-size", o->leaf_size, "Nodes per leaf switch")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--timeout", o->timeout_s, "Seconds to wait for the scheduler and for every node to be up")
      ->capture_default_str();
  cmd->add_flag("--no-agents", o->no_agents, "Start the scheduler only");
  cmd->add_flag("--shared-secret", o->shared_secret,
                "Agents share one cluster secret (DIR/secret) instead of each node's own key (DIR/keys/NAME.key)");
  cmd->add_flag("--no-config", o->no_config, "Do not write the URL and token to the CLI config file");
  cmd->add_option("--ha", o->ha,
                  "High availability: N etcd members and N schedulers (ports --port ..), each with its own "
                  "database (STATE-DIR/sI/) that follows the leader's through etcd; one leads, the others take "
                  "over when it dies (`railyard cluster status`). Starts from a fresh state each time")
      ->check(CLI::Range(1, 7));
  cmd->add_option("--scheduler-arg", o->scheduler_args,
                  "An argument for railyard-scheduler, e.g. --scheduler-arg=--compact-wait=0 (repeatable)")
      ->allow_extra_args(false);
  cmd->footer(R"txt(Prints two lines for a shell to eval (also written to the CLI config file):
  export RAILYARD_URL=http://127.0.0.1:8600
  export RAILYARD_TOKEN=...      (an admin token for you)
Without --ha the scheduler also listens on STATE-DIR/railyard.sock: `railyard --url unix:STATE-DIR/railyard.sock
...` (or RAILYARD_URL=unix:...) needs no token there, the kernel names the caller.

Examples:
  railyard up --nodes 4 --profile dgx-h100
  eval "$(railyard up --nodes 128 --emulate-nodes 64 --port 0 --state-dir /tmp/ry)"
  railyard up --ha 3      (3 etcd members, schedulers on 8600-8602; RAILYARD_URL lists all three)

Exit codes: 0 up, 1 failure (a program exited, nodes did not come up: see the logs named), 2 bad arguments
or already running, 3 railyard-scheduler or railyard-agent not found.)txt");
  cmd->callback([o] { run_up(*o); });
}

struct DownOptions {
  std::string state_dir;
  double grace_s = 10;
};

void add_down_command(CLI::App& app) {
  auto o = std::make_shared<DownOptions>();
  auto* cmd = app.add_subcommand("down", "Stop the local cluster that `railyard up` started (only those pids)");
  cmd->add_option("--state-dir", o->state_dir, "As given to `railyard up` (default: " + default_state_dir() + ")");
  cmd->add_option("--grace", o->grace_s, "Seconds between SIGTERM and SIGKILL")->capture_default_str();
  cmd->footer(R"(Stops exactly the processes recorded in STATE_DIR/pids whose command line is unchanged; a pid
now used by another program is left alone. The database and logs stay.

Examples:
  railyard down
  railyard down --state-dir /tmp/ry

Exit codes: 0 stopped (or nothing to stop), 1 failure.)");
  cmd->callback([o] {
    const std::string dir = fs::absolute(o->state_dir.empty() ? default_state_dir() : o->state_dir).string();
    const int n = local::stop_recorded(dir + "/pids", o->grace_s, true);
    std::cerr << "railyard: stopped " << n << " process(es) of the local cluster in " << dir << std::endl;
  });
}

}  // namespace

void add_local_cluster_commands(CLI::App& app) {
  add_up_command(app);
  add_down_command(app);
}

}  // namespace railyard::cli
