// Helpers for the `railyard` CLI tests: run the real binary with a controlled environment and capture
// stdout, stderr and the exit code; start the real daemon on 127.0.0.1 with a temp database.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/daemon_client.hpp"

namespace railyard::testing {

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
  nlohmann::json json() const { return nlohmann::json::parse(out, nullptr, false); }
};

inline std::string slurp(int fd) {
  std::string s;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

// Runs `bin args...` with exactly `env` as its environment (plus PATH), stdin from /dev/null.
inline CliResult run_cli(const std::string& bin, const std::vector<std::string>& args,
                         const std::map<std::string, std::string>& env) {
  char out_tmpl[] = "/tmp/railyard-cli-out-XXXXXX";
  char err_tmpl[] = "/tmp/railyard-cli-err-XXXXXX";
  const int out = ::mkstemp(out_tmpl), err = ::mkstemp(err_tmpl);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<std::string> argv_s{bin};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_s{"PATH=/usr/bin:/bin"};
    for (const auto& [k, v] : env) env_s.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    ::execve(bin.c_str(), argv.data(), envp.data());
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  ::lseek(out, 0, SEEK_SET);
  ::lseek(err, 0, SEEK_SET);
  r.out = slurp(out);
  r.err = slurp(err);
  ::close(out);
  ::close(err);
  ::unlink(out_tmpl);
  ::unlink(err_tmpl);
  return r;
}

inline std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

inline void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A daemon on a generated 1-SU DGX H100 SuperPOD (32 nodes dgx001..dgx032), an admin token and two users.
class CliCluster {
 public:
  CliCluster()
      : db_(dir_.file("state.db")),
        admin_(create_token(RAILYARD_SCHEDULER_BIN, db_, "root", "admin")),
        ada_(create_token(RAILYARD_SCHEDULER_BIN, db_, "ada", "user")),
        bob_(create_token(RAILYARD_SCHEDULER_BIN, db_, "bob", "user")),
        daemon_(RAILYARD_SCHEDULER_BIN,
                {"--listen", "127.0.0.1:0", "--db", db_, "--preset", "dgx-h100-superpod", "--sus", "1"}) {}

  std::string url() const { return "http://127.0.0.1:" + std::to_string(daemon_.port()); }
  const std::string& admin() const { return admin_; }
  const std::string& ada() const { return ada_; }
  const std::string& bob() const { return bob_; }
  std::string file(const std::string& name) const { return dir_.file(name); }
  // The environment for a CLI run: HOME in the temp dir (no config file unless a test writes one).
  std::map<std::string, std::string> env(const std::string& token) const {
    std::map<std::string, std::string> e{{"HOME", dir_.file("home")}, {"RAILYARD_URL", url()}};
    if (!token.empty()) e["RAILYARD_TOKEN"] = token;
    return e;
  }
  CliResult run(const std::vector<std::string>& args, const std::string& token) const {
    return run_cli(RAILYARD_BIN, args, env(token));
  }

 private:
  TempDir dir_;
  std::string db_;
  std::string admin_, ada_, bob_;
  DaemonProcess daemon_;
};

}  // namespace railyard::testing
