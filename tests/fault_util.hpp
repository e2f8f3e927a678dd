// Helpers for the fault tests (issue 10): real agents as child processes, the `sleep <marker>` workers they
// run, paging through every job, and RAII guards for what a test creates as root (tmpfs mounts, network
// namespaces): each guard removes what it made, also when the test fails half-way.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/daemon_client.hpp"

namespace railyard::testing {

using namespace std::chrono_literals;

// Polls `done` every 50 ms until it holds or `limit` passes; returns its last value.
inline bool until(const std::function<bool()>& done, std::chrono::milliseconds limit = 30s) {
  for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

// `sh -c command` exit status (-1 when it did not exit normally).
inline int shell(const std::string& command) {
  const int s = std::system(command.c_str());
  return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}

// A small file's text; "" when it cannot be read (a /proc entry of a process that just ended: ESRCH).
inline std::string read_small(const std::string& path) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return n < 0 ? std::string() : out;
}

// Every rank and exec log (`rank-*.out|err`, `exec-*.out|err`) under `dir`, each headed by its path, for a
// failure message: what mpirun and the orteds said when an MPI job did not end.
inline std::string job_logs_under(const std::string& dir) {
  std::string out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool log = (name.rfind("rank-", 0) == 0 || name.rfind("exec-", 0) == 0) &&
                     (name.ends_with(".out") || name.ends_with(".err"));
    if (log && it->is_regular_file()) out += "--- " + it->path().string() + "\n" + read_small(it->path()) + "\n";
  }
  return out;
}

// Living (not zombie) processes whose command line starts with `program` and contains `marker`.
inline std::vector<pid_t> processes_with(const std::string& program, const std::string& marker) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = read_small("/proc/" + name + "/cmdline");
    const bool zombie = read_small("/proc/" + name + "/stat").find(") Z ") != std::string::npos;
    if (!zombie && cmdline.find(program) == 0 && cmdline.find(marker) != std::string::npos)
      pids.push_back(std::stoi(name));
  }
  return pids;
}

// The `sleep <marker>` workers of the test's jobs.
inline std::vector<pid_t> sleeps_with(const std::string& marker) { return processes_with("sleep", marker); }

// Kills the marker's workers on destruction (agents killed with -9 leave theirs behind, as a dead node
// would).
class WorkerReaper {
 public:
  explicit WorkerReaper(std::string marker) : marker_(std::move(marker)) {}
  ~WorkerReaper() {
    for (pid_t pid : sleeps_with(marker_)) ::kill(pid, SIGKILL);
  }
  WorkerReaper(const WorkerReaper&) = delete;
  WorkerReaper& operator=(const WorkerReaper&) = delete;

 private:
  std::string marker_;
};

// `railyard-agent` for emulated DGX H100 nodes (`nodes` is a host list), optionally run through a prefix
// such as `ip netns exec NS`; output appended to `log`.
struct AgentOptions {
  std::string bin, scheduler_url, secret_file, nodes, state_dir, log;
  std::vector<std::string> prefix;
};

// `extra` flags go after the standard ones (e.g. {"--ca-file", PATH}).
inline std::unique_ptr<ChildProcess> start_agent_with(const AgentOptions& o, const std::vector<std::string>& extra) {
  std::vector<std::string> args(o.prefix.begin(), o.prefix.end());
  const std::string bin = args.empty() ? o.bin : args.front();
  if (!args.empty()) {
    args.erase(args.begin());
    args.push_back(o.bin);
  }
  for (const std::string& a :
       {std::string("--scheduler"), o.scheduler_url, std::string("--secret-file"), o.secret_file,
        std::string("--nodes"), o.nodes, std::string("--emulate"), std::string("dgx-h100"),
        std::string("--state-dir"), o.state_dir, std::string("--allow-root-jobs"), std::string("--grace"),
        std::string("1"), std::string("--min-free-mb"), std::string("0"), std::string("--reconnect-max"),
        std::string("1")})
    args.push_back(a);
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<ChildProcess>(bin, args, o.log);
}

inline std::unique_ptr<ChildProcess> start_agent(const AgentOptions& o) { return start_agent_with(o, {}); }

// Registered agent nodes, from the scheduler's Prometheus text.
inline int connected_nodes(HttpClient& c) {
  const std::string m = c.request("GET", "/metrics").body;
  const std::string key = "\nrailyard_agents_connected_nodes ";
  const size_t at = m.find(key);
  return at == std::string::npos ? 0 : std::atoi(m.c_str() + at + key.size());
}

// Every job, through GET /api/v1/jobs paging (oldest first).
inline std::vector<nlohmann::json> all_jobs(HttpClient& c) {
  std::vector<nlohmann::json> out;
  std::string after = "0";
  for (;;) {
    const nlohmann::json page = c.request("GET", "/api/v1/jobs?limit=10000&after=" + after).json();
    if (!page.contains("jobs")) break;
    for (const auto& j : page["jobs"]) out.push_back(j);
    if (page["next_after"].is_null()) break;
    after = std::to_string(page["next_after"].get<int64_t>());
  }
  return out;
}

// A tmpfs of `size` (e.g. "4m") mounted on a fresh directory; unmounted and removed on destruction.
class TmpfsMount {
 public:
  explicit TmpfsMount(const std::string& dir, const std::string& size) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, ("size=" + size + ",mode=0755").c_str()) == 0;
  }
  ~TmpfsMount() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    std::error_code ec;
    std::filesystem::remove(dir_, ec);
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  bool mounted() const { return mounted_; }
  // Remounts read-only or read-write; false when the kernel refuses (e.g. a file open for writing).
  bool set_read_only(bool ro) {
    return ::mount("tmpfs", dir_.c_str(), nullptr, MS_REMOUNT | (ro ? MS_RDONLY : 0), nullptr) == 0;
  }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// Network namespaces named `names`, each with loopback up; deleted (with the veths in them) on destruction.
class NetNamespaces {
 public:
  explicit NetNamespaces(std::vector<std::string> names) {
    for (auto& n : names) {
      if (shell("ip netns add " + n + " 2>/dev/null") != 0) return;
      made_.push_back(n);
      if (shell("ip -n " + n + " link set lo up") != 0) return;
    }
    ok_ = true;
  }
  ~NetNamespaces() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) shell("ip netns del " + *it + " 2>/dev/null");
  }
  NetNamespaces(const NetNamespaces&) = delete;
  NetNamespaces& operator=(const NetNamespaces&) = delete;
  bool ok() const { return ok_; }

 private:
  std::vector<std::string> made_;
  bool ok_ = false;
};

// Moves the calling thread into a named network namespace; back to the one it had on destruction. Children
// forked by this thread meanwhile start in that namespace, and sockets opened meanwhile stay in it.
class EnterNetns {
 public:
  explicit EnterNetns(const std::string& name) {
    back_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    const int fd = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    ok_ = back_ >= 0 && fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) ::close(fd);
  }
  ~EnterNetns() {
    if (ok_) ::setns(back_, CLONE_NEWNET);
    if (back_ >= 0) ::close(back_);
  }
  EnterNetns(const EnterNetns&) = delete;
  EnterNetns& operator=(const EnterNetns&) = delete;
  bool ok() const { return ok_; }

 private:
  int back_ = -1;
  bool ok_ = false;
};

}  // namespace railyard::testing
