#include "agent/session/health.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "topology/profile.hpp"

namespace railyard::agent {

HealthStatus check_node(const Inventory& inv, const std::filesystem::path& state_dir, long long min_free) {
  if (!inv.profile.empty()) {
    if (const auto* p = topology::find_builtin_profile(inv.profile); p && p->gpus != inv.gpu_count)
      return {false, "gpus: " + std::to_string(inv.gpu_count) + " found, profile " + inv.profile + " has " +
                         std::to_string(p->gpus)};
  }
  struct statvfs vfs {};
  if (statvfs(state_dir.c_str(), &vfs) == 0) {
    const long long free_bytes = static_cast<long long>(vfs.f_bavail) * static_cast<long long>(vfs.f_frsize);
    if (free_bytes < min_free)
      return {false, "disk: " + std::to_string(free_bytes >> 20) + " MiB free in " + state_dir.string()};
  }
  return {};
}

HealthChecker::HealthChecker(HealthOptions options, Inventory inventory, std::filesystem::path state_dir)
    : options_(std::move(options)), inventory_(std::move(inventory)), state_dir_(std::move(state_dir)) {
  script_out_ = state_dir_ / "health-script.out";
}

HealthChecker::~HealthChecker() {
  if (script_pid_ > 0) {
    kill(script_pid_, SIGKILL);
    waitpid(script_pid_, nullptr, 0);
  }
}

std::optional<HealthStatus> HealthChecker::update(HealthStatus next) {
  if (next == status_) return std::nullopt;
  status_ = std::move(next);
  return status_;
}

void HealthChecker::start_script(Clock::time_point now) {
  const std::string node = inventory_.node;
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(script_out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execl(options_.script.c_str(), options_.script.c_str(), node.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  script_pid_ = pid > 0 ? pid : 0;
  script_started_ = now;
}

std::optional<HealthStatus> HealthChecker::finish_script(Clock::time_point now) {
  int status = 0;
  const pid_t p = waitpid(script_pid_, &status, WNOHANG);
  if (p == 0 && now - script_started_ < options_.script_timeout) return std::nullopt;
  if (p == 0) {
    kill(script_pid_, SIGKILL);
    waitpid(script_pid_, nullptr, 0);
    script_pid_ = 0;
    return update({false, "health script: timed out"});
  }
  script_pid_ = 0;
  if (!base_.ok) return update(base_);
  if (p > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return update({});
  std::string line;
  std::ifstream in(script_out_);
  std::getline(in, line);
  const int code = p > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return update({false, "health script: exit " + std::to_string(code) + (line.empty() ? "" : ": " + line)});
}

std::optional<HealthStatus> HealthChecker::poll(Clock::time_point now) {
  if (script_pid_ > 0) return finish_script(now);
  if (next_ && now < *next_) return std::nullopt;
  next_ = now + options_.interval;
  base_ = check_node(inventory_, state_dir_, options_.min_free_bytes);
  if (base_.ok && !options_.script.empty()) {
    start_script(now);
    return std::nullopt;
  }
  return update(base_);
}

}  // namespace railyard::agent
