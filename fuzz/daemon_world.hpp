// A scheduler daemon without sockets for the fuzz targets (and their regression replay): the real Service,
// AgentHub and Router over a real SQLite store in a temporary directory (under /dev/shm when there is one,
// so a commit costs no disk flush), a fake loop that runs posted work when run() is called, and a settable
// clock. Fake agent connections record the frames the hub sends them.
//
// Thread safety: none (one fuzz input at a time, like the daemon's single event loop).
#pragma once

#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/api/router.hpp"
#include "scheduler/daemon/agents.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::fuzz {

class FuzzPeer : public daemon::Peer {
 public:
  void send(std::string text) override { sent.push_back(std::move(text)); }
  void close() override { closed = true; }
  std::vector<std::string> sent;
  bool closed = false;
};

class DaemonWorld {
 public:
  static constexpr const char* kSecret = "fuzz-cluster-secret-0123456789abcdef";
  static constexpr const char* kUserToken = "user-token";    // user "ada"
  static constexpr const char* kAdminToken = "admin-token";  // admin "root"
  static constexpr const char* kAgent = "fuzz:1";

  // Four 8-GPU nodes n1..n4 under two leaves. Throws when it cannot be set up (a harness fault, not a
  // finding).
  DaemonWorld();
  ~DaemonWorld();  // removes the directory
  DaemonWorld(const DaemonWorld&) = delete;
  DaemonWorld& operator=(const DaemonWorld&) = delete;

  // Runs posted work (submit flushes, passes) until none is left.
  void run();
  // Opens a connection and registers `nodes` (8 GPUs each) with the right MAC.
  std::shared_ptr<FuzzPeer> connect(const std::vector<std::string>& nodes);
  // Submits one job per entry of `gpus` (its GPU count) as "ada", in one commit, and runs the loop.
  void submit(const std::vector<int>& gpus);
  // Aborts (a finding) when a GPU belongs to two STARTING/RUNNING jobs, or to one and a held (draining)
  // allocation.
  void check_no_gpu_twice() const;

  int64_t now = 1'000'000;
  std::unique_ptr<daemon::Service> service;
  std::unique_ptr<daemon::AgentHub> hub;
  std::unique_ptr<api::Router> router;

 private:
  std::filesystem::path dir_;
  std::unique_ptr<topology::Cluster> cluster_;
  std::deque<std::function<void()>> work_;
};

}  // namespace railyard::fuzz
