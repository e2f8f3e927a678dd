// Starting one worker process: a new session (so the process and everything it forks share one process
// group the supervisor can signal), stdout/stderr to files, working directory, environment, optional
// cgroup and dropped privileges, then exec. posix_spawn (vfork-like: no copy of the agent's page tables)
// when neither a cgroup, another user nor a umask is involved, else fork. Exec failures come back as errors
// (posix_spawn's result, or a CLOEXEC pipe carrying the child's errno), not as a process that exits 127.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace railyard::agent {

// The identity a job runs as when the agent is root.
struct Credentials {
  std::string user;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, resolved before fork (initgroups is not fork-safe)
  std::string home;
};

// Who runs a job's processes. Agent not root (it cannot switch users): the agent's own user (nullopt), for
// that user's jobs only (and, with allow_root_jobs, a job naming no user); another user's job is refused.
// Agent root: the spec's
// user when it exists locally; a missing or unknown user, or one whose uid is 0 (root by any name), is
// refused unless allow_root_jobs.
Result<std::optional<Credentials>> resolve_job_user(const std::string& user, bool allow_root_jobs);

// The user name a job resolved by resolve_job_user runs as: the credentials' user, else the agent's own.
std::string effective_user(const std::optional<Credentials>& credentials);

struct SpawnSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE
  std::string workdir;           // "" = the agent's
  // The process's stdout and stderr, made by the caller (AllocDir::create: the logs live in a directory the
  // job's user owns, so they are never opened here by name); left open for the caller to close.
  int stdout_fd = -1;
  int stderr_fd = -1;
  std::optional<Credentials> credentials;
  // Open cgroup.procs files (one per hierarchy) the child joins before exec, so no job code runs outside
  // its group.
  std::vector<int> cgroup_procs_fds;
  // The file mode creation mask the job starts with; nullopt = the agent's.
  std::optional<mode_t> umask;
};

struct Spawned {
  pid_t pid = 0;
  pid_t pgid = 0;  // == pid: the child leads its own session and group
  unsigned long long start_ticks = 0;
};

Result<Spawned> spawn_process(const SpawnSpec& spec);

// kill(-pgid, sig), ignoring groups already gone.
void signal_group(pid_t pgid, int sig);

// Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER), so a worker's
// background children stay in reach of waitpid instead of escaping to init.
bool become_subreaper();

}  // namespace railyard::agent
