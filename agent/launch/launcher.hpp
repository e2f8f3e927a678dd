// Launcher: starts the local processes of one allocation and records them in a state file. It does not
// watch them: hand the returned record to a Supervisor. Dropping a Launcher (or the whole agent) leaves
// the workers running; a restarted agent finds them with recover() (agent/state/alloc_state.hpp).
//
//   LaunchRequest --plan_env_ranks / plan_mpirun--> ProcessPlans --spawn_process--> AllocRecord
//                                                                        |--> <state>/allocs.journal
// Files: <state>/jobs/<job>/<alloc>/rank-<R>.out|.err (and hostfile for mpi; mpi ranks' own output in
// <mpi_output_dir>/<alloc>/1/rank.<R>/stdout|stderr); the allocation directory is
// 0700 and owned by the job's user, the logs 0600 and the user's. All of them are made through AllocDir
// (alloc_dir.hpp): the directory is the user's, so no name in it is opened as a path.
// Isolation: each allocation gets a cgroup with the limits its share of the node implies (limits_for()).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/discovery/inventory.hpp"
#include "agent/launch/alloc_dir.hpp"
#include "agent/launch/cgroup.hpp"
#include "agent/launch/container.hpp"
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
  // Parent of the per-allocation mpi rank output directories (<dir>/<alloc>, the job user's, made by
  // make_owned_dir): mpirun's --output-filename, so it must be the same path on every node. Empty: none.
  std::filesystem::path mpi_output_dir;
  bool cgroups = true;  // false: no allocation groups at all (--no-cgroups; jobs start, with a note)
  IsolationMode isolation = IsolationMode::kRequired;
  CgroupSetup cgroup;   // where allocation groups go; detected once, when the Launcher is made
  // Mode creation mask of the job's processes: its files are for its user alone unless configured.
  std::optional<mode_t> job_umask = 077;
  bool inherit_env = true;                      // workers start from the agent's environment (host jobs)
  // The engine image jobs run in (agent/launch/container.hpp); null: this node runs no image job.
  std::shared_ptr<const ContainerRuntime> containers;
  std::function<void(const std::string&)> log;  // notes such as "cgroup skipped"; default: stderr
};

struct Launched {
  AllocRecord record;
  std::vector<std::string> notes;
  Fd rank0_out;  // rank 0's stdout log, readable, when rank 0 runs here: for the FileTailer
};

class Launcher {
 public:
  Launcher(LauncherOptions options, Inventory inventory);

  // Starts every local process, or none: when one fails to start, those already started are killed.
  Result<Launched> launch(const LaunchRequest& request);

  std::filesystem::path alloc_dir(long long job_id, const std::string& alloc_id) const;
  // The allocation's cgroup directories. Where none can be made: an error with isolation required, else
  // none and a note (also with --no-cgroups). launch() calls it; so does the session for a later node of an
  // mpi job, whose processes arrive through exec orders.
  Result<std::vector<std::string>> cgroup_for(const LaunchRequest& request, std::vector<std::string>& notes) const;
  // The allocation directory (alloc_dir()), made when missing: 0700 and the job user's when there is one.
  // Every file the agent makes or reads in it goes through the returned AllocDir.
  Result<AllocDir> make_alloc_dir(long long job_id, const std::string& alloc_id,
                                  const std::optional<Credentials>& owner) const;
  // An existing allocation directory (its logs, after the job ended or the agent restarted).
  Result<AllocDir> open_alloc_dir(long long job_id, const std::string& alloc_id) const;
  const LauncherOptions& options() const { return options_; }

  // One process of an image job (spec.container set, its image already in the engine's cache): `plan` run
  // in the image as the job's user by the engine's client, which runs as the agent with its own clean
  // environment and joins the allocation's cgroup through `spec.cgroup_procs_fds` like any job process.
  // The plan's environment goes to a root-only env file; the allocation directory and `mounts` are mounted
  // (the agent's own paths, and the job's as checked_mounts() returned them: checked readable by its user,
  // resolved); the container's cgroup is a child of the allocation's (`cgroups`, from cgroup_for).
  Result<SpawnSpec> container_spawn(const LaunchRequest& request, const ProcessPlan& plan, const AllocDir& dir,
                                    const std::optional<Credentials>& user, const std::vector<std::string>& cgroups,
                                    const std::vector<jobs::Mount>& mounts, const std::string& name) const;
  // Whether allocation groups can be made here (a cgroup mechanism was found and not disabled).
  bool isolates() const { return cgroups_ != nullptr; }
  // "cgroups: cgroup v1 (memory at ...)" or "cgroups: none (why)": for the agent's start-up log.
  std::string cgroup_summary() const;

 private:
  Result<std::vector<ProcessPlan>> plan(const LaunchRequest& request, const AllocDir& dir) const;

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

// The one way a job's process is started, for launch and for exec orders alike: its stdout and stderr are
// made as `<log_base>.out|.err` in the allocation directory (AllocDir::create), then spawn_process(spec).
// `keep_stdout`, when given, receives the stdout log's descriptor (readable), for rank 0's FileTailer.
Result<RankRecord> spawn_in_alloc(const AllocDir& dir, int rank, const std::string& log_base, SpawnSpec spec,
                                  Fd* keep_stdout = nullptr);

// Path of railyard-agent-exec next to the running executable.
std::string default_exec_helper();

}  // namespace railyard::agent
