// Work posted on the daemon's loop (service*.cpp, internal).
#pragma once

#include <spdlog/spdlog.h>

#include <exception>
#include <functional>

namespace railyard::daemon {

// Work posted on the loop: an exception is a bug, logged, and must not end the daemon.
inline std::function<void()> guarded(const char* what, std::function<void()> fn) {
  return [what, fn = std::move(fn)] {
    try {
      fn();
    } catch (const std::exception& e) {
      spdlog::error("{}: internal error: {}", what, e.what());
    }
  };
}

}  // namespace railyard::daemon
