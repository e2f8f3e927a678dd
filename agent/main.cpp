// railyard-agent: one per node (or one for many emulated nodes). Connects out to the scheduler over a
// WebSocket (scheduler/PROTOCOL.md), reconnects with capped, jittered exponential backoff, and drives a
// Session from one thread: frames in, a 50 ms tick for supervision, metrics, heartbeats and health.
//
// SIGTERM/SIGINT: close the connection and exit, leaving the workers running (a restarted agent adopts
// them; the scheduler fails the node's jobs only after its heartbeat timeout). With --kill-workers-on-exit
// (what `railyard up` should pass: a stopped local cluster takes its jobs with it) the agent first ends
// every allocation (SIGTERM, SIGKILL after --grace) and keeps their alloc_finished reports on disk.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include "agent/session/session.hpp"
#include "common/hostlist.hpp"
#include "common/protocol/key_file.hpp"
#include "common/net/ws_client.hpp"

namespace {

using namespace railyard;
using namespace std::chrono;

struct Flags {
  std::string scheduler = "http://127.0.0.1:8600";
  std::string secret_file;
  std::vector<std::string> key_files;
  std::vector<std::string> node;
  std::string nodes;
  std::string emulate;
  std::string state_dir = "/var/lib/railyard-agent";
  bool allow_root_jobs = false;
  bool no_cgroups = false;
  std::string isolation = "required";
  std::string cgroup_parent;
  std::string job_umask = "077";
  double grace_s = 10;
  std::string exec_helper;
  std::string mpirun = "mpirun";
  std::string mpi_output_dir;
  bool no_containers = false;
  std::string container_engine = "podman";
  std::string oci_runtime;
  std::string dev_dir = "/dev";
  std::vector<std::string> engine_env;
  std::string health_script;
  long long min_free_mb = 1024;
  double reconnect_max_s = 30;
  std::string log_level = "info";
  bool kill_workers_on_exit = false;
  std::string ca_file;
};

// http(s)://HOST:PORT[/...] or ws(s)://... -> ws(s)://HOST:PORT/api/v1/agent, and the http(s):// base for
// workers. A comma-separated list (high availability: every scheduler of the cluster) gives one ws URL each
// and the http bases joined by commas (RAILYARD_URL for workers; railyard-agent-exec tries each).
bool scheduler_urls(const std::string& urls, std::vector<std::string>& ws, std::string& http) {
  for (size_t start = 0; start <= urls.size();) {
    const size_t comma = std::min(urls.find(',', start), urls.size());
    const std::string url = urls.substr(start, comma - start);
    start = comma + 1;
    if (url.empty()) continue;
    auto parsed = net::parse_ws_url(url);
    if (!parsed) return false;
    const std::string tls = parsed->tls ? "s" : "";
    ws.push_back("ws" + tls + "://" + parsed->host + ":" + parsed->port + "/api/v1/agent");
    http += (http.empty() ? "" : ",") + ("http" + tls + "://" + parsed->host + ":" + parsed->port);
  }
  return !ws.empty();
}

std::string read_secret(const std::string& path) {
  auto text = railyard::protocol::read_private_file(path);  // refused when others can read it, as ssh does
  if (!text) throw std::runtime_error(text.error().message);
  std::string s = std::move(*text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  if (s.empty()) throw std::runtime_error("the secret file " + path + " is empty");
  return s;
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// Reconnects with exponential backoff (0.5 s doubling to the cap, each wait drawn in [delay/2, delay]).
// With several URLs (high availability) each reconnect tries the next one, and the delay grows only after a
// whole round failed; a scheduler that is not the leader refuses the upgrade, or (a deposed leader) is
// refused by the session for its old epoch, and the next one is tried.
class Connection {
 public:
  Connection(boost::asio::io_context& io, agent::Session& session, std::vector<std::string> urls,
             duration<double> cap, const std::string& ca_file)
      : io_(io),
        session_(session),
        urls_(std::move(urls)),
        url_(urls_.front()),
        cap_(cap),
        ws_(io, net::WsClientOptions{.ca_file = ca_file}),
        timer_(io),
        rng_(std::random_device{}()) {
    ws_.on_open([this] {
      spdlog::info("connected to {}", url_);
      session_.connected([this](const std::string& text) { ws_.send(text); });
    });
    ws_.on_message([this](std::string text) {
      const bool was = session_.registered();
      session_.receive(text);
      if (session_.stale_leader()) {
        spdlog::warn("{} leads an old epoch (a deposed scheduler); trying another", url_);
        ws_.close();
        return;
      }
      if (!was && session_.registered()) {
        spdlog::info("registered; heartbeat every {} ms", session_.heartbeat_interval().count());
        delay_ = kFirstDelay;
      }
    });
    ws_.on_close([this](const std::string& reason) {
      session_.disconnected();
      if (stopping_) return;
      std::uniform_real_distribution<double> jitter(0.5, 1.0);
      const auto wait = duration_cast<milliseconds>(delay_ * jitter(rng_));
      next_ = (next_ + 1) % urls_.size();
      url_ = urls_[next_];
      spdlog::warn("disconnected ({}); reconnecting to {} in {} ms", reason, url_, wait.count());
      if (next_ == 0) delay_ = std::min<duration<double>>(delay_ * 2, cap_);
      timer_.expires_after(wait);
      timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec && !stopping_) ws_.connect(url_);
      });
    });
  }
  void start() { ws_.connect(url_); }
  // Closes the connection; the usual reconnect follows (and reads the key file again at its hello).
  void reconnect() { ws_.close(); }
  void stop() {
    stopping_ = true;
    timer_.cancel();
    ws_.close();
  }

 private:
  static constexpr duration<double> kFirstDelay{0.5};
  boost::asio::io_context& io_;
  agent::Session& session_;
  std::vector<std::string> urls_;
  std::string url_;
  size_t next_ = 0;
  duration<double> cap_;
  net::WsClient ws_;
  boost::asio::steady_timer timer_;
  std::mt19937 rng_;
  duration<double> delay_ = kFirstDelay;
  bool stopping_ = false;
};

void tick_every(boost::asio::steady_timer& timer, agent::Session& session) {
  timer.expires_after(milliseconds(50));
  timer.async_wait([&timer, &session](boost::system::error_code ec) {
    if (ec) return;
    session.tick(agent::Session::Clock::now());
    tick_every(timer, session);
  });
}

int run(const Flags& f) {
  agent::SessionOptions o;
  std::vector<std::string> ws_url;
  if (!scheduler_urls(f.scheduler, ws_url, o.scheduler_url))
    throw std::runtime_error("bad --scheduler URL '" + f.scheduler + "' (http(s)://HOST:PORT[,...])");
  if (!f.ca_file.empty()) o.ca_file = std::filesystem::absolute(f.ca_file).string();  // workers cd elsewhere
  if (f.secret_file.empty() == f.key_files.empty())
    throw std::runtime_error("give --key-file (this agent's node keys) or --secret-file (the cluster secret)");
  if (!f.secret_file.empty()) o.secret = read_secret(f.secret_file);
  for (const auto& k : f.key_files) o.key_files.push_back(std::filesystem::absolute(k).string());
  o.nodes = f.node;
  if (!f.nodes.empty()) {
    auto names = expand_hostlist(f.nodes, 4096);
    if (!names) throw std::runtime_error("--nodes: " + names.error().message);
    o.nodes.insert(o.nodes.end(), names->begin(), names->end());
  }
  if (o.nodes.empty()) o.nodes.push_back(hostname());
  o.agent_id = hostname() + ":" + std::to_string(getpid());
  o.state_dir = std::filesystem::absolute(f.state_dir);  // workers run in their own directories
  o.emulate = f.emulate;
  o.allow_root_jobs = f.allow_root_jobs;
  o.cgroups = !f.no_cgroups;
  o.isolation = f.isolation == "best-effort" ? agent::IsolationMode::kBestEffort : agent::IsolationMode::kRequired;
  o.cgroup_parent = f.cgroup_parent;
  o.job_umask = static_cast<mode_t>(std::stoul(f.job_umask, nullptr, 8) & 0777);
  o.exec_helper = f.exec_helper;
  o.mpirun = f.mpirun;
  if (!f.mpi_output_dir.empty()) o.mpi_output_dir = std::filesystem::absolute(f.mpi_output_dir);
  o.containers = !f.no_containers;
  o.container.engine = f.container_engine;
  o.container.oci_runtime = f.oci_runtime;
  o.container.dev = f.dev_dir;
  o.container.engine_env = f.engine_env;
  o.grace = duration_cast<milliseconds>(duration<double>(f.grace_s));
  o.health.script = f.health_script;
  o.health.min_free_bytes = f.min_free_mb << 20;
  o.log = [](const std::string& text) { spdlog::info("{}", text); };
  const size_t node_count = o.nodes.size();
  auto session = agent::Session::create(std::move(o));
  if (!session) throw std::runtime_error(session.error().message);
  spdlog::info("hosting {} node(s), {} running allocation(s) adopted", node_count, (*session)->allocations());

  boost::asio::io_context io;
  Connection conn(io, **session, ws_url, duration<double>(f.reconnect_max_s), f.ca_file);
  boost::asio::steady_timer ticker(io);
  boost::asio::signal_set hangup(io, SIGHUP);
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](boost::system::error_code, int sig) {
    conn.stop();
    ticker.cancel();
    hangup.cancel();
    io.stop();
    if (!f.kill_workers_on_exit) {
      spdlog::info("signal {}: disconnected; {} allocation(s) keep running", sig, (*session)->allocations());
      return;
    }
    spdlog::info("signal {}: ending {} allocation(s)", sig, (*session)->allocations());
    (*session)->cancel_all("agent stopped");
    const auto until = steady_clock::now() + duration<double>(f.grace_s) + seconds(2);
    while ((*session)->allocations() > 0 && steady_clock::now() < until) {
      (*session)->tick(agent::Session::Clock::now());
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  // SIGHUP: register again at once, with the key file read anew (after `railyard node rotate-key`). Running
  // allocations are not touched: the new registration reports them.
  std::function<void()> on_hangup = [&] {
    hangup.async_wait([&](boost::system::error_code ec, int) {
      if (ec) return;
      spdlog::info("SIGHUP: reconnecting to read the key file again");
      conn.reconnect();
      on_hangup();
    });
  };
  on_hangup();
  conn.start();
  tick_every(ticker, **session);
  io.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"railyard-agent: runs jobs on this node (or on emulated nodes) for railyard-scheduler"};
  app.add_option("--scheduler", f.scheduler,
                 "scheduler URL, http(s)://HOST:PORT; with high availability every scheduler's, comma-separated")->capture_default_str();
  app.add_option("--ca-file", f.ca_file,
                 "PEM CA bundle to verify an https:// scheduler (default: the system's trust store); "
                 "given to workers as RAILYARD_CA_FILE")
      ->check(CLI::ExistingFile);
  app.add_option("--key-file", f.key_files,
                 "file of this agent's node keys, \"NAME KEY\" lines (repeatable; per-node credentials, read "
                 "again on every reconnect and on SIGHUP)");
  app.add_option("--secret-file", f.secret_file, "file holding the cluster secret (instead of --key-file)");
  app.add_option("--node", f.node, "node name this agent hosts (repeatable; default: the host name)");
  app.add_option("--nodes", f.nodes, "host list of nodes this agent hosts, e.g. 'dgx[001-128]'");
  app.add_option("--emulate", f.emulate,
                 "emulated node profile (dgx-h100, dgx-a100, ...) instead of probing");
  app.add_option("--state-dir", f.state_dir, "state directory (allocations, logs)")->capture_default_str();
  app.add_flag("--allow-root-jobs", f.allow_root_jobs, "as root, run jobs without a known user as root");
  app.add_flag("--no-cgroups", f.no_cgroups,
               "run jobs without per-allocation cgroups (no memory/CPU limits)");
  app.add_option("--isolation", f.isolation,
                 "required: a job whose cgroup (limits, GPU device rules) cannot be made is refused, and the "
                 "agent does not start without cgroups; best-effort: such jobs run without them")
      ->check(CLI::IsMember({"required", "best-effort"}))
      ->capture_default_str();
  app.add_option("--cgroup-parent", f.cgroup_parent,
                 "cgroup (in each hierarchy) under which allocation groups go; default: the agent's own");
  app.add_option("--job-umask", f.job_umask, "octal umask of job processes")
      ->capture_default_str()
      ->check([](const std::string& v) {
        return v.find_first_not_of("01234567") == std::string::npos && !v.empty() && v.size() <= 4
                   ? std::string()
                   : std::string("an octal umask such as 077 or 027");
      });
  app.add_option("--grace", f.grace_s, "seconds between SIGTERM and SIGKILL")->capture_default_str();
  app.add_option("--exec-helper", f.exec_helper, "railyard-agent-exec (default: next to this program)");
  app.add_option("--mpirun", f.mpirun, "mpirun to use for mpi jobs")->capture_default_str();
  app.add_option(
      "--mpi-output-dir", f.mpi_output_dir,
      "where mpi ranks' own logs go (default: <state-dir>/mpi-output); the same path on every node");
  app.add_flag("--no-containers", f.no_containers, "run no image jobs here (no container engine is looked for)");
  app.add_option("--container-engine", f.container_engine, "the engine image jobs run in (podman)")
      ->capture_default_str();
  app.add_option("--oci-runtime", f.oci_runtime,
                 "the engine's OCI runtime (podman --runtime); default: podman's own, else runc");
  app.add_option("--dev-dir", f.dev_dir, "where the GPUs' device nodes (nvidiaN) are")->capture_default_str();
  app.add_option("--engine-env", f.engine_env,
                 "NAME=VALUE for the container engine's environment (repeatable): HTTPS_PROXY, "
                 "CONTAINERS_REGISTRIES_CONF, ...; it gets nothing else of the agent's or a job's")
      ->check([](const std::string& v) {
        return v.find('=') != std::string::npos && v.front() != '=' ? std::string() : std::string("NAME=VALUE");
      });
  app.add_option("--health-script", f.health_script,
                 "run as SCRIPT NODE every 30 s; non-zero drains the node");
  app.add_option("--min-free-mb", f.min_free_mb, "free space the state dir needs")->capture_default_str();
  app.add_option("--reconnect-max", f.reconnect_max_s, "cap of the reconnect backoff, s")
      ->capture_default_str();
  app.add_flag("--kill-workers-on-exit", f.kill_workers_on_exit,
               "on SIGTERM, end every job's processes first (local clusters; default: leave them running)");
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return run(f);
  } catch (const std::exception& e) {
    std::cerr << "railyard-agent: " << e.what() << "\n";
    return 2;
  }
}
