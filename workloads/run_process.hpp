// Test helper: runs a shell command as a real process, capturing stdout and stderr apart, with a deadline
// after which the whole process group is killed.
#pragma once

#include <chrono>
#include <string>

namespace railyard::workloads::testing {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by one; -1 when it could not start
  bool timed_out = false;
  std::string out;
  std::string err;
};

ProcessResult run_process(const std::string& shell_command, std::chrono::seconds timeout);

// Quotes a word for /bin/sh.
std::string shell_quote(const std::string& word);

}  // namespace railyard::workloads::testing
