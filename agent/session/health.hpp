// Node health checks the agent runs every `interval`: GPU count against the node's profile, free space in
// the state directory, and an optional script (`<script> <node>`, exit 0 = healthy, first output line =
// reason). A failing check is reported to the scheduler (`health`), which drains the node with the reason.
// The script runs as a child process polled without blocking; one that runs past `script_timeout` is
// killed and counts as failing.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "agent/discovery/inventory.hpp"

namespace railyard::agent {

struct HealthOptions {
  long long min_free_bytes = 1LL << 30;  // in the state directory
  std::string script;                    // "" = none
  std::chrono::milliseconds interval{30000};
  std::chrono::milliseconds script_timeout{20000};
};

struct HealthStatus {
  bool ok = true;
  std::string reason;  // "" when ok
  bool operator==(const HealthStatus&) const = default;
};

// The checks that need no process: GPU count vs the profile, free disk.
HealthStatus check_node(const Inventory& inventory, const std::filesystem::path& state_dir,
                        long long min_free_bytes);

// One node's checks over time. poll() returns the new status when it changed.
class HealthChecker {
 public:
  using Clock = std::chrono::steady_clock;
  HealthChecker(HealthOptions options, Inventory inventory, std::filesystem::path state_dir);
  ~HealthChecker();

  std::optional<HealthStatus> poll(Clock::time_point now);
  const HealthStatus& status() const { return status_; }

 private:
  void start_script(Clock::time_point now);
  std::optional<HealthStatus> finish_script(Clock::time_point now);
  std::optional<HealthStatus> update(HealthStatus next);

  HealthOptions options_;
  Inventory inventory_;
  std::filesystem::path state_dir_;
  HealthStatus status_;
  HealthStatus base_;  // the result of check_node at the last round
  std::optional<Clock::time_point> next_;
  pid_t script_pid_ = 0;
  Clock::time_point script_started_;
  std::filesystem::path script_out_;
};

}  // namespace railyard::agent
