#include "agent/launch/launcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>

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
  if (!options_.cgroups) {
    cgroup_unusable_ = "disabled (--no-cgroups)";
  } else if (auto d = detect_cgroup_driver(options_.cgroup)) {
    cgroups_ = std::move(*d);
  } else {
    cgroup_unusable_ = d.error().message;
  }
}

std::string Launcher::cgroup_summary() const {
  return cgroups_ ? "cgroups: " + cgroups_->describe() : "cgroups: none (" + cgroup_unusable_ + ")";
}

ResourceLimits limits_for(const LaunchRequest& req, const Inventory& inv) {
  ResourceLimits l = req.limits;
  const int local = req.local().slots();
  const double share = inv.gpu_count > 0 && local > 0 ? std::min(1.0, double(local) / inv.gpu_count) : 0;
  if (!l.memory_bytes && req.spec.mem_mb > 0) l.memory_bytes = static_cast<long long>(req.spec.mem_mb) << 20;
  if (!l.memory_bytes && share > 0) {
    const long long node = static_cast<long long>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
    if (node > 0) l.memory_bytes = static_cast<long long>(static_cast<double>(node) * share);
  }
  if (!l.cpu_share && share > 0) l.cpu_share = std::max(0.01, std::thread::hardware_concurrency() * share);
  return l;
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

Result<std::vector<ProcessPlan>> Launcher::plan(const LaunchRequest& req, const AllocDir& dir) const {
  // A process in an image gets the image's environment and the job's, never the agent's (its PATH and
  // library paths name the host's files). mpirun stays on the host (its daemons run in the image).
  const bool host_process = !req.spec.container || req.spec.launcher == jobs::Launcher::kMpi;
  const EnvMap base = options_.inherit_env && host_process ? environ_map() : EnvMap{};
  switch (req.spec.launcher) {
    case jobs::Launcher::kEnv:
      return plan_env_ranks(req, inventory_, base);
    case jobs::Launcher::kMpi: {
      const fs::path& out = options_.mpi_output_dir;
      MpiSettings s{options_.mpirun,
                    options_.exec_helper,
                    (dir.path() / "hostfile").string(),
                    options_.state_dir.string(),
                    geteuid() == 0,
                    out.empty() ? "" : (out / req.alloc_id).string(),
                    req.spec.container.has_value()};
      auto mpi = plan_mpirun(req, inventory_, base, s);
      if (!mpi) return mpi.error();
      if (auto w = dir.write("hostfile", mpi->hostfile_text); !w) return w.error();
      return std::vector<ProcessPlan>{mpi->process};
    }
    case jobs::Launcher::kNone:
      break;
  }
  // No launcher: the command once per node, with the allocation's variables but no rank variables.
  return std::vector<ProcessPlan>{ProcessPlan{
      req.node_rank, req.spec.command, to_env_list(allocation_env(req, inventory_, base)), req.spec.workdir}};
}

Result<std::vector<std::string>> Launcher::cgroup_for(const LaunchRequest& req,
                                                      std::vector<std::string>& notes) const {
  auto without = [&](const std::string& why) -> Result<std::vector<std::string>> {
    if (options_.cgroups && options_.isolation == IsolationMode::kRequired)
      return Error{ErrorCode::kUnavailable, "cannot isolate " + req.alloc_id + " on " + req.local().name + ": " +
                                                why + " (the agent's --isolation best-effort starts jobs without it)"};
    note(notes, "cgroup limits skipped for " + req.alloc_id + ": " + why);
    return std::vector<std::string>{};
  };
  if (!cgroups_) return without(cgroup_unusable_);
  // Device rules only where the GPUs are real: an emulated node's indices name no /dev/nvidiaN.
  const bool real_gpus = inventory_.source == "nvml" || inventory_.source == "nvidia-smi";
  const std::string name = std::to_string(req.job_id) + "-" + req.alloc_id + "-" + req.local().name;
  auto group = cgroups_->create(name, limits_for(req, inventory_), GpuAccess{real_gpus, req.local().gpus});
  if (!group) return without(group.error().message);
  return std::move(*group);
}

Result<RankRecord> spawn_in_alloc(const AllocDir& dir, int rank, const std::string& log_base, SpawnSpec spec,
                                  Fd* keep_stdout) {
  auto out = dir.create(log_base + ".out");
  if (!out) return out.error();
  auto err = dir.create(log_base + ".err");
  if (!err) return err.error();
  spec.stdout_fd = out->get();
  spec.stderr_fd = err->get();
  auto spawned = spawn_process(spec);
  if (!spawned) return spawned.error();
  if (keep_stdout) *keep_stdout = std::move(*out);
  return RankRecord{rank, spawned->pid, spawned->pgid, spawned->start_ticks, (dir.path() / (log_base + ".out")).string(),
                    (dir.path() / (log_base + ".err")).string()};
}

namespace {

// A cgroup directory's path inside its hierarchy ("/railyard/12-12.1-n1" for
// /sys/fs/cgroup/memory/railyard/12-12.1-n1): what --cgroup-parent takes. The hierarchy's root is the
// topmost directory above it on the same file system.
std::string path_in_hierarchy(const fs::path& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return {};
  fs::path root = dir;
  for (fs::path up = root.parent_path(); up != root && !up.empty(); up = root.parent_path()) {
    struct stat ust {};
    if (stat(up.c_str(), &ust) != 0 || ust.st_dev != st.st_dev) break;
    root = up;
  }
  const std::string rel = fs::path(dir).lexically_relative(root).string();
  return rel.empty() || rel == "." ? std::string("/") : "/" + rel;
}

}  // namespace

Result<SpawnSpec> Launcher::container_spawn(const LaunchRequest& req, const ProcessPlan& plan, const AllocDir& dir,
                                            const std::optional<Credentials>& user,
                                            const std::vector<std::string>& cgroups,
                                            const std::vector<jobs::Mount>& mounts,
                                            const std::string& name) const {
  const jobs::ContainerSpec& c = *req.spec.container;
  if (!options_.containers)
    return Error{ErrorCode::kUnavailable, "node " + req.local().name + " has no container engine for image " + c.image};
  std::vector<jobs::Mount> all = {{dir.path().string(), dir.path().string(), false}};
  all.insert(all.end(), mounts.begin(), mounts.end());
  auto text = env_file_text(plan.env);
  if (!text) return text.error();
  // The env file is root's and in a root-only directory: the job's values (tokens, keys) stay out of every
  // command line and out of the user's reach as a file the engine reads.
  const fs::path env_dir = options_.state_dir / "containers" / req.alloc_id;
  std::error_code ec;
  fs::create_directories(env_dir, ec);
  if (ec || chmod(env_dir.c_str(), 0700) != 0 || chmod(env_dir.parent_path().c_str(), 0700) != 0)
    return internal_error("cannot make " + env_dir.string());
  const fs::path env_file = env_dir / (name + ".env");
  {
    const int fd = open(env_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return internal_error("cannot write " + env_file.string() + ": " + std::strerror(errno));
    Fd owned(fd);
    if (write(fd, text->data(), text->size()) != static_cast<ssize_t>(text->size()))
      return internal_error("cannot write " + env_file.string());
  }
  ContainerProcess p;
  p.image = c.image;
  p.command = plan.argv;
  p.env_file = env_file.string();
  p.user = user;
  p.workdir = container_workdir(req.spec);
  p.mounts = std::move(all);
  p.writable = c.writable;
  p.cgroup_parent = cgroups.empty() ? "" : path_in_hierarchy(cgroups.front());
  p.gpus = req.local().gpus;
  p.name = name;
  p.labels = {{"railyard.alloc", req.alloc_id},
              {"railyard.node", req.local().name},
              {"railyard.job", std::to_string(req.job_id)},
              {kNodeDirLabel, options_.state_dir.string()}};
  if (!c.name.empty()) p.labels["railyard.name"] = c.name;
  SpawnSpec spec;
  spec.argv = options_.containers->run_argv(p);
  spec.env = options_.containers->engine_env();
  spec.workdir = dir.path().string();
  return spec;
}

// Only the job's user may enter: its logs, hostfile and scratch files are its own.
Result<AllocDir> Launcher::make_alloc_dir(long long job_id, const std::string& alloc_id,
                                          const std::optional<Credentials>& owner) const {
  return AllocDir::make(options_.state_dir, job_id, alloc_id, owner);
}

Result<AllocDir> Launcher::open_alloc_dir(long long job_id, const std::string& alloc_id) const {
  return AllocDir::open(options_.state_dir, job_id, alloc_id);
}

Result<Launched> Launcher::launch(const LaunchRequest& req) {
  if (auto s = check_request(req); !s) return s.error();
  auto creds = resolve_job_user(req.spec.user, options_.allow_root_jobs);
  if (!creds) return creds.error();
  auto dir = make_alloc_dir(req.job_id, req.alloc_id, *creds);
  if (!dir) return dir.error();
  // mpirun (as the job's user) writes this node's ranks' files there; other nodes' agents make theirs at
  // the exec order that starts their orted.
  if (req.spec.launcher == jobs::Launcher::kMpi && !options_.mpi_output_dir.empty())
    if (auto out = make_owned_dir(options_.mpi_output_dir, req.alloc_id, *creds); !out) return out.error();
  auto plans = plan(req, *dir);
  if (!plans) return plans.error();

  Launched out;
  AllocRecord& rec = out.record;
  rec.job_id = req.job_id;
  rec.alloc_id = req.alloc_id;
  rec.node = req.local().name;
  rec.started_unix_ms = unix_ms_now();
  const auto limit = req.time_limit.value_or(std::chrono::seconds(req.spec.time_limit_s));
  rec.deadline_unix_ms = limit.count() > 0 ? rec.started_unix_ms + limit.count() : 0;
  rec.user = effective_user(*creds);
  rec.gpus = req.local().gpus;
  auto groups = cgroup_for(req, out.notes);
  if (!groups) return groups.error();
  rec.cgroups = std::move(*groups);
  std::vector<int> procs_fds;
  auto close_fds = [&procs_fds] {
    for (int fd : procs_fds) close(fd);
  };
  for (const auto& g : rec.cgroups) {
    const int fd = open((g + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      close_fds();
      remove_cgroup(rec.cgroups);
      return internal_error("cannot open " + g + "/cgroup.procs");
    }
    procs_fds.push_back(fd);
  }

  const bool in_image = req.spec.container && req.spec.launcher != jobs::Launcher::kMpi;
  // The job's mounts, checked as its user once for all its processes here.
  auto mounts = in_image ? checked_mounts(req.spec.container->mounts, *creds) : Result<std::vector<jobs::Mount>>(std::vector<jobs::Mount>{});
  if (!mounts) {
    close_fds();
    remove_cgroup(rec.cgroups);
    return mounts.error();
  }
  for (const auto& p : *plans) {
    SpawnSpec spec{p.argv, p.env, p.workdir.empty() ? dir->path().string() : p.workdir, -1, -1, *creds, procs_fds,
                   options_.job_umask};
    if (in_image) {
      auto c = container_spawn(req, p, *dir, *creds, rec.cgroups, *mounts,
                               container_name(req.alloc_id, req.local().name, "rank" + std::to_string(p.rank),
                                              options_.state_dir.string()));
      if (!c) {
        kill_started(rec.ranks);
        close_fds();
        remove_cgroup(rec.cgroups);
        return c.error();
      }
      c->cgroup_procs_fds = procs_fds;
      spec = std::move(*c);
    }
    auto spawned = spawn_in_alloc(*dir, p.rank, "rank-" + std::to_string(p.rank), spec, p.rank == 0 ? &out.rank0_out : nullptr);
    if (!spawned) {
      kill_started(rec.ranks);
      close_fds();
      remove_cgroup(rec.cgroups);
      return spawned.error();
    }
    rec.ranks.push_back(std::move(*spawned));
  }
  close_fds();
  if (auto s = options_.allocs ? options_.allocs->put(rec) : invalid("no allocation store"); !s)
    note(out.notes, s.error().message + " (recovery after a restart will miss " + rec.alloc_id + ")");
  return out;
}

}  // namespace railyard::agent
