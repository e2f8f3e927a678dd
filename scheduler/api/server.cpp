// The only translation unit with Boost.Beast in the daemon (see TOOLCHAIN.md on compile cost); its stream
// helpers and WebSocket session are in ws_session.hpp. Over 500 lines on purpose: a second file including
// Beast would compile its templates twice in every build.
#include "scheduler/api/server.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <vector>

#include "common/net/tls.hpp"
#include "scheduler/api/ws_session.hpp"

namespace railyard::api {
namespace {

using namespace detail;  // NOLINT(google-build-using-namespace): this file's own internal header

// Writing an answer, and reading a body once its header is in.
constexpr auto kIdleTimeout = std::chrono::seconds(60);
constexpr auto kDrainTimeout = std::chrono::seconds(10);
// After an accept fails (out of file descriptors: EMFILE), before the next: an immediate retry would spin.
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
constexpr auto kRefusalLogInterval = std::chrono::seconds(10);

}  // namespace

struct HttpServer::Impl {
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  net::signal_set signals{ioc, SIGINT, SIGTERM};
  Handler handler;
  WsAcceptor ws_acceptor;
  BodyLimitFn body_limit = [](std::string_view) { return kDefaultBodyLimit; };
  ConcurrentFn concurrent;
  std::shared_ptr<net::ssl::context> tls;  // set: every TCP connection must be TLS
  local::acceptor unix_acceptor{ioc};
  net::steady_timer unix_accept_retry{ioc};  // its own: a second wait on accept_retry would cancel the first
  std::string unix_path;  // the socket file listen_unix() made; removed by ~Impl when still the same file
  ino_t unix_inode = 0;
  ServerLimits limits;
  std::shared_ptr<size_t> open = std::make_shared<size_t>(0);  // connections (ConnectionTicket)
  std::shared_ptr<AddressCounts> by_address = std::make_shared<AddressCounts>();
  size_t refused_since_log = 0;
  std::chrono::steady_clock::time_point last_refusal_log;

  ~Impl();
  void accept();
  void accept_unix();
  void on_accept(tcp::socket socket);
  void refuse_full(tcp::socket& socket, const std::string& address);
  WsLimits ws_limits() const { return {limits.ws_queue_bytes, limits.ws_queue_frames, limits.ws_write_timeout}; }
};

namespace {

// One connection. Requests are answered in the order they arrived (HTTP/1.1 pipelining). A request runs once
// every earlier one on the connection has been answered, except that requests the server's ConcurrentFn
// accepts (submits) run at once while the earlier ones pending are such requests too: a client that sends
// submits without waiting gets them committed together. At most kMaxPipelined requests are read ahead.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  // `buffer` holds bytes already read from the connection (the TLS detection's).
  Session(Stream&& stream, beast::flat_buffer&& buffer, HttpServer::Impl& server, ConnectionTicket ticket)
      : stream_(std::move(stream)), server_(server), ticket_(std::move(ticket)), buffer_(std::move(buffer)) {
    remote_ = remote_of(tcp().socket());
    peer_ = peer_of(tcp().socket());
  }

  void start() { read_header(); }

 private:
  static constexpr size_t kMaxPipelined = 64;

  // One request from its read to its written answer.
  struct Slot {
    std::optional<HttpResponse> response;
    unsigned version = 11;
    bool keep_alive = true;
    bool concurrent = false;  // dispatched while earlier requests were unanswered
  };

  void read_header() {
    reading_ = true;
    parser_.emplace();
    parser_->header_limit(64 * 1024);
    parser_->body_limit(kMaxBodyLimit);  // the per-route limit is applied once the target is known
    // Waiting for a first request, or the next one after every answer went out: the whole header must be in
    // within the header timeout (an idle keep-alive connection, or one that sends its header a byte at a
    // time, is closed then). While earlier requests are still being answered the timer is left as it is
    // (their handler may take long).
    if (slots_.empty()) tcp().expires_after(server_.limits.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::on_header, this->shared_from_this()));
  }

  void on_header(beast::error_code ec, size_t) {
    if (ec) return on_read_error(ec);
    const size_t limit = server_.body_limit(parser_->get().target());
    if (auto len = parser_->content_length(); len && *len > limit) return too_large(limit);
    parser_->body_limit(limit);
    if (slots_.empty()) tcp().expires_after(kIdleTimeout);  // the body's deadline (same condition as above)
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::on_body, this->shared_from_this()));
  }

  void on_body(beast::error_code ec, size_t) {
    reading_ = false;
    if (ec == http::error::body_limit) return too_large(server_.body_limit(parser_->get().target()));
    if (ec) return on_read_error(ec);
    auto req = parser_->release();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.authorization = std::string(req[http::field::authorization]);
    r.remote = remote_;
    r.peer = peer_;
    const bool upgrade_req = server_.ws_acceptor && websocket::is_upgrade(req);
    const bool concurrent = !upgrade_req && server_.concurrent && server_.concurrent(r);
    if (upgrade_req || !concurrent || !all_pending_concurrent()) {
      // Runs once everything before it is answered and written.
      waiting_ = Waiting{std::move(r), std::move(req), upgrade_req, concurrent};
      return run_waiting();
    }
    dispatch(std::move(r), std::move(req), concurrent);
  }

  bool all_pending_concurrent() const {
    return std::all_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->concurrent; });
  }

  void run_waiting() {
    if (!waiting_ || !slots_.empty() || writing_) return;
    Waiting w = std::move(*waiting_);
    waiting_.reset();
    if (w.upgrade) {
      version_ = w.req.version();
      return upgrade(std::move(w.r), std::move(w.req));
    }
    dispatch(std::move(w.r), std::move(w.req), w.concurrent);
  }

  void dispatch(HttpRequest r, http::request<http::string_body> req, bool concurrent) {
    auto slot = std::make_shared<Slot>();
    slot->version = req.version();
    slot->keep_alive = req.keep_alive();
    slot->concurrent = concurrent;
    slots_.push_back(slot);
    r.body = std::move(req.body());
    // The handler may answer later (group commit). No read is pending here; Beast allows changing the
    // timer while at most one of read and write is.
    tcp().expires_never();
    if (slot->keep_alive && slots_.size() < kMaxPipelined) read_header();  // the next one, meanwhile
    auto self = this->shared_from_this();
    server_.handler(std::move(r), [self, slot](HttpResponse res) {
      slot->response = std::move(res);
      self->write_next();
    });
  }

  // The connection leaves this session for a WsSession (accepted or refused).
  void upgrade(HttpRequest r, http::request<http::string_body> req) {
    auto ws = std::make_shared<WsSession<Stream>>(std::move(stream_), std::move(ticket_), remote_,
                                                  server_.ws_limits());
    auto handlers = server_.ws_acceptor(r, ws);
    if (!handlers) return ws->refuse(error_response(404, "not_found", "no WebSocket at this path"), version_);
    ws->accept(std::move(req), std::move(*handlers));
  }

  void on_read_error(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::ssl::error::stream_truncated)
      return close_after_answers();
    if (ec == net::error::operation_aborted || ec == net::error::connection_reset) return;
    answer_last(error_response(400, "bad_request", "malformed HTTP request: " + ec.message()));
  }

  void too_large(size_t limit) {
    reading_ = false;
    draining_ = true;
    answer_last(error_response(413, "payload_too_large",
                               "request body exceeds " + std::to_string(limit) + " bytes for this route"));
  }

  // An answer of the server's own after which the connection closes (no more reads).
  void answer_last(HttpResponse res) {
    auto slot = std::make_shared<Slot>();
    slot->version = parser_ ? parser_->get().version() : 11;
    slot->keep_alive = false;
    slot->response = std::move(res);
    slots_.push_back(slot);
    write_next();
  }

  // The peer finished sending: answer what is pending, then close.
  void close_after_answers() {
    peer_done_ = true;
    if (slots_.empty() && !writing_) close();
  }

  void write_next() {
    if (writing_ || slots_.empty() || !slots_.front()->response) return;
    writing_ = true;
    Slot& slot = *slots_.front();
    HttpResponse& r = *slot.response;
    res_ = {};
    res_.version(slot.version);
    res_.result(static_cast<http::status>(r.status));
    res_.set(http::field::server, "railyard-scheduler");
    res_.set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res_.set(k, v);
    res_.body() = std::move(r.body);
    res_.keep_alive(slot.keep_alive);
    res_.prepare_payload();
    tcp().expires_after(kIdleTimeout);  // no write is pending here (writing_ was false)
    http::async_write(stream_, res_, beast::bind_front_handler(&Session::on_write, this->shared_from_this()));
  }

  void on_write(beast::error_code ec, size_t) {
    writing_ = false;
    if (ec) return;
    const bool keep_alive = slots_.front()->keep_alive;
    slots_.pop_front();
    if (draining_ && slots_.empty()) return drain();
    if (!keep_alive) return close();
    if (peer_done_ && slots_.empty()) return close();
    if (!slots_.empty()) return write_next();
    run_waiting();
    if (!reading_ && !waiting_ && slots_.empty() && !peer_done_ && !draining_) read_header();
  }

  // After an early answer (413), read and drop what the client still sends, so that closing the socket does
  // not reset the connection before the client has read the answer.
  void drain() {
    beast::error_code ec;
    tcp().socket().shutdown(net::socket_base::shutdown_send, ec);
    tcp().expires_after(kDrainTimeout);
    scratch_.resize(64 * 1024);  // only here: an idle connection holds no such buffer
    stream_.async_read_some(net::buffer(scratch_), [self = this->shared_from_this()](beast::error_code e, size_t) {
      if (e) return self->close();
      self->drain_more();
    });
  }

  void drain_more() {
    stream_.async_read_some(net::buffer(scratch_), [self = this->shared_from_this()](beast::error_code e, size_t) {
      if (e) return self->close();
      self->drain_more();
    });
  }

  void close() {
    beast::error_code ec;
    tcp().socket().shutdown(net::socket_base::shutdown_both, ec);
    tcp().socket().close(ec);
  }

  // The stream under TLS, if any: a beast::tcp_stream, or a unix_stream.
  auto& tcp() { return beast::get_lowest_layer(stream_); }

  struct Waiting {
    HttpRequest r;
    http::request<http::string_body> req;
    bool upgrade = false;
    bool concurrent = false;
  };

  Stream stream_;
  HttpServer::Impl& server_;
  ConnectionTicket ticket_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  std::deque<std::shared_ptr<Slot>> slots_;  // read, not yet written; front = next to write
  std::optional<Waiting> waiting_;           // read, runs once slots_ is empty
  unsigned version_ = 11;
  std::string remote_;  // the peer's address, for HttpRequest::remote
  std::optional<PeerCredentials> peer_;
  bool reading_ = false, writing_ = false;
  bool peer_done_ = false;
  bool draining_ = false;
  std::vector<char> scratch_;  // drain()'s
};

// With TLS on: peeks at the first byte. A TLS ClientHello (record type 22) gets the handshake and then an
// HTTPS session; a plain-HTTP client gets a 400 that says to use https:// (instead of a handshake error it
// cannot read).
class TlsDetector : public std::enable_shared_from_this<TlsDetector> {
 public:
  TlsDetector(tcp::socket socket, HttpServer::Impl& server, ConnectionTicket ticket)
      : stream_(std::move(socket)), server_(server), ticket_(std::move(ticket)) {}

  // The first byte, the handshake and (plain HTTP) the request's header: within the header timeout.
  void run() {
    stream_.expires_after(server_.limits.header_timeout);
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->close();
      unsigned char first = 0;
      const size_t n = self->stream_.socket().receive(net::buffer(&first, 1), tcp::socket::message_peek, ec);
      if (ec || n == 0) return self->close();
      if (first == 22) return self->handshake();
      self->refuse_plain();
    });
  }

 private:
  void handshake() {
    auto tls = std::make_shared<beast::ssl_stream<beast::tcp_stream>>(std::move(stream_), *server_.tls);
    tls->async_handshake(net::ssl::stream_base::server, [self = shared_from_this(), tls](beast::error_code ec) {
      if (ec) {
        beast::error_code ignored;
        beast::get_lowest_layer(*tls).socket().close(ignored);
        return;
      }
      std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(std::move(*tls), beast::flat_buffer(),
                                                                      self->server_, std::move(self->ticket_))
          ->start();
    });
  }

  // Reads the request's header (so closing does not reset the connection under the answer), answers 400.
  void refuse_plain() {
    parser_.header_limit(64 * 1024);
    http::async_read_header(stream_, buffer_, parser_, [self = shared_from_this()](beast::error_code, size_t) {
      auto res = std::make_shared<http::response<http::string_body>>(http::status::bad_request, 11);
      res->set(http::field::server, "railyard-scheduler");
      res->set(http::field::content_type, "application/json");
      res->body() =
          error_response(400, "tls_required", "this scheduler serves HTTPS only; use an https:// URL").body;
      res->keep_alive(false);
      res->prepare_payload();
      http::async_write(self->stream_, *res,
                        [self, res](beast::error_code, size_t) { self->close(); });
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  ConnectionTicket ticket_;
  beast::flat_buffer buffer_;
  http::request_parser<http::empty_body> parser_;
};

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (!ec) {
      on_accept(std::move(socket));
      return accept();
    }
    spdlog::warn("accept: {}", ec.message());
    accept_retry.expires_after(kAcceptRetryDelay);
    accept_retry.async_wait([this](beast::error_code e) {
      if (!e) accept();
    });
  });
}

void HttpServer::Impl::on_accept(tcp::socket socket) {
  const std::string address = remote_of(socket);
  if (*open >= limits.max_connections) return refuse_full(socket, "");
  if (limits.max_connections_per_address > 0) {
    auto it = by_address->find(address);
    if (it != by_address->end() && it->second >= limits.max_connections_per_address)
      return refuse_full(socket, address);
  }
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  ConnectionTicket ticket(open, by_address, address);
  if (tls) return std::make_shared<TlsDetector>(std::move(socket), *this, std::move(ticket))->run();
  std::make_shared<Session<beast::tcp_stream>>(beast::tcp_stream(std::move(socket)), beast::flat_buffer(),
                                               *this, std::move(ticket))
      ->start();
}

// Over a cap (`address` set: the per-address one): a plain-HTTP 503 (TLS: no answer) written without
// waiting, which a new socket's empty send buffer takes whole, then closed. What the client already sent is
// read first (without waiting), so that the close is a FIN, not a reset that could overtake the answer.
void HttpServer::Impl::refuse_full(tcp::socket& socket, const std::string& address) {
  const auto answer = [](const std::string& message) {
    const std::string body = error_response(503, "unavailable", message).body;
    return "HTTP/1.1 503 Service Unavailable\r\nServer: railyard-scheduler\r\nContent-Type: "
           "application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  static const std::string kFull = answer("too many connections; try again shortly");
  const std::string text =
      address.empty() ? kFull
                      : answer("too many connections from " + address + " (at most " +
                               std::to_string(limits.max_connections_per_address) +
                               " per address: --max-connections-per-address); close some and try again");
  beast::error_code ec;
  socket.non_blocking(true, ec);
  std::array<char, 4096> discard{};
  socket.read_some(net::buffer(discard), ec);
  if (!tls) socket.write_some(net::buffer(text), ec);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
  ++refused_since_log;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_refusal_log >= kRefusalLogInterval) {
    if (address.empty())
      spdlog::warn("{} connections open (--max-connections): refused {} new one(s) with 503", *open,
                   refused_since_log);
    else
      spdlog::warn("{} has {} connections open (--max-connections-per-address): refused {} new one(s) with 503",
                   address, (*by_address)[address], refused_since_log);
    refused_since_log = 0;
    last_refusal_log = now;
  }
}

// The Unix socket speaks plain HTTP whatever enable_tls() says: it never leaves the host, and the kernel
// names its peers. Its connections count towards --max-connections; one over the cap is closed.
void HttpServer::Impl::accept_unix() {
  unix_acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, local::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (!ec && *open < limits.max_connections)
      std::make_shared<Session<unix_stream>>(unix_stream(std::move(socket)), beast::flat_buffer(), *this,
                                             ConnectionTicket(open))
          ->start();
    if (!ec) return accept_unix();
    spdlog::warn("accept on the unix socket: {}", ec.message());
    unix_accept_retry.expires_after(kAcceptRetryDelay);
    unix_accept_retry.async_wait([this](beast::error_code e) {
      if (!e) accept_unix();
    });
  });
}

HttpServer::Impl::~Impl() {
  if (unix_path.empty()) return;
  beast::error_code ec;
  unix_acceptor.close(ec);
  struct stat st {};
  if (::lstat(unix_path.c_str(), &st) == 0 && st.st_ino == unix_inode) ::unlink(unix_path.c_str());
}

HttpServer::HttpServer() : impl_(std::make_unique<Impl>()) {}
HttpServer::~HttpServer() = default;

void HttpServer::set_handler(Handler handler) { impl_->handler = std::move(handler); }
void HttpServer::set_body_limit(BodyLimitFn limit) { impl_->body_limit = std::move(limit); }
void HttpServer::set_concurrent(ConcurrentFn concurrent) { impl_->concurrent = std::move(concurrent); }
void HttpServer::set_ws_acceptor(WsAcceptor acceptor) { impl_->ws_acceptor = std::move(acceptor); }
void HttpServer::set_limits(ServerLimits limits) { impl_->limits = limits; }
size_t HttpServer::open_connections() const { return *impl_->open; }

Status HttpServer::enable_tls(const std::string& cert_file, const std::string& key_file) {
  auto ctx = railyard::net::make_server_tls_context(cert_file, key_file);
  if (!ctx) return ctx.error();
  impl_->tls = std::move(*ctx);
  return ok();
}

Result<int> HttpServer::listen(const std::string& host, int port) {
  beast::error_code ec;
  auto addr = net::ip::make_address(host, ec);
  if (ec) return invalid("--listen: bad address '" + host + "': " + ec.message());
  tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return Error{ErrorCode::kUnavailable,
                 "listen on " + host + ":" + std::to_string(port) + ": " + ec.message()};
  impl_->accept();
  return static_cast<int>(a.local_endpoint().port());
}

namespace {

// Makes room for a new socket at `path`: nothing there, or a socket no process accepts on (left by a
// scheduler that did not exit cleanly), which is removed. A live socket or any other file is an error.
Status clear_stale_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return ok();
  if (!S_ISSOCK(st.st_mode))
    return invalid("--unix-socket " + path + ": exists and is not a socket (not replaced)");
  net::io_context io;
  local::socket probe(io);
  beast::error_code ec;
  probe.connect(local::endpoint(path), ec);
  if (!ec) return Error{ErrorCode::kUnavailable, "--unix-socket " + path + ": another process serves it"};
  if (::unlink(path.c_str()) != 0)
    return Error{ErrorCode::kUnavailable, "--unix-socket " + path + ": cannot remove the stale socket"};
  return ok();
}

}  // namespace

namespace {

// Moves the bound socket `staged` to `path` without replacing anything that appeared there meanwhile.
int move_into_place(const std::string& staged, const std::string& path) {
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL) return errno;  // EINVAL: a file system without RENAME_NOREPLACE
  return ::rename(staged.c_str(), path.c_str()) == 0 ? 0 : errno;
}

}  // namespace

Status HttpServer::listen_unix(const std::string& path, unsigned mode) {
  const std::string parent = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  // The staging directory's socket (parent + "/.ryXXXXXX/s") must fit in sun_path as well as `path`.
  const size_t most = sizeof(sockaddr_un::sun_path) - 1;
  if (path.empty() || path.back() == '/' || path.size() > most || parent.size() + 12 > most)
    return invalid("--unix-socket " + path + ": must be a path of 1.." + std::to_string(most) +
                   " bytes whose directory's path has at most " + std::to_string(most - 12));
  if (auto s = clear_stale_socket(path); !s) return s;
  std::string dir = (parent.empty() ? std::string("/") : parent) + "/.ryXXXXXX";
  if (::mkdtemp(dir.data()) == nullptr)  // 0700: no other user can reach the socket before it has its mode
    return Error{ErrorCode::kUnavailable, "--unix-socket " + path + ": cannot make a directory beside it (" +
                                              std::string(std::strerror(errno)) + ")"};
  const std::string staged = dir + "/s";
  auto& a = impl_->unix_acceptor;
  beast::error_code ec;
  a.open(local(), ec);
  if (!ec) a.bind(local::endpoint(staged), ec);
  if (!ec && ::chmod(staged.c_str(), mode) != 0) ec = beast::error_code(errno, beast::system_category());
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (!ec)
    if (const int err = move_into_place(staged, path); err != 0) ec = beast::error_code(err, beast::system_category());
  ::unlink(staged.c_str());  // still there only when a step failed
  ::rmdir(dir.c_str());
  if (ec) {
    const std::string why = ec.message();
    a.close(ec);
    return Error{ErrorCode::kUnavailable, "listen on unix socket " + path + ": " + why};
  }
  struct stat st {};
  ::lstat(path.c_str(), &st);
  impl_->unix_path = path;
  impl_->unix_inode = st.st_ino;
  impl_->accept_unix();
  return ok();
}

void HttpServer::run() {
  impl_->signals.async_wait([this](beast::error_code ec, int) {
    if (!ec) stop();
  });
  impl_->ioc.run();
}

void HttpServer::stop() { impl_->ioc.stop(); }

void HttpServer::post(std::function<void()> fn) { net::post(impl_->ioc, std::move(fn)); }

void HttpServer::post_after(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto timer = std::make_shared<net::steady_timer>(impl_->ioc, delay);
  timer->async_wait([timer, fn = std::move(fn)](beast::error_code ec) {
    if (!ec) fn();
  });
}

}  // namespace railyard::api
