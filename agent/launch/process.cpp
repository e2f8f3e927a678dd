#include "agent/launch/process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/launch/proc.hpp"

namespace railyard::agent {

namespace {

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Sends errno to the parent through the report pipe and ends the child.
[[noreturn]] void child_fail(int report_fd) {
  const int err = errno;
  [[maybe_unused]] ssize_t n = write(report_fd, &err, sizeof err);
  _exit(127);
}

// Runs in the child between vfork and exec, on the agent's memory while the agent waits: async-signal-safe
// calls only, nothing that changes the agent's state. Identity changes go to the kernel directly: glibc's
// setuid()/setgid()/setgroups() would ask every thread of the agent to change its identity too.
[[noreturn]] void child_exec(const SpawnSpec& spec, int out_fd, int err_fd, int report_fd, char** argv,
                             char** envp) {
  auto fail = [report_fd]() { child_fail(report_fd); };
  if (setsid() < 0) fail();
  if (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0) fail();
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0) fail();
  for (int fd : spec.cgroup_procs_fds)
    if (write(fd, "0", 1) != 1) fail();
  if (spec.umask) umask(*spec.umask);
  if (const auto& c = spec.credentials) {
    if (syscall(SYS_setgroups, c->groups.size(), c->groups.data()) != 0 ||
        syscall(SYS_setresgid, c->gid, c->gid, c->gid) != 0 || syscall(SYS_setresuid, c->uid, c->uid, c->uid) != 0)
      fail();
  }
  if (!spec.workdir.empty() && chdir(spec.workdir.c_str()) != 0) fail();
  // Workers start with default signal handling: none blocked, none ignored (the agent ignores SIGPIPE, and
  // may have been started with others ignored, e.g. SIGHUP under nohup). Every handler is reset before
  // the mask (all blocked by spawn_vforked) is cleared, so none of the agent's handlers runs here.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // KILL, STOP: EINVAL, harmless
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Descriptors the agent opened without O_CLOEXEC (sockets, libraries' files) must not reach the job.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  execvpe(argv[0], argv, envp);
  child_fail(report_fd);
}

// The common case (no identity change, no cgroup) through posix_spawn, which glibc runs as
// clone(CLONE_VM | CLONE_VFORK): unlike fork() it copies none of the agent's page tables (hundreds of MB
// when one agent hosts many emulated nodes) and leaves no copy-on-write faults behind in the agent.
// Same steps as child_exec: new session, logs, /dev/null stdin, working directory, empty signal mask and
// every signal to its default, only fds 0-2 kept; exec and file-action failures come back as the error
// number. Every signal is in the SETSIGDEF set: glibc's child then sets each once, where for a signal
// outside it asks for the disposition first (~120 system calls per spawn instead of ~60).
Result<pid_t> spawn_light(const SpawnSpec& spec, int out_fd, int err_fd, char** argv, char** envp) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (!spec.workdir.empty()) posix_spawn_file_actions_addchdir_np(&actions, spec.workdir.c_str());
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigfillset(&defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, argv[0], &actions, &attr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err != 0) return invalid("cannot start " + spec.argv[0] + ": " + std::strerror(err));
  return pid;
}

// vfork + child_exec, for what posix_spawn cannot do (drop privileges, join a cgroup, set a umask). vfork,
// as posix_spawn, copies none of the agent's page tables (fork's cost grows with the agent's memory, and
// every job of a node with cgroups comes this way). All signals stay blocked until the child has reset
// their handlers: a handler of the agent must not run in the child.
Result<pid_t> spawn_vforked(const SpawnSpec& spec, int out_fd, int err_fd, char** argv, char** envp) {
  int report[2] = {-1, -1};
  if (pipe2(report, O_CLOEXEC) != 0) return internal_error(std::string("pipe: ") + std::strerror(errno));
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  const pid_t pid = vfork();
  if (pid == 0) child_exec(spec, out_fd, err_fd, report[1], argv, envp);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    return internal_error(std::string("vfork failed: ") + std::strerror(fork_errno));
  }
  int child_errno = 0;
  const ssize_t n = read(report[0], &child_errno, sizeof child_errno);  // EOF once exec succeeded
  close(report[0]);
  if (n == sizeof child_errno) {
    waitpid(pid, nullptr, 0);
    return invalid("cannot start " + spec.argv[0] + ": " + std::strerror(child_errno));
  }
  return pid;
}

}  // namespace

Result<std::optional<Credentials>> resolve_job_user(const std::string& user, bool allow_root_jobs) {
  if (const uid_t self = geteuid(); self != 0) {
    // An agent that cannot switch users runs only its own user's jobs (and, with allow_root_jobs, jobs that
    // name no user), never another user's code as itself.
    const struct passwd* me = getpwuid(self);
    const std::string own = me != nullptr ? me->pw_name : std::to_string(self);
    if (user == own || (user.empty() && allow_root_jobs)) return std::optional<Credentials>{};
    return Error{ErrorCode::kPermission,
                 "this agent runs as user '" + own + "' (uid " + std::to_string(self) +
                     ") and cannot switch users: refusing to run a job of user '" + user +
                     "'; only a root agent runs other users' jobs"};
  }
  struct passwd* pw = user.empty() ? nullptr : getpwnam(user.c_str());
  if (pw == nullptr || pw->pw_uid == 0) {
    if (allow_root_jobs) return std::optional<Credentials>{};
    if (pw != nullptr)
      return Error{ErrorCode::kPermission, "refusing to run a job as root (user '" + user +
                                               "' has uid 0); start the agent with --allow-root-jobs to permit it"};
    return Error{ErrorCode::kPermission,
                 user.empty() ? "refusing to run a job as root (no user in the spec); start the agent with "
                                "--allow-root-jobs to permit it"
                              : "user '" + user + "' does not exist on this node; refusing to run the job as root"};
  }
  Credentials c{user, pw->pw_uid, pw->pw_gid, {}, pw->pw_dir};
  int n = 64;
  c.groups.resize(static_cast<size_t>(n));
  if (getgrouplist(user.c_str(), c.gid, c.groups.data(), &n) < 0) {
    c.groups.resize(static_cast<size_t>(n));
    getgrouplist(user.c_str(), c.gid, c.groups.data(), &n);
  }
  c.groups.resize(static_cast<size_t>(n));
  return std::optional<Credentials>{std::move(c)};
}

std::string effective_user(const std::optional<Credentials>& credentials) {
  if (credentials) return credentials->user;
  const struct passwd* pw = getpwuid(geteuid());
  return pw != nullptr ? pw->pw_name : std::to_string(geteuid());
}

Result<Spawned> spawn_process(const SpawnSpec& spec) {
  if (spec.argv.empty()) return invalid("empty command");
  if (spec.stdout_fd < 0 || spec.stderr_fd < 0) return invalid("no log descriptors for " + spec.argv[0]);
  const int out_fd = spec.stdout_fd, err_fd = spec.stderr_fd;
  auto argv = c_strings(spec.argv);
  auto envp = c_strings(spec.env);
  const bool light = !spec.credentials && spec.cgroup_procs_fds.empty() && !spec.umask;
  auto pid = light ? spawn_light(spec, out_fd, err_fd, argv.data(), envp.data())
                   : spawn_vforked(spec, out_fd, err_fd, argv.data(), envp.data());
  if (!pid) return pid.error();
  Spawned s{*pid, *pid, 0};
  if (auto st = read_proc_stat(*pid)) s.start_ticks = st->start_ticks;
  return s;
}

void signal_group(pid_t pgid, int sig) {
  if (pgid > 1) kill(-pgid, sig);
}

bool become_subreaper() { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0; }

}  // namespace railyard::agent
