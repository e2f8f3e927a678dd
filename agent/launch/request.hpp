// What the scheduler asks one agent to start: the local part of one allocation of one job.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jobs/spec.hpp"

namespace railyard::agent {

// One node of the allocation, in node-rank order: its name and the local GPU indices given to the job.
struct NodeSlots {
  std::string name;
  std::vector<int> gpus;
  int slots() const { return static_cast<int>(gpus.size()); }
};

// What the allocation's cgroup enforces (agent/launch/cgroup.hpp). Unset = no limit of that kind.
struct ResourceLimits {
  std::optional<long long> memory_bytes;  // hard limit, swap included: past it the kernel OOM-kills
  std::optional<double> cpus;             // hard quota in cores (cpu.max / cfs_quota_us)
  std::optional<double> cpu_share;        // proportional weight in cores (cpu.weight / cpu.shares)
  std::optional<long long> pids;          // pids.max: a fork bomb stays inside the job
};

struct LaunchRequest {
  jobs::JobId job_id = 0;
  std::string alloc_id;          // unique per allocation; a path component (no '/')
  jobs::JobSpec spec;            // command, env, workdir, user, launcher, time_limit_s, target
  std::vector<NodeSlots> nodes;  // the whole allocation
  int node_rank = 0;             // this node's index in nodes
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  ResourceLimits limits;
  // Overrides spec.time_limit_s when set (tests use sub-second limits); zero = no limit.
  std::optional<std::chrono::milliseconds> time_limit;

  int world_size() const;
  int first_rank() const;  // global rank of this node's local rank 0
  const NodeSlots& local() const { return nodes.at(static_cast<size_t>(node_rank)); }
};

// One process the launcher starts: a rank (env launcher) or mpirun (mpi launcher, rank 0 of node 0).
struct ProcessPlan {
  int rank = 0;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE, complete (inherited variables included)
  std::string workdir;
};

}  // namespace railyard::agent
