// The only Beast translation unit of the `railyard` command.
#include "cli/http_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <optional>

namespace railyard::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Result<HttpUrl> parse_http_url(const std::string& url) {
  std::string rest = url;
  if (rest.rfind("https://", 0) == 0) return invalid("--url " + url + ": https is not supported yet; use http://");
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  if (rest.find("://") != std::string::npos) return invalid("--url " + url + ": expected http://HOST:PORT");
  HttpUrl out;
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
      return invalid("--url " + url + ": bad port");
  }
  if (rest.size() > 2 && rest.front() == '[' && rest.back() == ']') rest = rest.substr(1, rest.size() - 2);
  if (rest.empty()) return invalid("--url " + url + ": no host");
  out.host = rest;
  return out;
}

struct HttpClient::Impl {
  HttpUrl url;
  std::chrono::milliseconds timeout;
  asio::io_context io;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void close() {
    if (stream) {
      beast::error_code ignored;
      stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream.reset();
    }
    buffer.clear();
  }

  beast::error_code connect() {
    beast::error_code ec;
    tcp::resolver resolver(io);
    auto endpoints = resolver.resolve(url.host, url.port, ec);
    if (ec) return ec;
    stream.emplace(io);
    stream->expires_after(timeout);
    stream->connect(endpoints, ec);
    if (ec) stream.reset();
    else stream->socket().set_option(tcp::no_delay(true), ec);
    return ec;
  }

  // One exchange on the current connection; `fresh` tells whether it was just opened.
  beast::error_code exchange(const http::request<http::string_body>& req, HttpReply& reply) {
    beast::error_code ec;
    stream->expires_after(timeout);
    http::write(*stream, req, ec);
    if (ec) return ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(256 * 1024 * 1024);
    http::read(*stream, buffer, parser, ec);
    if (ec) return ec;
    auto& res = parser.get();
    reply.status = static_cast<int>(res.result_int());
    reply.body = std::move(res.body());
    if (!res.keep_alive()) close();
    return ec;
  }
};

HttpClient::HttpClient(std::string url, HttpUrl parsed, std::chrono::milliseconds timeout)
    : url_(std::move(url)), impl_(std::make_unique<Impl>()) {
  impl_->url = std::move(parsed);
  impl_->timeout = timeout;
}

HttpClient::~HttpClient() = default;

Result<HttpReply> HttpClient::request(const std::string& method, const std::string& target,
                                      const std::string& body, const std::string& bearer_token) {
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
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = impl_->stream.has_value();
    if (!reused && (ec = impl_->connect())) break;
    HttpReply reply;
    ec = impl_->exchange(req, reply);
    if (!ec) return reply;
    impl_->close();
    // A kept-alive connection the server closed meanwhile: retry once on a new one. A fresh connection
    // that failed is a real failure.
    if (!reused) break;
  }
  std::string reason = ec == beast::error::timeout ? "timed out" : ec.message();
  if (!reason.empty()) reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
  return Error{ErrorCode::kUnavailable, "cannot reach the scheduler at " + url_ + ": " + reason};
}

}  // namespace railyard::cli
