#include "common/net/ws_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>

namespace railyard::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

Result<WsUrl> parse_ws_url(const std::string& url) {
  std::string rest;
  for (const char* scheme : {"ws://", "http://"})
    if (url.rfind(scheme, 0) == 0) rest = url.substr(std::string(scheme).size());
  if (rest.empty()) return invalid("unsupported URL '" + url + "' (ws:// or http://)");
  WsUrl out;
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  out.target = slash == std::string::npos ? "/" : rest.substr(slash);
  const size_t colon = authority.rfind(':');
  out.host = authority.substr(0, colon);
  out.port = colon == std::string::npos ? "80" : authority.substr(colon + 1);
  if (out.host.empty() || out.port.empty()) return invalid("no host or port in URL '" + url + "'");
  return out;
}

// One connection attempt and its life. Async operations hold a shared_ptr to it; `owner` is cleared when
// the WsClient drops it (destroyed, or a new connect()), after which no handler runs.
struct WsClient::Conn : std::enable_shared_from_this<WsClient::Conn> {
  Conn(asio::io_context& io, WsClient* o) : resolver(io), ws(io), owner(o) {}

  tcp::resolver resolver;
  websocket::stream<beast::tcp_stream> ws;
  WsClient* owner;
  WsUrl url;
  beast::flat_buffer buffer;
  std::deque<std::string> queue;
  bool open = false;
  bool closed = false;
  bool writing = false;

  void start(const WsUrl& u) {
    url = u;
    beast::get_lowest_layer(ws).expires_after(owner->options_.connect_timeout);
    resolver.async_resolve(
        url.host, url.port, [self = shared_from_this()](beast::error_code ec, auto results) {
          if (ec) return self->fail("resolve " + self->url.host + ": " + ec.message());
          beast::get_lowest_layer(self->ws).async_connect(
              results, [self](beast::error_code ec2, const tcp::endpoint&) { self->connected(ec2); });
        });
  }

  void connected(beast::error_code ec) {
    if (ec) return fail("connect " + url.host + ":" + url.port + ": " + ec.message());
    if (!owner) return shutdown();
    ws.read_message_max(owner->options_.max_message_bytes);
    ws.set_option(
        websocket::stream_base::decorator([ua = owner->options_.user_agent](websocket::request_type& r) {
          r.set(beast::http::field::user_agent, ua);
        }));
    ws.async_handshake(
        url.host + ":" + url.port, url.target, [self = shared_from_this()](beast::error_code e) {
          if (e) return self->fail("handshake: " + e.message());
          beast::get_lowest_layer(self->ws).expires_never();
          self->ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
          self->ws.text(true);
          self->open = true;
          if (self->owner && self->owner->on_open_) self->owner->on_open_();
          self->read();
          self->write_next();
        });
  }

  void read() {
    ws.async_read(buffer, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->fail(ec == websocket::error::closed ? "closed by peer" : "read: " + ec.message());
      std::string text = beast::buffers_to_string(self->buffer.data());
      self->buffer.consume(self->buffer.size());
      if (self->owner && self->owner->on_message_) self->owner->on_message_(std::move(text));
      if (!self->closed) self->read();
    });
  }

  void write_next() {
    if (writing || queue.empty() || !open || closed) return;
    writing = true;
    ws.async_write(asio::buffer(queue.front()), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing = false;
      if (ec) return self->fail("write: " + ec.message());
      self->queue.pop_front();
      self->write_next();
    });
  }

  void fail(const std::string& reason) {
    if (closed) return;
    closed = true;
    open = false;
    queue.clear();
    beast::error_code ignored;
    beast::get_lowest_layer(ws).socket().close(ignored);
    WsClient* o = owner;
    owner = nullptr;
    if (o && o->on_close_) o->on_close_(reason);
  }

  void shutdown() {
    owner = nullptr;
    if (closed) return;
    closed = true;
    open = false;
    resolver.cancel();
    beast::error_code ignored;
    beast::get_lowest_layer(ws).socket().close(ignored);
  }
};

WsClient::WsClient(asio::io_context& io, WsClientOptions options) : io_(io), options_(std::move(options)) {}

WsClient::~WsClient() {
  if (conn_) conn_->shutdown();
}

void WsClient::connect(const std::string& url) {
  if (conn_) conn_->shutdown();
  conn_ = std::make_shared<Conn>(io_, this);
  auto parsed = parse_ws_url(url);
  if (!parsed) {
    auto c = conn_;
    asio::post(io_, [c, reason = parsed.error().message] { c->fail(reason); });
    return;
  }
  conn_->start(*parsed);
}

bool WsClient::send(std::string text) {
  if (!conn_ || !conn_->open || conn_->closed) return false;
  conn_->queue.push_back(std::move(text));
  conn_->write_next();
  return true;
}

void WsClient::close() {
  if (!conn_ || conn_->closed) return;
  // No close frame: Beast forbids a close while a write is in flight, and the scheduler treats a dropped
  // socket like a close.
  conn_->fail("closed");
}

bool WsClient::is_open() const { return conn_ && conn_->open && !conn_->closed; }

size_t WsClient::queued() const { return conn_ ? conn_->queue.size() : 0; }

}  // namespace railyard::net
