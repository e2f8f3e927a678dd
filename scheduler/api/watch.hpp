// Live updates for the CLI and the dashboard: `GET /api/v1/watch` upgraded to WebSocket (PROTOCOL.md,
// last section). Every applied WriteBatch becomes `job` frames (one per changed job) and `node` frames;
// agent metrics become `metrics` frames. `?job=ID` keeps one job's frames. With --private the client's
// first frame must be {"type":"auth","token":"..."}; nothing is sent before it.
//
// Frames: {"type":"hello","v":1} once accepted; {"type":"job","job":{API job}}; {"type":"node","node":{...}};
// {"type":"metrics","job":ID,"events":[...]}; {"type":"error","code","message"} before a close.
// Not thread safe: the daemon's event loop only.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "scheduler/api/http.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::api {

class WatchHub {
 public:
  WatchHub(daemon::Service& service, bool private_reads);
  // Registers the service observer. Call once after Service::open().
  void start();
  // For an upgrade of /api/v1/watch[?job=ID]: the handlers, or nullopt for a bad query (404).
  std::optional<WsHandlers> accept(const HttpRequest& req, const std::shared_ptr<WsPeer>& peer);
  void on_metrics(jobs::JobId job, const nlohmann::json& events);
  size_t watchers() const { return subs_.size(); }

 private:
  struct Sub {
    std::shared_ptr<WsPeer> peer;
    std::optional<jobs::JobId> job;
    bool authed = false;
    std::optional<std::string> only_user;  // --private and not an admin: only this user's jobs
  };
  void on_message(WsPeer* peer, std::string_view text);
  void on_batch(const store::WriteBatch& b);
  void send(Sub& s, const nlohmann::json& frame);

  daemon::Service& service_;
  bool private_;
  std::unordered_map<WsPeer*, Sub> subs_;
};

}  // namespace railyard::api
