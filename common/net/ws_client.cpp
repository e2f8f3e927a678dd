#include "common/net/ws_client.hpp"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <deque>

#include "common/net/tls.hpp"

namespace railyard::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

Result<WsUrl> parse_ws_url(const std::string& url) {
  std::string rest;
  WsUrl out;
  for (const auto& [scheme, tls] : {std::pair{"ws://", false}, {"http://", false}, {"wss://", true}, {"https://", true}})
    if (url.rfind(scheme, 0) == 0) {
      rest = url.substr(std::string(scheme).size());
      out.tls = tls;
    }
  if (rest.empty()) return invalid("unsupported URL '" + url + "' (ws://, wss://, http:// or https://)");
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  out.target = slash == std::string::npos ? "/" : rest.substr(slash);
  const size_t colon = authority.rfind(':');
  out.host = authority.substr(0, colon);
  out.port = colon == std::string::npos ? (out.tls ? "443" : "80") : authority.substr(colon + 1);
  if (out.host.empty() || out.port.empty()) return invalid("no host or port in URL '" + url + "'");
  return out;
}

// One connection attempt and its life. Async operations hold a shared_ptr to it; `owner` is cleared when
// the WsClient drops it (destroyed, or a new connect()), after which no handler runs. The stream type
// (plain or TLS) is the template's; the client sees this base.
struct WsClient::Conn : std::enable_shared_from_this<WsClient::Conn> {
  explicit Conn(WsClient* o) : owner(o) {}
  virtual ~Conn() = default;
  virtual void start(const WsUrl& u) = 0;
  virtual void write_next() = 0;
  virtual void fail(const std::string& reason) = 0;
  virtual void shutdown() = 0;

  // The owner's handlers (a nested class may reach them; the connection types below go through these).
  void notify_open() {
    if (owner && owner->on_open_) owner->on_open_();
  }
  void notify_message(std::string text) {
    if (owner && owner->on_message_) owner->on_message_(std::move(text));
  }
  // Detaches from the owner, then tells it: its handler may start a new connection.
  void notify_close(const std::string& reason) {
    WsClient* o = owner;
    owner = nullptr;
    if (o && o->on_close_) o->on_close_(reason);
  }

  WsClient* owner;
  std::deque<std::string> queue;
  bool open = false;
  bool closed = false;
  bool writing = false;
};

namespace {

template <class NextLayer>
struct ConnT final : WsClient::Conn {
  template <class... Args>
  ConnT(asio::io_context& io, WsClient* o, const WsClientOptions& opts, Args&&... args)
      : Conn(o), options(opts), resolver(io), ws(std::forward<Args>(args)...) {}

  static constexpr bool kTls = !std::is_same_v<NextLayer, beast::tcp_stream>;
  WsClientOptions options;
  tcp::resolver resolver;
  websocket::stream<NextLayer> ws;
  WsUrl url;
  beast::flat_buffer buffer;

  std::shared_ptr<ConnT> self() { return std::static_pointer_cast<ConnT>(shared_from_this()); }
  tcp::socket& socket() { return beast::get_lowest_layer(ws).socket(); }

  void start(const WsUrl& u) override {
    url = u;
    beast::get_lowest_layer(ws).expires_after(options.connect_timeout);
    resolver.async_resolve(url.host, url.port, [self = self()](beast::error_code ec, auto results) {
      if (ec) return self->fail("resolve " + self->url.host + ": " + ec.message());
      beast::get_lowest_layer(self->ws).async_connect(
          results, [self](beast::error_code ec2, const tcp::endpoint&) { self->connected(ec2); });
    });
  }

  void connected(beast::error_code ec) {
    if (ec) return fail("connect " + url.host + ":" + url.port + ": " + ec.message());
    if (!owner) return shutdown();
    if constexpr (kTls) {
      auto& tls = ws.next_layer();
      if (!SSL_set_tlsext_host_name(tls.native_handle(), url.host.c_str())) return fail("TLS: bad host name");
      tls.set_verify_callback(ssl::host_name_verification(url.host));
      tls.async_handshake(ssl::stream_base::client, [self = self()](beast::error_code e) {
        if (e) {
          const long verify = SSL_get_verify_result(self->ws.next_layer().native_handle());
          return self->fail(verify != X509_V_OK ? std::string("TLS: certificate verify failed (") +
                                                      X509_verify_cert_error_string(verify) + ")"
                                                : "TLS handshake: " + tls_error_text(e));
        }
        self->ws_handshake();
      });
    } else {
      ws_handshake();
    }
  }

  void ws_handshake() {
    if (!owner) return shutdown();
    ws.read_message_max(options.max_message_bytes);
    ws.set_option(websocket::stream_base::decorator([ua = options.user_agent](websocket::request_type& r) {
      r.set(beast::http::field::user_agent, ua);
    }));
    ws.async_handshake(url.host + ":" + url.port, url.target, [self = self()](beast::error_code e) {
      if (e) return self->fail("handshake: " + e.message());
      beast::get_lowest_layer(self->ws).expires_never();
      self->ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
      self->ws.text(true);
      self->open = true;
      self->notify_open();
      self->read();
      self->write_next();
    });
  }

  void read() {
    ws.async_read(buffer, [self = self()](beast::error_code ec, size_t) {
      if (ec) return self->fail(ec == websocket::error::closed ? "closed by peer" : "read: " + ec.message());
      std::string text = beast::buffers_to_string(self->buffer.data());
      self->buffer.consume(self->buffer.size());
      self->notify_message(std::move(text));
      if (!self->closed) self->read();
    });
  }

  void write_next() override {
    if (writing || queue.empty() || !open || closed) return;
    writing = true;
    ws.async_write(asio::buffer(queue.front()), [self = self()](beast::error_code ec, size_t) {
      self->writing = false;
      if (ec) return self->fail("write: " + ec.message());
      self->queue.pop_front();
      self->write_next();
    });
  }

  void fail(const std::string& reason) override {
    if (closed) return;
    closed = true;
    open = false;
    queue.clear();
    beast::error_code ignored;
    socket().close(ignored);
    notify_close(reason);
  }

  void shutdown() override {
    owner = nullptr;
    if (closed) return;
    closed = true;
    open = false;
    resolver.cancel();
    beast::error_code ignored;
    socket().close(ignored);
  }
};

using PlainConn = ConnT<beast::tcp_stream>;
using TlsConn = ConnT<beast::ssl_stream<beast::tcp_stream>>;

}  // namespace

WsClient::WsClient(asio::io_context& io, WsClientOptions options) : io_(io), options_(std::move(options)) {}

WsClient::~WsClient() {
  if (conn_) conn_->shutdown();
}

void WsClient::connect(const std::string& url) {
  if (conn_) conn_->shutdown();
  conn_.reset();
  auto parsed = parse_ws_url(url);
  std::string failure;
  if (!parsed) {
    failure = parsed.error().message;
  } else if (parsed->tls) {
    if (!tls_ctx_) {
      auto ctx = make_client_tls_context(options_.ca_file);
      if (ctx) tls_ctx_ = std::move(*ctx);
      else failure = ctx.error().message;
    }
    if (tls_ctx_) conn_ = std::make_shared<TlsConn>(io_, this, options_, io_, *tls_ctx_);
  } else {
    conn_ = std::make_shared<PlainConn>(io_, this, options_, io_);
  }
  if (!conn_) {
    // Reported like any failed attempt: on_close, from the loop.
    conn_ = std::make_shared<PlainConn>(io_, this, options_, io_);
    auto c = conn_;
    asio::post(io_, [c, failure] { c->fail(failure); });
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
