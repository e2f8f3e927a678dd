// FakeScheduler: the scheduler's side of scheduler/PROTOCOL.md, just enough to drive a real railyard-agent
// over real sockets on 127.0.0.1 (the real railyard-scheduler is tested against the agent in tests/).
// It runs its own io thread: greets each agent connection with `hello`, answers a valid `register` with
// `registered` (heartbeat 1 s) and every `alloc_finished` with `ack`, sealing `registered` and everything
// after it with the connection's session key as the real scheduler does, and serves
// POST /api/v1/allocs/<alloc>/exec by sending `exec` to the agent and answering 200 {"pid"} on
// `exec_started`. Every frame an agent sends is recorded; tests wait on them.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace railyard::agent::testing {

class FakeScheduler {
 public:
  explicit FakeScheduler(std::string secret);
  ~FakeScheduler();

  int port() const;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }

  // Sends a frame to the most recent agent connection.
  void send(const nlohmann::json& msg);
  // Closes every agent connection (the agent should reconnect).
  void drop_agents();
  // The first recorded frame after `from` that matches; null after the timeout. `from` moves past it.
  nlohmann::json wait_for(const std::function<bool(const nlohmann::json&)>& match, size_t& from,
                          std::chrono::milliseconds timeout = std::chrono::seconds(30));
  std::vector<nlohmann::json> frames() const;
  int exec_requests() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace railyard::agent::testing
