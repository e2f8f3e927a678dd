// Internal to scheduler/api/server.cpp, the one translation unit that includes it (Beast; see TOOLCHAIN.md on
// compile cost): the stream types, the peer of a connection, the WebSocket session and the count of open
// connections that --max-connections caps.
#pragma once

#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <spdlog/spdlog.h>
#include <deque>
#include <memory>
#include <unordered_map>
#include <optional>
#include <string>

#include "scheduler/api/http.hpp"

namespace railyard::api::detail {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using local = net::local::stream_protocol;
// A connection on the Unix socket (HttpServer::listen_unix), with the timeouts of beast::tcp_stream.
using unix_stream = beast::basic_stream<local>;

// The kernel's credentials of a Unix-socket peer; TCP peers have none.
inline std::optional<PeerCredentials> peer_of(tcp::socket&) { return std::nullopt; }
inline std::optional<PeerCredentials> peer_of(local::socket& socket) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return std::nullopt;
  return PeerCredentials{static_cast<uint32_t>(cred.uid), static_cast<uint32_t>(cred.gid),
                         static_cast<int32_t>(cred.pid)};
}

// The peer as HttpRequest::remote and the audit log name it: "127.0.0.1", "unix:uid=1000".
inline std::string remote_of(tcp::socket& socket) {
  beast::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  return ec ? std::string() : ep.address().to_string();
}
inline std::string remote_of(local::socket& socket) {
  const auto peer = peer_of(socket);
  return peer ? "unix:uid=" + std::to_string(peer->uid) : "unix";
}

constexpr auto kWsHandshakeTimeout = std::chrono::seconds(30);
// A WebSocket with no frame for this long is pinged at half of it and closed at the end; agents send a
// heartbeat every few seconds, so only a dead peer reaches it.
constexpr auto kWsIdleTimeout = std::chrono::seconds(60);

// Open TCP connections by peer address (--max-connections-per-address); an address leaves the map with its
// last connection, so the map holds only addresses connected now.
using AddressCounts = std::unordered_map<std::string, size_t>;

// One open connection, counted while it lives: held by whatever owns the socket (the TLS detection, an HTTP
// session, then its WebSocket), so the count is of sockets whatever stage they are at; a TCP connection is
// also counted under its peer's address. Moves, never copies. Everything runs on the server's one thread:
// the counts need no atomics.
class ConnectionTicket {
 public:
  explicit ConnectionTicket(std::shared_ptr<size_t> open, std::shared_ptr<AddressCounts> by_address = nullptr,
                            std::string address = {})
      : open_(std::move(open)), by_address_(std::move(by_address)), address_(std::move(address)) {
    ++*open_;
    if (by_address_) ++(*by_address_)[address_];
  }
  ConnectionTicket(ConnectionTicket&&) = default;
  ConnectionTicket& operator=(ConnectionTicket&&) = delete;
  ConnectionTicket(const ConnectionTicket&) = delete;
  ConnectionTicket& operator=(const ConnectionTicket&) = delete;
  ~ConnectionTicket() {
    if (open_) --*open_;
    if (!by_address_) return;
    auto it = by_address_->find(address_);
    if (it != by_address_->end() && --it->second == 0) by_address_->erase(it);
  }

 private:
  std::shared_ptr<size_t> open_;  // shared with the server, which may go first at shutdown
  std::shared_ptr<AddressCounts> by_address_;
  std::string address_;
};

// What one WebSocket may hold of the server (ServerLimits): frames and bytes queued for sending, and how
// long one write (a frame, or the close frame) may take.
struct WsLimits {
  size_t queue_bytes = 0;
  size_t queue_frames = 0;
  std::chrono::seconds write_timeout{0};
};

// One WebSocket connection: a read loop handing every message to on_message, and a write queue (one
// async_write at a time, frames in order). Timeouts: handshake, idle with pings. A message over
// kWsFrameLimit (read_message_max) fails the read: Beast sends a close frame with code 1009 (too big) and the
// connection ends.
//
// The write queue is bounded (WsLimits): a peer that does not read would otherwise make the server keep every
// frame meant for it. A send() that would pass the bound drops what waits and closes with code 1008 (policy
// violation); the close frame goes out after the frame being written, once the peer reads. Every write, the
// close frame's too, has a deadline: a peer that takes none of it within write_timeout is disconnected
// without a close frame.
template <class Stream>
class WsSession : public WsPeer, public std::enable_shared_from_this<WsSession<Stream>> {
 public:
  WsSession(Stream&& stream, ConnectionTicket ticket, std::string remote, WsLimits limits)
      : ws_(std::move(stream)),
        ticket_(std::move(ticket)),
        remote_(std::move(remote)),
        limits_(limits),
        write_deadline_(ws_.get_executor()) {}

  void accept(http::request<http::string_body> req, WsHandlers handlers) {
    req_ = std::move(req);
    handlers_ = std::move(handlers);
    beast::get_lowest_layer(ws_).expires_never();
    ws_.set_option(websocket::stream_base::timeout{kWsHandshakeTimeout, kWsIdleTimeout, true});
    ws_.read_message_max(kWsFrameLimit);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, "railyard-scheduler"); }));
    ws_.async_accept(req_, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec) return self->finish();
      self->open_ = true;
      self->read();
      self->flush();
    });
  }

  // Refuses the upgrade with a plain HTTP answer.
  void refuse(HttpResponse r, unsigned version) {
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(version);
    res->result(static_cast<http::status>(r.status));
    res->set(http::field::content_type, r.content_type);
    res->body() = std::move(r.body);
    res->keep_alive(false);
    res->prepare_payload();
    beast::get_lowest_layer(ws_).expires_after(kWsHandshakeTimeout);
    http::async_write(ws_.next_layer(), *res,
                      [self = this->shared_from_this(), res](beast::error_code, size_t) {
                        beast::error_code ec;
                        beast::get_lowest_layer(self->ws_).socket().shutdown(net::socket_base::shutdown_both, ec);
                        beast::get_lowest_layer(self->ws_).socket().close(ec);
                      });
  }

  void send(std::string text) override {
    if (finished_ || closing_) return;
    if (queue_.size() >= limits_.queue_frames || queued_bytes_ + text.size() > limits_.queue_bytes)
      return overflow();
    queued_bytes_ += text.size();
    queue_.push_back(std::move(text));
    flush();
  }

  void close() override {
    if (finished_ || closing_) return;
    closing_ = true;
    if (!open_) return finish();
    flush();
  }

  std::string remote_address() const override { return remote_; }

 private:
  void read() {
    ws_.async_read(buffer_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->finish();
      std::string msg = beast::buffers_to_string(self->buffer_.data());
      self->buffer_.consume(self->buffer_.size());
      if (self->handlers_.on_message) self->handlers_.on_message(msg);
      if (!self->finished_) self->read();
    });
  }

  // The queue passed its bound: what waits is dropped (the frame being written stays: Beast writes from it),
  // and the close frame 1008 follows it.
  void overflow() {
    spdlog::warn("WebSocket {}: closed with 1008: more than {} frames or {} bytes waited to be sent (a client "
                 "that does not read)",
                 remote_, limits_.queue_frames, limits_.queue_bytes);
    closing_ = true;
    close_code_ = websocket::close_code::policy_error;
    queue_.erase(queue_.begin() + (writing_ && !queue_.empty() ? 1 : 0), queue_.end());
    queued_bytes_ = queue_.empty() ? 0 : queue_.front().size();
    if (!open_) return finish();
    flush();
  }

  // A write (or the close) that the peer takes none of within write_timeout ends the connection.
  void arm_write_deadline() {
    write_deadline_.expires_after(limits_.write_timeout);
    write_deadline_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec || self->finished_) return;  // cancelled: the write completed
      spdlog::warn("WebSocket {}: disconnected: a write made no progress for {} s", self->remote_,
                   self->limits_.write_timeout.count());
      self->finish();
    });
  }

  void flush() {
    if (!open_ || writing_ || finished_) return;
    if (queue_.empty()) {
      if (closing_) {
        writing_ = true;
        arm_write_deadline();
        ws_.async_close(close_code_, [self = this->shared_from_this()](beast::error_code) { self->finish(); });
      }
      return;
    }
    writing_ = true;
    arm_write_deadline();
    ws_.text(true);
    ws_.async_write(net::buffer(queue_.front()),
                    [self = this->shared_from_this()](beast::error_code ec, size_t) {
                      self->writing_ = false;
                      self->write_deadline_.cancel();
                      if (ec || self->finished_) return self->finish();  // finished: the queue is gone
                      self->queued_bytes_ -= self->queue_.front().size();
                      self->queue_.pop_front();
                      self->flush();
                    });
  }

  // Once: tells the owner, drops the handlers (they may hold this peer), closes the socket.
  void finish() {
    if (finished_) return;
    finished_ = true;
    write_deadline_.cancel();
    queue_.clear();
    queued_bytes_ = 0;
    auto on_close = std::move(handlers_.on_close);
    handlers_ = {};
    if (on_close) on_close();
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().close(ec);
  }

  websocket::stream<Stream> ws_;
  ConnectionTicket ticket_;
  http::request<http::string_body> req_;
  WsHandlers handlers_;
  beast::flat_buffer buffer_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;  // of queue_'s frames
  std::string remote_;
  WsLimits limits_;
  net::steady_timer write_deadline_;
  websocket::close_code close_code_ = websocket::close_code::normal;
  bool open_ = false, writing_ = false, closing_ = false, finished_ = false;
};

}  // namespace railyard::api::detail
