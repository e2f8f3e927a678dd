#include "agent/launch/launcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include "agent/launch/cgroup.hpp"
#include "agent/launch/plan.hpp"
#include "agent/launch/process.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;

namespace {

long long unix_ms_now() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Status check_request(const LaunchRequest& r) {
  if (r.alloc_id.empty() || r.alloc_id.find('/') != std::string::npos || r.alloc_id.front() == '.')
    return invalid("bad allocation id '" + r.alloc_id + "'");
  if (r.node_rank < 0 || r.node_rank >= static_cast<int>(r.nodes.size()))
    return invalid("node rank " + std::to_string(r.node_rank) + " outside the allocation's nodes");
  if (r.spec.command.empty()) return invalid("the job has no command");
  return ok();
}

void kill_started(const std::vector<RankRecord>& ranks) {
  for (const auto& r : ranks) {
    signal_group(r.pgid, SIGKILL);
    waitpid(r.pid, nullptr, 0);
  }
}

}  // namespace

std::string default_exec_helper() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "railyard-agent-exec" : (self.parent_path() / "railyard-agent-exec").string();
}

Launcher::Launcher(LauncherOptions options, Inventory inventory)
    : options_(std::move(options)), inventory_(std::move(inventory)) {
  if (options_.exec_helper.empty()) options_.exec_helper = default_exec_helper();
}

fs::path Launcher::alloc_dir(long long job_id, const std::string& alloc_id) const {
  return options_.state_dir / "jobs" / std::to_string(job_id) / alloc_id;
}

void Launcher::note(std::vector<std::string>& notes, std::string text) const {
  if (options_.log)
    options_.log(text);
  else
    std::cerr << "railyard-agent: " << text << "\n";
  notes.push_back(std::move(text));
}

Result<std::vector<ProcessPlan>> Launcher::plan(const LaunchRequest& req, const fs::path& dir) const {
  const EnvMap base = options_.inherit_env ? environ_map() : EnvMap{};
  switch (req.spec.launcher) {
    case jobs::Launcher::kEnv:
      return plan_env_ranks(req, inventory_, base);
    case jobs::Launcher::kMpi: {
      MpiSettings s{options_.mpirun, options_.exec_helper, (dir / "hostfile").string(),
                    options_.state_dir.string(), geteuid() == 0};
      auto mpi = plan_mpirun(req, inventory_, base, s);
      if (!mpi) return mpi.error();
      std::ofstream(s.hostfile) << mpi->hostfile_text;
      return std::vector<ProcessPlan>{mpi->process};
    }
    case jobs::Launcher::kNone:
      break;
  }
  // No launcher: the command once per node, with the allocation's variables but no rank variables.
  return std::vector<ProcessPlan>{ProcessPlan{
      req.node_rank, req.spec.command, to_env_list(allocation_env(req, inventory_, base)), req.spec.workdir}};
}

std::string Launcher::cgroup_for(const LaunchRequest& req, std::vector<std::string>& notes) const {
  if (!req.limits.memory_bytes && !req.limits.cpus) return "";
  if (auto why = cgroup2_unusable(options_.cgroup_root)) {
    note(notes, "cgroup limits skipped for " + req.alloc_id + ": " + *why);
    return "";
  }
  auto group =
      create_cgroup(options_.cgroup_root, std::to_string(req.job_id) + "-" + req.alloc_id, req.limits);
  if (!group) {
    note(notes, "cgroup limits skipped for " + req.alloc_id + ": " + group.error().message);
    return "";
  }
  return group->string();
}

Result<Launched> Launcher::launch(const LaunchRequest& req) {
  if (auto s = check_request(req); !s) return s.error();
  auto creds = resolve_job_user(req.spec.user, options_.allow_root_jobs);
  if (!creds) return creds.error();
  const fs::path dir = alloc_dir(req.job_id, req.alloc_id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return internal_error("cannot create " + dir.string() + ": " + ec.message());
  if (*creds && chown(dir.c_str(), (*creds)->uid, (*creds)->gid) != 0)
    return internal_error("cannot chown " + dir.string());
  auto plans = plan(req, dir);
  if (!plans) return plans.error();

  Launched out;
  AllocRecord& rec = out.record;
  rec.job_id = req.job_id;
  rec.alloc_id = req.alloc_id;
  rec.node = req.local().name;
  rec.started_unix_ms = unix_ms_now();
  const auto limit = req.time_limit.value_or(std::chrono::seconds(req.spec.time_limit_s));
  rec.deadline_unix_ms = limit.count() > 0 ? rec.started_unix_ms + limit.count() : 0;
  rec.cgroup = cgroup_for(req, out.notes);
  const int procs_fd =
      rec.cgroup.empty() ? -1 : open((rec.cgroup + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);

  for (const auto& p : *plans) {
    const std::string base = (dir / ("rank-" + std::to_string(p.rank))).string();
    SpawnSpec spec{p.argv,        p.env,         p.workdir.empty() ? dir.string() : p.workdir,
                   base + ".out", base + ".err", *creds,
                   procs_fd};
    auto spawned = spawn_process(spec);
    if (!spawned) {
      kill_started(rec.ranks);
      if (procs_fd >= 0) close(procs_fd);
      return spawned.error();
    }
    rec.ranks.push_back(RankRecord{p.rank, spawned->pid, spawned->pgid, spawned->start_ticks,
                                   spec.stdout_path, spec.stderr_path});
  }
  if (procs_fd >= 0) close(procs_fd);
  if (auto s = options_.allocs ? options_.allocs->put(rec) : invalid("no allocation store"); !s)
    note(out.notes, s.error().message + " (recovery after a restart will miss " + rec.alloc_id + ")");
  return out;
}

}  // namespace railyard::agent
