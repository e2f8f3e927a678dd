// WsClient: an asynchronous WebSocket client (ws:// and wss://) on a caller-provided io_context.
//
//   connect(url) --resolve--> TCP connect [--> TLS handshake] --> WebSocket handshake --> on_open
//                      (each step under connect_timeout)                |
//   send(text) --> write queue (one write in flight) --------------> frames out
//   frames in  --> on_message(text)
//   any error, remote close or close() --> on_close(reason), once per connection
//
// Thread safety: none. Call every member from the io_context's thread (the handlers run there too).
// Beast stays in ws_client.cpp (pimpl), so including this header costs nothing. Destroying the client
// closes the connection without calling the handlers again.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/result.hpp"

namespace boost::asio {
class io_context;
namespace ssl {
class context;
}
}  // namespace boost::asio

namespace railyard::net {

struct WsUrl {
  bool tls = false;    // wss:// or https://
  std::string host;
  std::string port;    // "80" when absent ("443" with TLS)
  std::string target;  // "/..." ("/" when absent)
};

// "ws://host:port/path" or "wss://..." (or http:// / https://, which name the same server) -> parts.
Result<WsUrl> parse_ws_url(const std::string& url);

struct WsClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  size_t max_message_bytes = 1 << 20;
  std::string user_agent = "railyard";
  // wss://: the PEM CA bundle that verifies the server ("" = the system's trust store); the server's name
  // must match the URL's host.
  std::string ca_file;
};

class WsClient {
 public:
  using OpenHandler = std::function<void()>;
  using MessageHandler = std::function<void(std::string text)>;
  using CloseHandler = std::function<void(const std::string& reason)>;

  explicit WsClient(boost::asio::io_context& io, WsClientOptions options = {});
  ~WsClient();
  WsClient(const WsClient&) = delete;
  WsClient& operator=(const WsClient&) = delete;

  void on_open(OpenHandler h) { on_open_ = std::move(h); }
  void on_message(MessageHandler h) { on_message_ = std::move(h); }
  void on_close(CloseHandler h) { on_close_ = std::move(h); }

  // Starts a connection (dropping any current one silently); ends in on_open or on_close.
  void connect(const std::string& url);
  // Queues one text frame; dropped (false) when not open.
  bool send(std::string text);
  // Closes the socket; on_close("closed") follows at once.
  void close();
  bool is_open() const;
  size_t queued() const;  // frames waiting to be written

 public:
  struct Conn;  // public only for the connection types in ws_client.cpp

 private:
  boost::asio::io_context& io_;
  WsClientOptions options_;
  std::shared_ptr<boost::asio::ssl::context> tls_ctx_;  // made on the first wss:// connect
  std::shared_ptr<Conn> conn_;
  OpenHandler on_open_;
  MessageHandler on_message_;
  CloseHandler on_close_;
};

}  // namespace railyard::net
