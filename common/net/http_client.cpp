// The only Beast translation unit of the `railyard` command and of railyard-agent-exec.
#include "common/net/http_client.hpp"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <optional>

#include "common/net/tls.hpp"

namespace railyard::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;

Result<HttpUrl> parse_http_url(const std::string& url, const std::string& what) {
  std::string rest = url;
  HttpUrl out;
  if (rest.rfind("unix:", 0) == 0) {
    out.unix_path = rest.substr(5);
    out.host = "localhost";
    if (out.unix_path.empty() || out.unix_path.front() != '/')
      return invalid(what + " " + url + ": expected unix:/ABSOLUTE/PATH");
    return out;
  }
  if (rest.rfind("https://", 0) == 0) {
    out.tls = true;
    out.port = "443";
    rest = rest.substr(8);
  } else if (rest.rfind("http://", 0) == 0) {
    rest = rest.substr(7);
  }
  if (rest.find("://") != std::string::npos) return invalid(what + " " + url + ": expected http(s)://HOST:PORT");
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    out.base_path = rest.substr(slash);
    rest.resize(slash);
    while (!out.base_path.empty() && out.base_path.back() == '/') out.base_path.pop_back();
  }
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']', colon) == std::string::npos) {
    out.port = rest.substr(colon + 1);
    rest.resize(colon);
    if (out.port.empty() || out.port.find_first_not_of("0123456789") != std::string::npos)
      return invalid(what + " " + url + ": bad port");
  }
  if (rest.size() > 2 && rest.front() == '[' && rest.back() == ']') rest = rest.substr(1, rest.size() - 2);
  if (rest.empty()) return invalid(what + " " + url + ": no host");
  out.host = rest;
  return out;
}

struct HttpClient::Impl {
  HttpUrl url;
  std::chrono::milliseconds timeout;
  ClientTls tls;
  asio::io_context io;
  std::shared_ptr<ssl::context> tls_ctx;  // made on the first https connection
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  std::optional<beast::basic_stream<local>> unix_socket;
  beast::flat_buffer buffer;
  std::string failure;  // a reason richer than the error code (TLS verification)

  bool connected() const { return plain.has_value() || secure.has_value() || unix_socket.has_value(); }
  beast::tcp_stream& tcp() { return secure ? beast::get_lowest_layer(*secure) : *plain; }

  // Runs the operation just started to its end. The operations are asynchronous because only those honour
  // the stream's expiry (expires_after): Beast's synchronous ones would wait on a silent server forever.
  void run() {
    io.restart();
    io.run();
  }

  void close() {
    beast::error_code ignored;
    if (unix_socket) unix_socket->socket().shutdown(local::socket::shutdown_both, ignored);
    if (plain || secure) tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    plain.reset();
    secure.reset();
    unix_socket.reset();
    buffer.clear();
  }

  beast::error_code connect_unix() {
    beast::error_code ec;
    unix_socket.emplace(io);
    unix_socket->expires_after(timeout);
    unix_socket->async_connect(local::endpoint(url.unix_path), [&ec](beast::error_code e) { ec = e; });
    run();
    if (ec) unix_socket.reset();
    return ec;
  }

  beast::error_code connect() {
    if (!url.unix_path.empty()) return connect_unix();
    beast::error_code ec;
    tcp::resolver resolver(io);
    auto endpoints = resolver.resolve(url.host, url.port, ec);
    if (ec) return ec;
    if (url.tls) {
      secure.emplace(io, *tls_ctx);
    } else {
      plain.emplace(io);
    }
    tcp().expires_after(timeout);
    tcp().async_connect(endpoints, [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
    run();
    if (!ec) tcp().socket().set_option(tcp::no_delay(true), ec);
    if (!ec && secure) ec = handshake();
    if (ec) {
      plain.reset();
      secure.reset();
    }
    return ec;
  }

  beast::error_code handshake() {
    beast::error_code ec;
    // SNI and the name the certificate must carry (an IP address is matched against IP SANs).
    if (!SSL_set_tlsext_host_name(secure->native_handle(), url.host.c_str())) {
      return {static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category()};
    }
    secure->set_verify_callback(ssl::host_name_verification(url.host));
    tcp().expires_after(timeout);
    secure->async_handshake(ssl::stream_base::client, [&ec](beast::error_code e) { ec = e; });
    run();
    if (ec && ec != beast::error::timeout) {
      const long verify = SSL_get_verify_result(secure->native_handle());
      failure = verify != X509_V_OK ? std::string("TLS: certificate verify failed (") +
                                          X509_verify_cert_error_string(verify) + ")"
                                    : tls_error_text(ec);
    }
    return ec;
  }

  template <class Stream>
  beast::error_code exchange_on(Stream& stream, const http::request<http::string_body>& req, HttpReply& reply) {
    beast::error_code ec;
    beast::get_lowest_layer(stream).expires_after(timeout);
    http::async_write(stream, req, [&ec](beast::error_code e, size_t) { ec = e; });
    run();
    if (ec) return ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(256 * 1024 * 1024);
    beast::get_lowest_layer(stream).expires_after(timeout);
    http::async_read(stream, buffer, parser, [&ec](beast::error_code e, size_t) { ec = e; });
    run();
    if (ec) return ec;
    auto& res = parser.get();
    reply.status = static_cast<int>(res.result_int());
    reply.body = std::move(res.body());
    if (!res.keep_alive()) close();
    return ec;
  }

  beast::error_code exchange(const http::request<http::string_body>& req, HttpReply& reply) {
    if (unix_socket) return exchange_on(*unix_socket, req, reply);
    return secure ? exchange_on(*secure, req, reply) : exchange_on(*plain, req, reply);
  }
};

Status check_client_tls(const ClientTls& tls) {
  auto ctx = make_client_tls_context(tls.ca_file, tls.cert_file, tls.key_file);
  if (!ctx) return ctx.error();
  return ok();
}

HttpClient::HttpClient(std::string url, HttpUrl parsed, std::chrono::milliseconds timeout,
                       std::string ca_file)
    : HttpClient(std::move(url), std::move(parsed), timeout, ClientTls{std::move(ca_file), "", ""}) {}

HttpClient::HttpClient(std::string url, HttpUrl parsed, std::chrono::milliseconds timeout, ClientTls tls)
    : url_(std::move(url)), impl_(std::make_unique<Impl>()) {
  impl_->url = std::move(parsed);
  impl_->timeout = timeout;
  impl_->tls = std::move(tls);
}

HttpClient::~HttpClient() = default;

Result<HttpReply> HttpClient::request(const std::string& method, const std::string& target,
                                      const std::string& body, const std::string& bearer_token) {
  if (impl_->url.tls && !impl_->tls_ctx) {
    auto ctx = make_client_tls_context(impl_->tls.ca_file, impl_->tls.cert_file, impl_->tls.key_file);
    if (!ctx) return ctx.error();
    impl_->tls_ctx = std::move(*ctx);
  }
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(impl_->url.base_path + target);
  req.version(11);
  req.set(http::field::host, impl_->url.host);
  req.set(http::field::user_agent, "railyard-cli");
  req.keep_alive(true);
  if (!bearer_token.empty()) req.set(http::field::authorization, "Bearer " + bearer_token);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();

  beast::error_code ec;
  impl_->failure.clear();
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = impl_->connected();
    if (!reused && (ec = impl_->connect())) break;
    HttpReply reply;
    ec = impl_->exchange(req, reply);
    if (!ec) return reply;
    impl_->close();
    // A kept-alive connection the server closed meanwhile: retry once on a new one. A fresh connection
    // that failed is a real failure.
    if (!reused) break;
  }
  std::string reason = !impl_->failure.empty()       ? impl_->failure
                       : ec == beast::error::timeout ? "timed out"
                                                     : tls_error_text(ec);
  if (!reason.empty() && reason.rfind("TLS", 0) != 0)
    reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
  return Error{ErrorCode::kUnavailable, "cannot reach the scheduler at " + url_ + ": " + reason};
}

}  // namespace railyard::net
