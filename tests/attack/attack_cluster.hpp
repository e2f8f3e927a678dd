// The attack suite's cluster (issue 44): a real `railyard-scheduler` with per-node keys and one root
// `railyard-agent` hosting two emulated DGX H100 nodes (n1, n2) on 127.0.0.1, as `railyard up` runs them,
// without --allow-root-jobs. Jobs are submitted by an admin for an unprivileged Unix user (`nobody` by
// default), so the job's code is the attacker and the agent is the root process it attacks.
//
// Needs root (the agent must switch users): AttackCluster::skip_reason() says why not, for GTEST_SKIP.
#pragma once

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/fault_util.hpp"

namespace railyard::testing {

inline constexpr const char* kAttackCluster = R"({"name": "attack", "nodes": [{"names": "n[1-2]",
  "profile": "dgx-h100"}], "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n[1-2]"}]})";

struct AttackOptions {
  std::vector<std::string> scheduler_flags;  // added to the scheduler's
  std::vector<std::string> agent_flags;      // added to the agent's
  bool start_agent = true;
};

class AttackCluster {
 public:
  // "" when the suite can run here; else why not.
  static std::string skip_reason() {
    if (::geteuid() != 0) return "the attack suite needs root: the agent must run jobs as another user";
    if (::getpwnam("nobody") == nullptr) return "no user 'nobody' on this machine";
    return {};
  }

  explicit AttackCluster(AttackOptions o = {}) : options_(std::move(o)) {
    // Jobs run as nobody: every directory above the agent's state must be traversable by others, as
    // /var/lib is on a real node. The state directories themselves are made by the agent.
    ::chmod(dir_.file("").c_str(), 0755);
    std::ofstream(dir_.file("cluster.json")) << kAttackCluster;
    admin_ = create_token(RAILYARD_SCHEDULER_BIN, db(), "root", "admin");
    nobody_ = create_token(RAILYARD_SCHEDULER_BIN, db(), "nobody", "user");
    const std::string issue = std::string(RAILYARD_SCHEDULER_BIN) + " node-key issue --db " + db() +
                              " --node n1 --node n2 --key-file " + key_file() + " >/dev/null 2>&1";
    if (shell(issue) != 0) throw std::runtime_error("node-key issue failed: " + issue);
    std::vector<std::string> args{"--listen", "127.0.0.1:0", "--db", db(), "--cluster", dir_.file("cluster.json"),
                                  "--node-keys", "--heartbeat-timeout", "6"};
    args.insert(args.end(), options_.scheduler_flags.begin(), options_.scheduler_flags.end());
    sched_ = std::make_unique<DaemonProcess>(RAILYARD_SCHEDULER_BIN, args);
    if (sched_->port() <= 0) throw std::runtime_error("the scheduler did not start");
    http_ = std::make_unique<HttpClient>(sched_->port());
    if (options_.start_agent) start_agent();
  }
  ~AttackCluster() {
    agent_.reset();
    sched_.reset();
  }

  // The root agent for n1 and n2 (again after stop_agent()); waits until both nodes are registered.
  void start_agent() {
    std::vector<std::string> args{"--scheduler", url(), "--key-file", key_file(), "--nodes", "n[1-2]",
                                  "--emulate", "dgx-h100", "--state-dir", agent_state(), "--grace", "1",
                                  "--min-free-mb", "0", "--reconnect-max", "1"};
    args.insert(args.end(), options_.agent_flags.begin(), options_.agent_flags.end());
    agent_ = std::make_unique<ChildProcess>(RAILYARD_AGENT_BIN, args, agent_log());
    if (!until([&] { return connected_nodes(*http_) == 2; }))
      throw std::runtime_error("the agent did not register: " + read_small(agent_log()));
  }
  // start_agent() with these flags instead of the options'.
  void start_agent_with(std::vector<std::string> flags) {
    options_.agent_flags = std::move(flags);
    start_agent();
  }
  void stop_agent(int sig = SIGTERM) {
    if (agent_) agent_->stop(sig);
    agent_.reset();
  }

  // Submits `spec` (a JSON object; "user" defaults to nobody) as the admin; returns the job id.
  int64_t submit(nlohmann::json spec) {
    if (!spec.contains("user")) spec["user"] = "nobody";
    auto r = http_->request("POST", "/api/v1/jobs", spec.dump(), admin_);
    if (r.status != 201) throw std::runtime_error("submit refused: " + std::to_string(r.status) + " " + r.body);
    return r.json().value("id", int64_t{0});
  }
  // A one-GPU job on n1 running `sh -c script` as nobody.
  int64_t submit_script(const std::string& script, int gpus = 1) {
    return submit({{"name", "attack"}, {"gpus", gpus}, {"launcher", "none"},
                   {"command", {"/bin/sh", "-c", script}}});
  }
  nlohmann::json job(int64_t id) {
    return http_->request("GET", "/api/v1/jobs/" + std::to_string(id), "", admin_).json();
  }
  std::string state(int64_t id) { return job(id).value("state", std::string()); }
  // Waits until the job is in a terminal state; returns it ("" on time-out).
  std::string wait_done(int64_t id, std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    std::string s;
    until([&] {
      s = state(id);
      return s == "COMPLETED" || s == "FAILED" || s == "CANCELLED" || s == "TIMEOUT" || s == "NODE_FAIL" ||
             s == "OUT_OF_MEMORY";
    }, limit);
    return s;
  }
  // The job's allocation directory on the node it ran on (first attempt).
  std::string alloc_dir(int64_t id, const std::string& node = "n1") const {
    return agent_state() + "/nodes/" + node + "/jobs/" + std::to_string(id) + "/" + std::to_string(id) + ".1";
  }

  HttpClient& http() { return *http_; }
  const std::string& admin_token() const { return admin_; }
  const std::string& nobody_token() const { return nobody_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(sched_->port()); }
  std::string db() const { return dir_.file("state.db"); }
  std::string key_file() const { return dir_.file("node.keys"); }
  std::string agent_state() const { return dir_.file("agent"); }
  std::string agent_log() const { return dir_.file("agent.log"); }
  std::string file(const std::string& name) const { return dir_.file(name); }
  bool agent_alive() const { return agent_ && ::kill(agent_->pid(), 0) == 0; }

 private:
  AttackOptions options_;
  TempDir dir_;
  std::string admin_, nobody_;
  std::unique_ptr<DaemonProcess> sched_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<ChildProcess> agent_;
};

// A root-owned 0600 file holding `text`: the target an attack must neither read nor change.
inline std::string make_root_secret(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ::chown(path.c_str(), 0, 0);
  ::chmod(path.c_str(), 0600);
  return path;
}

}  // namespace railyard::testing
