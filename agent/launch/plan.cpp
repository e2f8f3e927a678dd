#include "agent/launch/plan.hpp"

#include "agent/launch/container.hpp"

#include <algorithm>
#include <numeric>

extern char** environ;  // NOLINT: POSIX

namespace railyard::agent {

int LaunchRequest::world_size() const {
  return std::accumulate(nodes.begin(), nodes.end(), 0,
                         [](int n, const NodeSlots& s) { return n + s.slots(); });
}

int LaunchRequest::first_rank() const {
  int r = 0;
  for (int i = 0; i < node_rank && i < static_cast<int>(nodes.size()); ++i)
    r += nodes[static_cast<size_t>(i)].slots();
  return r;
}

EnvMap environ_map() {
  EnvMap out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

std::vector<std::string> to_env_list(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

namespace {

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

bool loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

}  // namespace

std::string nccl_ib_hca(const std::vector<int>& gpus, const Inventory& inv) {
  std::vector<std::string> rails;
  for (int g : gpus) {
    std::string h = inv.rail_hca(g);
    if (!h.empty() && std::find(rails.begin(), rails.end(), h) == rails.end()) rails.push_back(std::move(h));
  }
  return join(rails, ",");
}

EnvMap allocation_env(const LaunchRequest& req, const Inventory& inv, EnvMap env) {
  for (const auto& [k, v] : req.spec.env) env[k] = v;
  std::vector<std::string> gpus;
  for (int g : req.local().gpus) gpus.push_back(std::to_string(g));
  env["CUDA_VISIBLE_DEVICES"] = join(gpus, ",");
  if (auto hca = nccl_ib_hca(req.local().gpus, inv); !hca.empty()) env["NCCL_IB_HCA"] = hca;
  if (loopback(req.master_addr)) env["NCCL_SOCKET_IFNAME"] = "lo";
  env["RAILYARD_JOB_ID"] = std::to_string(req.job_id);
  env["RAILYARD_ALLOC_ID"] = req.alloc_id;
  env["RAILYARD_NODE"] = req.local().name;
  return env;
}

std::vector<ProcessPlan> plan_env_ranks(const LaunchRequest& req, const Inventory& inv, const EnvMap& base) {
  const EnvMap common = allocation_env(req, inv, base);
  const int local_world = req.local().slots();
  std::vector<ProcessPlan> out;
  for (int local = 0; local < local_world; ++local) {
    EnvMap env = common;
    const int rank = req.first_rank() + local;
    env["RANK"] = std::to_string(rank);
    env["WORLD_SIZE"] = std::to_string(req.world_size());
    env["LOCAL_RANK"] = std::to_string(local);
    env["LOCAL_WORLD_SIZE"] = std::to_string(local_world);
    env["NODE_RANK"] = std::to_string(req.node_rank);
    env["MASTER_ADDR"] = req.master_addr;
    env["MASTER_PORT"] = std::to_string(req.master_port);
    out.push_back(ProcessPlan{rank, req.spec.command, to_env_list(env), req.spec.workdir});
  }
  return out;
}

Result<MpiPlan> plan_mpirun(const LaunchRequest& req, const Inventory& inv, const EnvMap& base,
                            const MpiSettings& s) {
  if (req.node_rank != 0)
    return invalid("the mpi launcher starts mpirun on the allocation's first node only");
  if (req.spec.command.empty()) return invalid("empty command");
  MpiPlan plan;
  const std::string suffix = s.daemons_in_image ? kMpiDaemonHostSuffix : "";
  for (const auto& n : req.nodes)
    plan.hostfile_text += n.name + suffix + " slots=" + std::to_string(n.slots()) + "\n";
  std::vector<std::string> a = {s.mpirun};
  if (s.as_root) a.push_back("--allow-run-as-root");
  for (const char* w : {"--oversubscribe", "--hostfile"}) a.push_back(w);
  a.push_back(s.hostfile);
  a.insert(a.end(), {"-np", std::to_string(req.world_size())});
  // rtc_hwloc_vmhole none: Open MPI 4.1's orted otherwise writes its hwloc topology into a shared-memory
  // mapping placed in the "biggest" hole of its address space, and now and then segfaults there
  // (hwloc_shmem_topology_write); mpirun then waits for that daemon forever. Ranks load the topology
  // themselves instead. orte_leave_session_attached 1: without it, plm_rsh_no_tree_spawn makes every orted
  // daemonize, so the process its node's agent started exits at once and a daemon that dies later goes
  // unseen, by the agent and by mpirun (which learns of a remote daemon only from its rsh agent, and
  // railyard-agent-exec exits once the daemon is started): mpirun would wait for it until the time limit.
  // Attached, orted stays the agent's process: its failure fails the allocation (Supervisor::add_process)
  // and a kill reaches it. mpirun passes these to every orted on its command line.
  const std::vector<std::pair<std::string, std::string>> mca = {
      {"plm_rsh_agent", s.exec_helper}, {"mpi_yield_when_idle", "1"},   {"oob_tcp_if_include", "lo"},
      {"btl_tcp_if_include", "lo"},     {"plm_rsh_no_tree_spawn", "1"}, {"orte_leave_session_attached", "1"},
      {"rtc_hwloc_vmhole", "none"}};
  for (const auto& [k, v] : mca) a.insert(a.end(), {"--mca", k, v});
  if (s.daemons_in_image) {
    a.insert(a.end(), {"--mca", "orte_keep_fqdn_hostnames", "1"});
    // Without it every rank would start in mpirun's directory, node 0's allocation directory, which no
    // other node's container has.
    a.insert(a.end(), {"--wdir", container_workdir(req.spec)});
  }
  if (!s.output_dir.empty()) a.insert(a.end(), {"--output-filename", s.output_dir});
  // Job and Railyard variables travel to every rank; the per-node ones (CUDA_VISIBLE_DEVICES, NCCL_IB_HCA,
  // RAILYARD_NODE) are set by the helper for its host from RAILYARD_ALLOC_GPUS (later: by that host's agent).
  for (const auto& [k, v] : req.spec.env) a.insert(a.end(), {"-x", k});
  for (const char* k : {"RAILYARD_JOB_ID", "RAILYARD_ALLOC_ID"}) a.insert(a.end(), {"-x", k});
  a.insert(a.end(), req.spec.command.begin(), req.spec.command.end());
  EnvMap env = allocation_env(req, inv, base);
  env["RAILYARD_AGENT_STATE_DIR"] = s.state_dir;
  std::vector<std::string> placement;  // "node0:0,1;node1:2,3" for the helper
  for (const auto& n : req.nodes) {
    std::vector<std::string> gpus;
    for (int g : n.gpus) gpus.push_back(std::to_string(g));
    placement.push_back(n.name + ":" + join(gpus, ","));
  }
  env["RAILYARD_ALLOC_GPUS"] = join(placement, ";");
  plan.process = ProcessPlan{0, std::move(a), to_env_list(env), req.spec.workdir};
  return plan;
}

std::vector<std::string> mpi_rank_log_paths(int rank, const std::string& stream) {
  constexpr size_t kMaxWidth = 7;  // world sizes below ten million
  const std::string file = stream == "err" ? "stderr" : "stdout";
  std::vector<std::string> out;
  for (std::string n = std::to_string(rank); rank >= 0 && n.size() <= kMaxWidth; n.insert(0, 1, '0'))
    out.push_back("1/rank." + n + "/" + file);
  return out;
}

}  // namespace railyard::agent
