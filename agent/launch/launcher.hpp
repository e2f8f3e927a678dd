// Launcher: starts the local processes of one allocation and records them in a state file. It does not
// watch them: hand the returned record to a Supervisor. Dropping a Launcher (or the whole agent) leaves
// the workers running; a restarted agent finds them with recover() (agent/state/alloc_state.hpp).
//
//   LaunchRequest --plan_env_ranks / plan_mpirun--> ProcessPlans --spawn_process--> AllocRecord
//                                                                        |--> <state>/allocs/<alloc>.json
// Files: <state>/jobs/<job>/<alloc>/rank-<R>.out|.err (and hostfile for mpi).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/discovery/inventory.hpp"
#include "agent/launch/request.hpp"
#include "agent/state/alloc_state.hpp"
#include "common/result.hpp"

namespace railyard::agent {

struct LauncherOptions {
  std::filesystem::path state_dir;
  std::shared_ptr<AllocStore> allocs;  // records what launch() started (shared with the node's Supervisor)
  bool allow_root_jobs = false;  // as root: run jobs without (or with an unknown) user as root
  std::string exec_helper;       // railyard-agent-exec; "" = next to this executable
  std::string mpirun = "mpirun";
  std::filesystem::path cgroup_root = "/sys/fs/cgroup";
  bool inherit_env = true;                      // workers start from the agent's environment
  std::function<void(const std::string&)> log;  // notes such as "cgroup skipped"; default: stderr
};

struct Launched {
  AllocRecord record;
  std::vector<std::string> notes;
};

class Launcher {
 public:
  Launcher(LauncherOptions options, Inventory inventory);

  // Starts every local process, or none: when one fails to start, those already started are killed.
  Result<Launched> launch(const LaunchRequest& request);

  std::filesystem::path alloc_dir(long long job_id, const std::string& alloc_id) const;
  const LauncherOptions& options() const { return options_; }

 private:
  Result<std::vector<ProcessPlan>> plan(const LaunchRequest& request, const std::filesystem::path& dir) const;
  std::string cgroup_for(const LaunchRequest& request, std::vector<std::string>& notes) const;
  void note(std::vector<std::string>& notes, std::string text) const;

  LauncherOptions options_;
  Inventory inventory_;
};

// Path of railyard-agent-exec next to the running executable.
std::string default_exec_helper();

}  // namespace railyard::agent
