// Live updates for the CLI and the dashboard: `GET /api/v1/watch` upgraded to WebSocket (PROTOCOL.md,
// last section). Every applied WriteBatch becomes `job` frames (one per changed job) and `node` frames;
// agent metrics become `metrics` frames. `?job=ID` keeps one job's frames.
//
// Who watches: the bearer token of the upgrade request's Authorization header, the Unix user of a
// Unix-socket connection without one (peer_auth.hpp), or the token of a first frame
// {"type":"auth","token":"..."} (browsers cannot set headers on a WebSocket). With --private one of these
// is required: nothing is sent before it, and a watcher that has not authenticated within
// kWatchAuthDeadline is told so and closed. Without --private a watcher is anonymous until it names itself.
// A job's env values go only to its owner and admins (views.hpp, sees_env); others get the keys with
// kHiddenEnvValue.
//
// Frames: {"type":"hello","v":1} once accepted; {"type":"job","job":{API job}}; {"type":"node","node":{...}};
// {"type":"metrics","job":ID,"events":[...]}; {"type":"error","code","message"} before a close.
// Not thread safe: the daemon's event loop only.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "scheduler/api/http.hpp"
#include "scheduler/api/peer_auth.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::api {

// How long a watcher of a --private scheduler may take to send its auth frame.
inline constexpr std::chrono::seconds kWatchAuthDeadline{10};

class WatchHub {
 public:
  WatchHub(daemon::Service& service, bool private_reads);
  // Registers the service observer. Call once after Service::open().
  void start();
  // Who is an admin among Unix-socket watchers (the router's policy).
  void set_peer_policy(PeerPolicy policy) { peer_policy_ = policy; }
  // For an upgrade of /api/v1/watch[?job=ID]: the handlers, or nullopt for a bad query (404).
  std::optional<WsHandlers> accept(const HttpRequest& req, const std::shared_ptr<WsPeer>& peer);
  void on_metrics(jobs::JobId job, const nlohmann::json& events);
  size_t watchers() const { return subs_.size(); }

 private:
  struct Sub {
    std::shared_ptr<WsPeer> peer;
    std::optional<jobs::JobId> job;
    bool authed = false;                   // frames may go out (at once without --private)
    std::optional<daemon::Caller> viewer;  // who watches; none: anonymous
  };
  // --private and not an admin: only the viewer's own jobs.
  bool only_own(const Sub& s) const { return private_ && s.viewer && !s.viewer->admin(); }
  // The caller the upgrade request names (header token, Unix peer); the refusal of a bad token.
  std::optional<Result<daemon::Caller>> caller_of(const HttpRequest& req) const;
  void on_message(WsPeer* peer, std::string_view text);
  // Marks `s` as watched by `who` (nullopt: refused with `refusal`, and closed).
  void identify(Sub& s, Result<daemon::Caller> who);
  void expire_auth(const std::weak_ptr<WsPeer>& peer);
  void on_batch(const store::WriteBatch& b);
  void send(Sub& s, const nlohmann::json& frame);

  daemon::Service& service_;
  bool private_;
  PeerPolicy peer_policy_;
  std::unordered_map<WsPeer*, Sub> subs_;
};

}  // namespace railyard::api
