// `railyard up` and `railyard down`: a whole cluster on this machine (scheduler + emulated-node agents on
// 127.0.0.1), started in the background and stopped by exactly the pids that were started.
//
//   up:  cluster file ─► secret (0600) ─► railyard-scheduler ─► admin token ─► agents ─► all nodes up?
//        every started process is appended to DIR/pids at once ("PID<TAB>ROLE<TAB>CMDLINE"), so `down`
//        can clean up after a failed `up` too.
//   down: for each line, signal the pid only if /proc/PID/cmdline still equals the recorded command line
//        (a recycled pid is left alone); agents first, then the scheduler(s), then etcd (up --ha); SIGTERM,
//        SIGKILL after a grace.
#include "cli/local_cluster.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/api.hpp"
#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/job_util.hpp"
#include "common/hostlist.hpp"
#include "topology/generator.hpp"
#include "topology/io.hpp"

namespace railyard::cli {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string default_state_dir() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) return (fs::path(x) / "railyard").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".local" / "state" / "railyard").string();
  return "railyard-state";
}

std::vector<std::string> program_search_dirs() {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("RAILYARD_BIN_DIR"); d && *d) dirs.emplace_back(d);
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = self.parent_path();
    dirs.push_back(dir.string());
    dirs.push_back((dir.parent_path() / "scheduler").string());
    dirs.push_back((dir.parent_path() / "agent").string());
  }
  if (const char* path = std::getenv("PATH")) {
    std::stringstream s(path);
    std::string d;
    while (std::getline(s, d, ':'))
      if (!d.empty()) dirs.push_back(d);
  }
  return dirs;
}

std::string find_program(const std::string& name) {
  for (const auto& d : program_search_dirs()) {
    const std::string p = (fs::path(d) / name).string();
    if (::access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p)) return p;
  }
  return "";
}

std::string find_web_root() {
  std::vector<fs::path> candidates;
  if (const char* d = std::getenv("RAILYARD_WEB_ROOT"); d && *d) candidates.emplace_back(d);
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = self.parent_path();  // <prefix>/bin, or build/<preset>/cli
    candidates.push_back(dir.parent_path() / "share" / "railyard" / "web");
    candidates.push_back(dir.parent_path().parent_path().parent_path() / "web" / "dist");
  }
  for (const auto& c : candidates)
    if (fs::is_regular_file(c / "index.html", ec)) return fs::absolute(c, ec).lexically_normal().string();
  return "";
}

namespace {

// --- processes ---------------------------------------------------------------------------------------

std::string joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

// The command line of a live process, space-joined; "" when gone or a zombie.
std::string proc_cmdline(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return "";
  const size_t paren = line.rfind(')');
  if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z') return "";
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw)
    if (c == '\0') c = ' ';
  return raw;
}

// Starts argv in its own session, stdout+stderr appended to `log`, no other inherited descriptors.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid < 0) fail(internal_error("fork failed"));
  if (pid == 0) {
    ::setsid();
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::_Exit(127);
  }
  return pid;
}

struct Started {
  pid_t pid;
  std::string role;
  std::string cmdline;
};

std::vector<Started> read_pids(const std::string& path) {
  std::vector<Started> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    if (t1 == std::string::npos || t2 == std::string::npos) continue;
    out.push_back({static_cast<pid_t>(std::atol(line.c_str())), line.substr(t1 + 1, t2 - t1 - 1), line.substr(t2 + 1)});
  }
  return out;
}

class PidFile {
 public:
  explicit PidFile(std::string path) : path_(std::move(path)) {}
  pid_t start(const std::string& role, const std::vector<std::string>& argv, const std::string& log) {
    const pid_t pid = spawn(argv, log);
    std::ofstream out(path_, std::ios::app);
    out << pid << "\t" << role << "\t" << joined(argv) << "\n";
    return pid;
  }

 private:
  std::string path_;
};

bool still_ours(const Started& s) { return s.pid > 1 && proc_cmdline(s.pid) == s.cmdline; }

// SIGTERM to every process still ours, SIGKILL to those left after `grace_s`. Returns how many it signalled.
int stop_processes(const std::vector<Started>& procs, double grace_s) {
  std::vector<Started> live;
  for (const auto& p : procs) {
    if (!still_ours(p)) continue;
    ::kill(p.pid, SIGTERM);
    live.push_back(p);
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(grace_s * 1000));
  for (;;) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    bool any = false;
    for (const auto& p : live) any |= still_ours(p);
    if (!any) break;
    if (Clock::now() >= deadline) {
      for (const auto& p : live)
        if (still_ours(p)) {
          std::cerr << "railyard: " << p.role << " (pid " << p.pid << ") ignored SIGTERM; sending SIGKILL" << std::endl;
          ::kill(p.pid, SIGKILL);
        }
      break;
    }
    sleep_for_seconds(0.05);
  }
  return static_cast<int>(live.size());
}

}  // namespace

// The commands are in up_cmd.cpp; these are its building blocks.
namespace local {

pid_t start_process(const std::string& pid_file, const std::string& role, const std::vector<std::string>& argv,
                    const std::string& log) {
  return PidFile(pid_file).start(role, argv, log);
}

int stop_recorded(const std::string& pid_file, double grace_s, bool verbose) {
  const auto all = read_pids(pid_file);
  std::vector<Started> agents, others, etcd;
  for (const auto& p : all) {
    if (!still_ours(p)) {
      if (verbose && proc_cmdline(p.pid) != "")
        std::cerr << "railyard: pid " << p.pid << " is no longer the " << p.role << " we started; left alone\n";
      continue;
    }
    (p.role == "scheduler" ? others : p.role == "etcd" ? etcd : agents).push_back(p);
  }
  // etcd last (up --ha): schedulers that stop while it runs hand their lease back.
  const int n = stop_processes(agents, grace_s) + stop_processes(others, grace_s) + stop_processes(etcd, grace_s);
  std::error_code ec;
  fs::remove(pid_file, ec);
  return n;
}

bool any_recorded_alive(const std::string& pid_file) {
  for (const auto& p : read_pids(pid_file))
    if (still_ours(p)) return true;
  return false;
}

bool alive(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == 0;
}

}  // namespace local
}  // namespace railyard::cli
