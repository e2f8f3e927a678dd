// WsClient: an asynchronous WebSocket client (ws:// only) on a caller-provided io_context.
//
//   connect(url) --resolve--> TCP connect --> WebSocket handshake --> on_open
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
}

namespace railyard::net {

struct WsUrl {
  std::string host;
  std::string port;    // "80" when absent
  std::string target;  // "/..." ("/" when absent)
};

// "ws://host:port/path" (or http://, which names the same server) -> parts. wss:// is refused.
Result<WsUrl> parse_ws_url(const std::string& url);

struct WsClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  size_t max_message_bytes = 1 << 20;
  std::string user_agent = "railyard";
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

 private:
  struct Conn;
  boost::asio::io_context& io_;
  WsClientOptions options_;
  std::shared_ptr<Conn> conn_;
  OpenHandler on_open_;
  MessageHandler on_message_;
  CloseHandler on_close_;
};

}  // namespace railyard::net
