// Turning a LaunchRequest into the processes to start. Pure functions (no I/O): unit-tested directly.
//
// env launcher (torchrun-style): one process per local GPU, each with
//   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR, MASTER_PORT,
//   CUDA_VISIBLE_DEVICES (the allocation's local GPU indices), NCCL_IB_HCA (the rails of those GPUs),
//   NCCL_SOCKET_IFNAME=lo when the master is on loopback, RAILYARD_JOB_ID, RAILYARD_ALLOC_ID, RAILYARD_NODE.
// mpi launcher: on node 0 only, one mpirun over a hostfile of the allocation, remote launches through the
//   railyard-agent-exec helper (plm_rsh_agent), loopback/vader/yield settings from shared/TOOLCHAIN.md.
//   With an output directory, --output-filename DIR: the daemon on each node (mpirun on node 0, orted on
//   the others) writes its local ranks' DIR/1/rank.<N>/stdout|stderr, and mpirun still copies every rank's
//   output to its own stdout (rank-0.out, the combined view).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/discovery/inventory.hpp"
#include "agent/launch/request.hpp"
#include "common/result.hpp"

namespace railyard::agent {

using EnvMap = std::map<std::string, std::string>;

EnvMap environ_map();  // the agent's own environment
std::vector<std::string> to_env_list(const EnvMap& env);

// Variables every process of the allocation gets (RAILYARD_*, CUDA_VISIBLE_DEVICES, NCCL_*), on top of base.
EnvMap allocation_env(const LaunchRequest& req, const Inventory& inv, EnvMap base);

// Comma-separated HCAs of the rails the given local GPUs use, each once, in rail order: "mlx5_0,mlx5_3".
std::string nccl_ib_hca(const std::vector<int>& gpus, const Inventory& inv);

std::vector<ProcessPlan> plan_env_ranks(const LaunchRequest& req, const Inventory& inv, const EnvMap& base);

struct MpiSettings {
  std::string mpirun = "mpirun";
  std::string exec_helper;  // absolute path of railyard-agent-exec
  std::string hostfile;     // where the launcher writes hostfile_text
  std::string state_dir;    // passed to the helper as RAILYARD_AGENT_STATE_DIR
  bool as_root = false;     // adds --allow-run-as-root
  // The allocation's per-rank output directory (--output-filename): an absolute path the same on every node
  // of the allocation, made by each node's agent for the job's user. Empty: no per-rank files.
  std::string output_dir;
  // The job runs in an image: every node's ranks, node 0's too, are started by an orted that the node's
  // agent runs in the image (an exec order), so mpirun must host no rank itself. Each hostfile name gets
  // kMpiDaemonHostSuffix, which no local name matches, and orte_keep_fqdn_hostnames keeps it whole;
  // railyard-agent-exec takes it off again.
  bool daemons_in_image = false;
};

inline constexpr const char* kMpiDaemonHostSuffix = ".railyard-orted";

struct MpiPlan {
  std::string hostfile_text;  // "node0 slots=2\nnode1 slots=2\n"
  ProcessPlan process;        // mpirun, rank 0
};

// Error when this node is not node 0 (other nodes get their orted through the helper) or the command is
// empty.
Result<MpiPlan> plan_mpirun(const LaunchRequest& req, const Inventory& inv, const EnvMap& base,
                            const MpiSettings& s);

// Where Open MPI 4.1's --output-filename puts rank `rank`'s stream ("out" or "err") below the output
// directory, as relative paths to try in order: "1/rank.<N>/stdout" with N zero-padded to the digits of the
// world size (rank.3 of 4 ranks, rank.03 of 10), which a reader of one rank's log does not know.
std::vector<std::string> mpi_rank_log_paths(int rank, const std::string& stream);

}  // namespace railyard::agent
