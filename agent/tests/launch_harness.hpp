// Integration-test harness: a Launcher on an emulated DGX H100 with a scratch state dir, and a loop that
// drives a Supervisor until an allocation finishes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/launch/launcher.hpp"
#include "agent/launch/supervisor.hpp"
#include "agent/tests/test_util.hpp"

namespace railyard::agent::testing {

struct Outcome {
  std::vector<SupervisorEvent> events;
  std::optional<AllocationFinished> finished;
  std::chrono::milliseconds elapsed{0};

  template <typename E>
  std::vector<E> all() const {
    std::vector<E> out;
    for (const auto& e : events)
      if (auto* x = std::get_if<E>(&e)) out.push_back(*x);
    return out;
  }
};

inline Outcome run_until_finished(Supervisor& sup, std::chrono::milliseconds timeout) {
  Outcome o;
  const auto start = std::chrono::steady_clock::now();
  while (!o.finished && std::chrono::steady_clock::now() - start < timeout) {
    for (auto& e : sup.wait_for(std::chrono::milliseconds(200))) {
      if (auto* f = std::get_if<AllocationFinished>(&e)) o.finished = *f;
      o.events.push_back(std::move(e));
    }
  }
  o.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return o;
}

class LaunchFixture : public ::testing::Test {
 protected:
  LauncherOptions launcher_options() const {
    LauncherOptions o;
    o.state_dir = dir_.path();
    o.allocs = allocs_;
    o.allow_root_jobs = true;
    o.exec_helper = RAILYARD_AGENT_EXEC;
    o.mpirun = RAILYARD_MPIEXEC;
    o.log = [](const std::string&) {};
    return o;
  }
  Launcher launcher() const { return Launcher(launcher_options(), *emulated_inventory("dgx-h100", "node0")); }
  Supervisor supervisor() const {
    return Supervisor(SupervisorOptions{allocs_, std::chrono::milliseconds(1000)});
  }

  // One node, `ranks` GPUs starting at GPU 2, the env launcher, a shell command.
  LaunchRequest request(const std::string& alloc, int ranks, const std::string& script) const {
    LaunchRequest r;
    r.job_id = 5;
    r.alloc_id = alloc;
    r.spec.launcher = jobs::Launcher::kEnv;
    r.spec.command = {"/bin/sh", "-c", script};
    r.nodes = {{"node0", {}}};
    for (int i = 0; i < ranks; ++i) r.nodes[0].gpus.push_back(2 + i);
    return r;
  }

  // One allocation launched and supervised until it finishes, at most `timeout`: its record and what the
  // supervisor said. `error` says why it did not launch ("" when it did).
  struct Run {
    std::string error;
    AllocRecord record;
    Outcome outcome;
  };
  Run launch_and_run(const LaunchRequest& req, std::chrono::milliseconds timeout) const {
    Run run;
    auto l = launcher();
    auto started = l.launch(req);
    if (!started) {
      run.error = started.error().message;
      return run;
    }
    run.record = started->record;
    auto sup = supervisor();
    sup.add(started->record);
    run.outcome = run_until_finished(sup, timeout);
    return run;
  }

  // The allocation's record is in the node's journal on disk (read as a restarted agent would).
  bool stored(const std::string& alloc) const {
    for (const auto& r : AllocStore::read(dir_.path()))
      if (r.alloc_id == alloc) return true;
    return false;
  }

  std::filesystem::path log(const std::string& alloc, int rank, const char* ext = "out") const {
    return dir_.path() / "jobs" / "5" / alloc / ("rank-" + std::to_string(rank) + "." + ext);
  }

  TempDir dir_;
  std::shared_ptr<AllocStore> allocs_ = std::make_shared<AllocStore>(dir_.path());
};

}  // namespace railyard::agent::testing
