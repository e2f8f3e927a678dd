// The job model shared by the CLI, the daemon, the simulator and the scheduling core.
// JSON schema: jobs/README.md. Parsing and validation: jobs/spec_json.hpp, jobs/validate.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/array.hpp"

namespace railyard::jobs {

using JobId = int64_t;

enum class JobKind { kBatch, kService };
enum class Qos { kHigh, kNormal, kScavenger };
enum class Launcher { kNone, kEnv, kMpi };
enum class Layout { kAuto, kPack, kSpread };  // pack: fewest nodes/leaves; spread: one GPU per node where possible

// Lifecycle. PENDING -> STARTING -> RUNNING -> one end state; requeue takes an ended or running job back to
// PENDING (preemption, NODE_FAIL with requeue, FAILED with requeue).
enum class JobState { kPending, kHeld, kStarting, kRunning, kCompleted, kFailed, kCancelled, kTimeout, kNodeFail, kPreempted,
                      kOutOfMemory };

std::string_view to_string(JobKind k);
std::string_view to_string(Qos q);
std::string_view to_string(Launcher l);
std::string_view to_string(Layout l);
std::string_view to_string(JobState s);
std::optional<JobKind> parse_kind(std::string_view s);
std::optional<Qos> parse_qos(std::string_view s);
std::optional<Launcher> parse_launcher(std::string_view s);
std::optional<Layout> parse_layout(std::string_view s);
std::optional<JobState> parse_state(std::string_view s);
bool is_terminal(JobState s);

// A dependency other than afterok on a whole job (those are JobSpec::afterok): Slurm's afterany (the job
// ended, in any state), afternotok (it ended and did not complete), aftercorr (each task of this array waits
// for the task with the same index of array `job` to complete), and afterok/afterany/afternotok on a single
// task of an array ("afterok:12_3": the task with index 3 of array 12).
struct Dependency {
  enum class Type { kAfterOk, kAfterAny, kAfterNotOk, kAfterCorr };
  Type type = Type::kAfterOk;
  JobId job = 0;
  int task = -1;  // an index of array `job`; -1: the whole job
  // Slurm's text of one dependency: "afterany:40", "afterok:12_3", "aftercorr:50".
  std::string text() const;
  // "job 40" or "task 3 of array 12"
  std::string target() const;
  auto operator<=>(const Dependency&) const = default;
};
std::string_view to_string(Dependency::Type t);
std::optional<Dependency::Type> parse_dependency_type(std::string_view s);

// A directory or file of the node made visible inside the job's container: "SRC:DST[:ro]" as pyxis and podman
// write it. The agent refuses a source the job's user could not read on the node.
struct Mount {
  std::string source;  // absolute path on the node
  std::string target;  // absolute path inside the container
  bool read_only = false;
  std::string text() const;  // "SRC:DST" or "SRC:DST:ro"
  auto operator<=>(const Mount&) const = default;
};

// The OCI image every process of the job runs in (agent/launch/container.hpp). Image references are
// registry references ("nvcr.io/nvidia/pytorch:24.04-py3"; pyxis' "nvcr.io#nvidia/..." is read as '/'),
// or an archive on the node ("docker-archive:/path/img.tar", "oci-archive:/path/img.tar").
struct ContainerSpec {
  std::string image;
  std::vector<Mount> mounts;
  std::string workdir;    // inside the container; "" = the job's workdir (mounted at the same path) or the image's
  bool writable = false;  // false: a read-only root file system, with /tmp, /run and /var/tmp as tmpfs
  std::string name;       // pyxis' --container-name: labels the job's containers (railyard.name)
  auto operator<=>(const ContainerSpec&) const = default;
};

struct Target {
  std::string metric = "eval_accuracy";
  double value = 0;
};

struct JobSpec {
  std::string name;
  std::string user;
  std::string project;          // account
  JobKind kind = JobKind::kBatch;

  // Size: either `gpus` alone (the scheduler chooses the node split) or `nodes` x `gpus_per_node`.
  int gpus = 0;                 // total GPUs (batch) or GPUs per replica (service)
  int nodes = 0;                // 0 = let the scheduler choose
  int gpus_per_node = 0;        // 0 = let the scheduler choose
  int replicas = 1;             // service only: independent replicas, each placed on its own
  std::string gpu_type;         // "" or "any" = any type
  std::string mig;              // MIG profile, e.g. "1g.10gb"; then gpus counts slices (must be 1)
  std::vector<std::string> features;  // node features every node must have (partition-like)
  Layout layout = Layout::kAuto;
  bool exclusive = false;       // whole nodes even for a sub-node job
  // Memory per node in MiB, enforced by the agent's cgroup (past it the kernel OOM-kills: OUT_OF_MEMORY);
  // 0 = the node's memory times the job's share of the node's GPUs.
  int mem_mb = 0;

  int64_t time_limit_s = 3600;  // 0 = none (services)
  Qos qos = Qos::kNormal;
  int priority = 0;             // user-set nice-like boost, -1000..1000
  Launcher launcher = Launcher::kNone;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string workdir;
  std::optional<ContainerSpec> container;  // unset: the node's own file system, as a host process
  bool requeue = false;         // requeue on FAILED / NODE_FAIL
  std::optional<Target> target; // time-to-train quality target
  std::vector<JobId> afterok;   // start only after these completed successfully (an array: all its tasks)
  std::vector<Dependency> after;  // every other dependency (see Dependency); all must be met, as afterok's

  // An array: one submit standing for array->size() tasks of this spec (jobs/array.hpp). Batch jobs only.
  std::optional<ArraySpec> array;
  // A task of array `array_job`, with index `array_task`: set by the scheduler when it creates the task,
  // never by a user.
  JobId array_job = 0;
  int array_task = -1;

  // Total GPUs (or slices) the job needs at once.
  int total_gpus() const;
  // Calls fn(const Dependency&) for each dependency that gates this job's start: afterok's ids (as
  // afterok dependencies), then `after` but aftercorr (an array's: its tasks carry theirs). Stops at the
  // first call that returns true, and returns whether one did.
  template <typename Fn>
  bool any_dependency(Fn&& fn) const {
    for (JobId id : afterok)
      if (fn(Dependency{Dependency::Type::kAfterOk, id})) return true;
    for (const Dependency& d : after)
      if (d.type != Dependency::Type::kAfterCorr && fn(d)) return true;
    return false;
  }
};

}  // namespace railyard::jobs
