// Launcher: starts the local processes of one allocation and records them in a state file. It does not
// watch them: hand the returned record to a Supervisor. Dropping a Launcher (or the whole agent) leaves
// the workers running; a restarted agent finds them with recover() (agent/state/alloc_state.hpp).
//
//   LaunchRequest --plan_env_ranks / plan_mpirun--> ProcessPlans --spawn_process--> AllocRecord
//                                                                        |--> <state>/allocs/<alloc>.json
// Files: <state>/jobs/<job>/<alloc>/rank-<R>.out|.err (and hostfile for mpi); the allocation directory is
// 0700 and owned by the job's user, the logs 0600 (when the agent runs jobs as their users).
// Isolation: each allocation gets a cgroup with the limits its share of the node implies (limits_for()).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/discovery/inventory.hpp"
#include "agent/launch/cgroup.hpp"
#include "agent/launch/process.hpp"
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
  bool cgroups = true;  // false: no allocation groups at all (--no-cgroups)
  CgroupSetup cgroup;   // where allocation groups go; detected once, when the Launcher is made
  // Mode creation mask of the job's processes: its files are for its user alone unless configured.
  std::optional<mode_t> job_umask = 077;
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
  // The allocation's cgroup directories (empty, with a note, where none can be made). launch() calls it;
  // so does the session for a later node of an mpi job, whose processes arrive through exec orders.
  std::vector<std::string> cgroup_for(const LaunchRequest& request, std::vector<std::string>& notes) const;
  // Creates the allocation directory: 0700 and the job user's when there is one.
  Status make_alloc_dir(const std::filesystem::path& dir, const std::optional<Credentials>& creds) const;
  const LauncherOptions& options() const { return options_; }
  // "cgroups: cgroup v1 (memory at ...)" or "cgroups: none (why)": for the agent's start-up log.
  std::string cgroup_summary() const;

 private:
  Result<std::vector<ProcessPlan>> plan(const LaunchRequest& request, const std::filesystem::path& dir) const;

  void note(std::vector<std::string>& notes, std::string text) const;

  LauncherOptions options_;
  Inventory inventory_;
  std::shared_ptr<const CgroupDriver> cgroups_;  // null: none usable (cgroup_unusable_ says why)
  std::string cgroup_unusable_;
};

// The limits an allocation's group enforces: those in the request, else memory = the job's mem_mb or the
// node's memory times the job's share of its GPUs, and a CPU weight of the same share of its cores (a
// weight, not a quota: idle cores stay usable). Node memory and cores are this machine's.
ResourceLimits limits_for(const LaunchRequest& request, const Inventory& inventory);

// Path of railyard-agent-exec next to the running executable.
std::string default_exec_helper();

}  // namespace railyard::agent
