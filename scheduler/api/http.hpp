// Plain HTTP request/response values: the only face of the HTTP server that the router and daemon see, so
// that Boost.Beast stays inside server.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace railyard::api {

// Who the kernel says is at the other end of a Unix-socket connection (SO_PEERCRED, read when it was
// accepted). TCP connections have none.
struct PeerCredentials {
  uint32_t uid = 0;
  uint32_t gid = 0;
  int32_t pid = 0;
};

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // path and query, as sent
  std::string authorization;  // the Authorization header, "" when absent
  std::string body;
  std::string remote{};  // "127.0.0.1", "unix:uid=1000": the peer, for the audit log; "" when unknown
  std::optional<PeerCredentials> peer{};  // set on the Unix socket only
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Called exactly once per request, on the server's event loop.
using Reply = std::function<void(HttpResponse)>;
using Handler = std::function<void(HttpRequest&&, Reply)>;

// One WebSocket connection, as the daemon sees it. Every call on the server's event loop. send() queues a
// text frame (frames go out in order); close() sends the queued frames, then a close frame.
class WsPeer {
 public:
  virtual ~WsPeer() = default;
  virtual void send(std::string text) = 0;
  virtual void close() = 0;
  virtual std::string remote_address() const = 0;
};

// What to do with an accepted connection's frames; on_close runs once, when the connection ended (either
// side), after which the peer ignores send().
struct WsHandlers {
  std::function<void(std::string_view)> on_message;
  std::function<void()> on_close;
};

// Called for a WebSocket upgrade request: handlers to accept it, or nullopt to answer 404.
using WsAcceptor = std::function<std::optional<WsHandlers>(const HttpRequest&, std::shared_ptr<WsPeer>)>;

inline constexpr size_t kWsFrameLimit = size_t{1} << 20;  // 1 MiB per message

inline constexpr size_t kDefaultBodyLimit = size_t{1} << 20;  // 1 MiB
inline constexpr size_t kMaxBodyLimit = size_t{64} << 20;     // 64 MiB (batch submits)

// {"error": {"code": ..., "message": ...}} with the status that matches the code.
HttpResponse error_response(int status, std::string_view code, std::string_view message);
// The status and code for an Error from the layers below (kInvalidArgument -> 400 "invalid_argument", ...).
HttpResponse error_response(const Error& error);

}  // namespace railyard::api
