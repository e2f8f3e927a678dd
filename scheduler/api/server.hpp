// HTTP/1.1 server with keep-alive and pipelining on one event loop (one thread), optionally TLS only
// (enable_tls). Each request goes to the Handler, whose Reply may come later (e.g. after a group commit);
// answers go out in the order the requests came. A request is handed over once every earlier one on its
// connection was answered, except requests that ConcurrentFn accepts: those go at once while the earlier
// ones still unanswered are such requests too (set_concurrent; submits, so that a pipelining client's
// submits share a commit). Every stream has a timeout (a request's header must arrive within
// ServerLimits::header_timeout); connections are capped (ServerLimits::max_connections); bodies are limited
// per request target (BodyLimitFn), and an oversized body is answered 413 and the connection closed after
// the rest of the body is drained.
//
// The server also is the daemon's event loop: post() and post_after() run work on it, so everything the
// daemon does happens on one thread and needs no locks.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/result.hpp"
#include "scheduler/api/http.hpp"

namespace railyard::api {

using BodyLimitFn = std::function<size_t(std::string_view target)>;
// Whether a request may run before the earlier ones on its connection are answered (see above).
using ConcurrentFn = std::function<bool(const HttpRequest&)>;

// What one client may hold of the server (the daemon's --max-connections, --header-timeout).
struct ServerLimits {
  // Connections open at once (HTTP, WebSocket, TLS handshakes); one more is answered 503 and closed
  // (with TLS: closed). Every descriptor counts against RLIMIT_NOFILE, so keep this below it.
  size_t max_connections = 4096;
  // From waiting for a request (a new connection, or an idle keep-alive one) to having its whole header;
  // also the TLS handshake's. Slow-loris clients are closed after it.
  std::chrono::seconds header_timeout{10};
  // TCP connections open at once from one peer address (0: no bound); one more is answered 503 and closed.
  // An agent process serves all its nodes over one connection, so a host needs few; users behind one login
  // node or NAT share an address, hence the room. The Unix socket is not counted here.
  size_t max_connections_per_address = 512;
  // What a WebSocket may have waiting to be sent, and how long one frame's write may take; a peer past either
  // is closed (1008 when it still reads; ws_session.hpp). Bursts stay within them: a batch of 10,000 jobs
  // is 10,000 job frames of about 1 KB.
  size_t ws_queue_bytes = size_t{16} << 20;
  size_t ws_queue_frames = 32768;
  std::chrono::seconds ws_write_timeout{30};
};

class HttpServer {
 public:
  HttpServer();
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void set_handler(Handler handler);
  void set_body_limit(BodyLimitFn limit);
  void set_concurrent(ConcurrentFn concurrent);
  // Upgrade requests (any path) go here; without an acceptor they are answered like plain requests.
  void set_ws_acceptor(WsAcceptor acceptor);
  void set_limits(ServerLimits limits);
  size_t open_connections() const;
  // Serves HTTPS and WSS only, with this PEM certificate chain and key (before listen()). A plain-HTTP
  // request is answered 400 "use https://". The error names the file at fault.
  Status enable_tls(const std::string& cert_file, const std::string& key_file);
  // Binds and listens; returns the bound port (useful with port 0).
  Result<int> listen(const std::string& host, int port);
  // Also accepts on a Unix stream socket at `path` (plain HTTP, also with TLS on; at most 107 bytes), every
  // request carrying the peer's kernel credentials (HttpRequest::peer). The socket has `mode` from the moment
  // it appears at `path`: it is bound in a fresh 0700 directory beside it, given its mode there, and renamed
  // into place, so no other user can connect in between and no chmod by path follows. A stale socket there
  // (none accepting) is replaced; a live one, or another kind of file, is an error. The file is removed when
  // the server is destroyed, unless another socket has replaced it meanwhile.
  Status listen_unix(const std::string& path, unsigned mode = 0666);
  // Runs until stop() or SIGINT/SIGTERM.
  void run();
  void stop();

  void post(std::function<void()> fn);
  void post_after(std::chrono::milliseconds delay, std::function<void()> fn);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace railyard::api
