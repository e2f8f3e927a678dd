// The event loop the daemon's parts run on (the HTTP server's, or a fake in tests), and work posted on it.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <functional>

namespace railyard::daemon {

struct Loop {
  std::function<void(std::function<void()>)> post;
  std::function<void(std::chrono::milliseconds, std::function<void()>)> post_after;
};

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
