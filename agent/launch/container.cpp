#include "agent/launch/container.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "jobs/container.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;

namespace {

constexpr const char* kProbeCommand = "/railyard-probe-does-not-exist";
constexpr size_t kMaxOutput = 16 << 20;  // of one blocking engine command
// Podman lowers its own RLIMIT_NPROC to this at start (its conmon and runc inherit it), and the runtime,
// without capabilities in the container, cannot raise a limit: a container's nproc must stay at or below.
constexpr long long kPodmanMaxProcs = 32768;

// The engine's client environment: enough to find its helpers, nothing a job could have set.
std::vector<std::string> clean_env() {
  std::vector<std::string> env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  if (const char* home = std::getenv("HOME")) env.push_back(std::string("HOME=") + home);
  return env;
}

std::vector<std::string> engine_env_of(const ContainerOptions& o) {
  auto env = clean_env();
  env.insert(env.end(), o.engine_env.begin(), o.engine_env.end());
  return env;
}

struct Ran {
  int status = -1;  // exit code, or -1 when it could not run or was killed
  std::string out;
  std::string err;
};

// Children that run_collect killed at their time limit but that had not exited yet (a process in
// uninterruptible sleep on a hung file system outlives SIGKILL until it returns): reaped when they do.
std::vector<pid_t>& unreaped() {
  static std::vector<pid_t> pids;
  return pids;
}

// Runs argv with env, as the agent or as `user`, and collects its output (blocking), for at most `limit`:
// then its process group is killed and the answer says so. For the start-up probe, the orphan reaping
// and the checks of a few paths: short commands, never a pull. A path on a hung NFS server must not hang
// the agent.
Ran run_collect(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                const std::optional<Credentials>& user, std::chrono::milliseconds limit) {
  std::erase_if(unreaped(), [](pid_t p) { return waitpid(p, nullptr, WNOHANG) != 0; });
  Ran r;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return r;
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return r;
  }
  SpawnSpec spec{argv, env, "/", out[1], err[1], user, {}, std::nullopt};
  auto spawned = spawn_process(spec);
  close(out[1]);
  close(err[1]);
  if (!spawned) {
    close(out[0]);
    close(err[0]);
    r.err = spawned.error().message;
    return r;
  }
  // Both pipes are drained together so a child that fills one of them never blocks. poll, not select: the
  // agent holds a descriptor per log it tails, often more than select's 1,024.
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* into[2] = {&r.out, &r.err};
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool timed_out = false;
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int n = poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2 && n > 0; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0 && into[i]->size() < kMaxOutput) into[i]->append(buf, static_cast<size_t>(got));
      if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
        close(fds[i].fd);
        fds[i].fd = -1;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  int status = 0;
  if (timed_out) {
    signal_group(spawned->pgid, SIGKILL);
    for (int i = 0; i < 100 && waitpid(spawned->pid, &status, WNOHANG) == 0; ++i) usleep(10'000);
    if (waitpid(spawned->pid, &status, WNOHANG) == 0) unreaped().push_back(spawned->pid);
    r.status = -1;
    r.err = argv.front() + " did not finish within " + std::to_string(limit.count() / 1000) + " s";
    return r;
  }
  while (waitpid(spawned->pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

bool valid_env_name(const std::string& name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// Whether a CDI spec on the node names NVIDIA GPUs (nvidia-ctk cdi generate writes kind nvidia.com/gpu).
bool has_nvidia_cdi(const std::vector<fs::path>& dirs) {
  for (const auto& d : dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      const auto ext = it->path().extension();
      if (ext != ".yaml" && ext != ".json") continue;
      std::ifstream in(it->path());
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.find("nvidia.com/gpu") != std::string::npos) return true;
    }
  }
  return false;
}

// The driver's user-space libraries a CUDA program in any image needs (what enroot's and the NVIDIA
// container toolkit's hooks mount), found by name in the given directories.
std::vector<std::string> driver_libraries(const std::vector<fs::path>& dirs) {
  static constexpr const char* kPrefixes[] = {"libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so",
                                              "libnvidia-nvvm.so", "libcudadebugger.so"};
  std::vector<std::string> out;
  for (const auto& d : dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      for (const char* p : kPrefixes)
        if (name.rfind(p, 0) == 0) out.push_back(it->path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

long long hard_limit(int resource, long long fallback) {
  struct rlimit r {};
  if (getrlimit(resource, &r) != 0 || r.rlim_max == RLIM_INFINITY) return fallback;
  return static_cast<long long>(r.rlim_max);
}

class Podman final : public ContainerRuntime {
 public:
  Podman(ContainerOptions o, std::string runtime, std::string version)
      : o_(std::move(o)), runtime_(std::move(runtime)), version_(std::move(version)),
        cdi_(has_nvidia_cdi(o_.cdi_dirs)),
        nofile_(hard_limit(RLIMIT_NOFILE, 1 << 20)),
        nproc_(std::min(hard_limit(RLIMIT_NPROC, kPodmanMaxProcs), kPodmanMaxProcs)) {}

  std::string describe() const override {
    return "podman " + version_ + (runtime_.empty() ? "" : " (" + runtime_ + ")") + (cdi_ ? ", CDI" : "");
  }

  std::vector<std::string> run_argv(const ContainerProcess& p) const override {
    std::vector<std::string> a = base();
    // --pull missing: the agent pulled the image before the launch (Session::wait_for_image); only an image
    // removed from the cache since is fetched again here.
    // --log-driver none: the output goes to the agent's log files through this client only, not a second
    // copy in the engine's storage. Podman's default rlimits are above what a node may allow it, so the
    // container gets the agent's own hard limits (a job's limits come from its cgroup).
    a.insert(a.end(), {"run", "--rm", "--pull", "missing", "--log-driver", "none", "--name", p.name, "--network", "host",
                       "--ipc", "host", "--pid", "host", "--cap-drop", "all", "--security-opt", "no-new-privileges",
                       "--ulimit", "nofile=" + std::to_string(nofile_) + ":" + std::to_string(nofile_), "--ulimit",
                       "nproc=" + std::to_string(nproc_) + ":" + std::to_string(nproc_)});
    for (const auto& [k, v] : p.labels) a.insert(a.end(), {"--label", k + "=" + v});
    if (!p.cgroup_parent.empty()) a.push_back("--cgroup-parent=" + p.cgroup_parent);
    if (p.user) {
      a.insert(a.end(), {"--user", std::to_string(p.user->uid) + ":" + std::to_string(p.user->gid)});
      for (gid_t g : p.user->groups)
        if (g != p.user->gid) a.insert(a.end(), {"--group-add", std::to_string(g)});
    }
    if (!p.writable) a.push_back("--read-only");
    if (!p.env_file.empty()) a.insert(a.end(), {"--env-file", p.env_file});
    for (const auto& m : p.mounts)
      a.insert(a.end(), {"--volume", m.source + ":" + m.target + (m.read_only ? ":ro" : ":rw")});
    if (cdi_) {
      for (int g : p.gpus) a.insert(a.end(), {"--device", "nvidia.com/gpu=" + std::to_string(g)});
    } else {
      const auto devices = gpu_device_nodes(o_.dev, p.gpus);
      // At /dev/<name> in the container, wherever the node keeps them (--dev-dir).
      for (const auto& d : devices) a.insert(a.end(), {"--device", d + ":/dev/" + fs::path(d).filename().string()});
      if (!devices.empty())
        for (const auto& lib : driver_libraries(o_.driver_lib_dirs)) a.insert(a.end(), {"--volume", lib + ":" + lib + ":ro"});
    }
    if (!p.workdir.empty()) a.insert(a.end(), {"--workdir", p.workdir});
    a.push_back(p.image);
    a.insert(a.end(), p.command.begin(), p.command.end());
    return a;
  }

  std::vector<std::string> exists_argv(const std::string& image) const override {
    auto a = base();
    a.insert(a.end(), {"image", "exists", image});
    return a;
  }

  std::vector<std::string> pull_argv(const std::string& image) const override {
    auto a = base();
    a.insert(a.end(), {"pull", image});
    return a;
  }

  std::vector<std::string> remove_argv(const std::map<std::string, std::string>& labels) const override {
    auto a = base();
    a.insert(a.end(), {"rm", "--force", "--time", "0"});
    for (const auto& [k, v] : labels) a.insert(a.end(), {"--filter", "label=" + k + "=" + v});
    return a;
  }

  std::vector<std::string> engine_env() const override { return engine_env_of(o_); }

  Result<std::vector<std::string>> container_labels(const std::string& filter_key, const std::string& filter_value,
                                                    const std::string& key) const override {
    auto a = base();
    a.insert(a.end(), {"ps", "--all", "--filter", "label=" + filter_key + "=" + filter_value, "--format",
                       "{{index .Labels \"" + key + "\"}}"});
    const Ran r = run_collect(a, engine_env(), std::nullopt, o_.command_timeout);
    if (r.status != 0) return internal_error("podman ps: " + first_line(r.err));
    std::vector<std::string> out;
    for (size_t pos = 0; pos < r.out.size();) {
      const size_t nl = std::min(r.out.find('\n', pos), r.out.size());
      if (nl > pos) out.push_back(r.out.substr(pos, nl - pos));
      pos = nl + 1;
    }
    return out;
  }

  std::vector<std::string> images_argv() const override {
    auto a = base();
    a.insert(a.end(), {"images", "--format", "json"});
    return a;
  }

  Result<std::vector<CachedImage>> parse_images(const std::string& output) const override {
    std::vector<CachedImage> out;
    try {
      const auto list = nlohmann::json::parse(output.empty() ? "[]" : output);
      if (!list.is_array()) return internal_error("podman images: not a JSON array");
      for (const auto& i : list) {
        CachedImage c;
        c.id = i.value("Id", std::string());
        if (i.contains("Names") && i["Names"].is_array())
          for (const auto& n : i["Names"])
            if (n.is_string()) c.names.push_back(n.get<std::string>());
        c.size_bytes = i.value("Size", 0LL);
        c.created_unix = i.value("Created", 0LL);
        out.push_back(std::move(c));
      }
    } catch (const nlohmann::json::exception& e) {
      return internal_error(std::string("podman images: unreadable answer: ") + e.what());
    }
    return out;
  }

 private:
  std::vector<std::string> base() const {
    std::vector<std::string> a = {o_.engine};
    if (!runtime_.empty()) a.insert(a.end(), {"--runtime", runtime_});
    return a;
  }

  ContainerOptions o_;
  std::string runtime_;
  std::string version_;
  bool cdi_ = false;
  long long nofile_ = 0;
  long long nproc_ = 0;
};

// Starting a container from an empty root file system with a command that does not exist gets as far as
// the runtime's exec of that command (namespaces, cgroups, mounts all made): exit 127 with the runtime's
// "not found" is a working engine. Anything else (podman's 125) says why not.
Status probe(const ContainerOptions& o, const std::string& runtime) {
  const fs::path root = o.state_dir / "containers" / "probe-root";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return internal_error("cannot create " + root.string() + ": " + ec.message());
  std::vector<std::string> a = {o.engine};
  if (!runtime.empty()) a.insert(a.end(), {"--runtime", runtime});
  a.insert(a.end(), {"run", "--rm", "--log-driver", "none", "--network", "host", "--read-only", "--ulimit",
                     "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--rootfs", root.string(), kProbeCommand});
  const Ran r = run_collect(a, engine_env_of(o), std::nullopt, o.command_timeout);
  if (r.status == 127 && r.err.find(kProbeCommand) != std::string::npos) return ok();
  std::string why = first_line(r.err);
  if (why.empty()) why = "exit status " + std::to_string(r.status);
  return Error{ErrorCode::kUnavailable, why};
}

}  // namespace

std::unique_ptr<ContainerRuntime> make_podman(const ContainerOptions& options, std::string runtime,
                                              std::string version) {
  return std::make_unique<Podman>(options, std::move(runtime), std::move(version));
}

Result<std::unique_ptr<ContainerRuntime>> detect_container_runtime(const ContainerOptions& o) {
  const Ran v = run_collect({o.engine, "--version"}, engine_env_of(o), std::nullopt, o.command_timeout);
  if (v.status != 0)
    return Error{ErrorCode::kUnavailable,
                 o.engine + " not usable: " + (v.err.empty() ? "not found" : first_line(v.err))};
  std::string version = first_line(v.out);
  if (const auto sp = version.rfind(' '); sp != std::string::npos) version = version.substr(sp + 1);
  std::vector<std::string> candidates = {o.oci_runtime};
  if (o.oci_runtime.empty()) candidates.push_back("runc");
  std::string why;
  for (const auto& rt : candidates) {
    auto s = probe(o, rt);
    if (s) return make_podman(o, rt, version);
    why += (why.empty() ? "" : "; ") + (rt.empty() ? std::string("default runtime") : rt) + ": " + s.error().message;
  }
  return Error{ErrorCode::kUnavailable, "podman " + version + " cannot start a container here (" + why + ")"};
}

Result<std::string> env_file_text(const std::vector<std::string>& env) {
  std::string out;
  for (const auto& kv : env) {
    const auto eq = kv.find('=');
    const std::string name = kv.substr(0, eq);
    if (eq == std::string::npos || !valid_env_name(name))
      return invalid("environment variable '" + name + "' cannot be passed to a container (names are letters, digits and _)");
    if (kv.find('\n') != std::string::npos || kv.find('\r') != std::string::npos)
      return invalid("environment variable " + name + " has a line break in its value, which a container's environment cannot carry");
    out += kv + "\n";
  }
  return out;
}

std::vector<std::string> gpu_device_nodes(const fs::path& dev, const std::vector<int>& gpus) {
  std::vector<std::string> out;
  auto add = [&](const std::string& name) {
    struct stat st {};
    const fs::path p = dev / name;
    if (stat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) out.push_back(p.string());
  };
  for (int g : gpus) add("nvidia" + std::to_string(g));
  if (out.empty()) return out;  // no GPU device here (an emulated node): nothing else either
  for (const char* c : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) add(c);
  return out;
}

Result<std::vector<jobs::Mount>> checked_mounts(const std::vector<jobs::Mount>& mounts,
                                                const std::optional<Credentials>& user,
                                                std::chrono::milliseconds limit) {
  std::vector<jobs::Mount> out;
  for (const auto& m : mounts) {
    // realpath -e as the user: every component must be searchable by them and the result exist; then
    // read (and, for a directory, search) permission on what it names.
    const std::string check = "p=$(realpath -e -- \"$1\") && test -r \"$p\" && { test ! -d \"$p\" || test -x \"$p\"; } "
                              "&& printf '%s' \"$p\"";
    const Ran r = run_collect({"/bin/sh", "-c", check, "sh", m.source}, clean_env(), user, limit);
    if (r.status != 0 || r.out.empty() || r.out.front() != '/')
      return Error{ErrorCode::kPermission,
                   "mount " + m.text() + ": " + (user ? "user " + user->user : std::string("the agent's user")) +
                       " cannot read " + m.source + " on this node" + (r.status == -1 && !r.err.empty() ? " (" + r.err + ")" : "")};
    jobs::Mount c = m;
    c.source = r.out;
    out.push_back(std::move(c));
  }
  return out;
}

std::string container_workdir(const jobs::JobSpec& spec) {
  const jobs::ContainerSpec& c = *spec.container;
  if (!c.workdir.empty()) return c.workdir;
  const fs::path wd = fs::path(spec.workdir).lexically_normal();
  for (const auto& m : c.mounts) {
    const auto rel = wd.lexically_relative(fs::path(m.target).lexically_normal());
    if (!spec.workdir.empty() && !rel.empty() && *rel.begin() != "..") return spec.workdir;
  }
  return "/tmp";
}

std::string container_name(const std::string& alloc, const std::string& node, const std::string& what,
                           const std::string& node_dir) {
  char hash[16];
  std::snprintf(hash, sizeof hash, "%08zx", std::hash<std::string>{}(node_dir) & 0xffffffffu);
  std::string n = "railyard-" + alloc + "-" + node + "-" + what + "-" + hash;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.' && ch != '-') ch = '_';
  return n;
}

bool is_archive_image(const std::string& image) { return !jobs::archive_path(image).empty(); }


}  // namespace railyard::agent
