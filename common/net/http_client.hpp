// A small synchronous HTTP/1.1 client (http://, https:// and unix:/PATH, a Unix socket) for the `railyard`
// command and railyard-agent-exec.
//
// One connection, kept alive between requests and reopened once when the server closed it. Every
// operation (resolve, connect, TLS handshake, write, read) has a timeout. https verifies the server's
// certificate chain (against `ca_file`, else the system's trust store) and its name. Beast lives only in
// http_client.cpp (compile time); this header is plain C++.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "common/result.hpp"

namespace railyard::net {

struct HttpUrl {
  bool tls = false;  // https://
  std::string host;
  std::string port = "80";  // 443 for https:// without a port
  std::string base_path;    // "" or "/prefix" without a trailing slash
  std::string unix_path;    // unix:/PATH: plain HTTP over the Unix socket at PATH (host "localhost")
};

// How an https client verifies servers (`ca_file`, "" = the system's trust store) and, where a server asks,
// which certificate it shows (`cert_file` and its `key_file`; none when empty).
struct ClientTls {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};
// Whether those files make a client TLS context (readable, PEM, the key the certificate's): at start-up, so
// that a wrong path is said once instead of at every request.
Status check_client_tls(const ClientTls& tls);

// "http://127.0.0.1:8600", "https://host:8600/", "127.0.0.1:8600" (scheme optional: http),
// "unix:/run/railyard.sock" (an absolute path).
// Errors name `what` (e.g. "--url").
Result<HttpUrl> parse_http_url(const std::string& url, const std::string& what = "--url");

struct HttpReply {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  // `url` is kept for messages ("cannot reach the scheduler at URL: ..."); `ca_file` is used for https only.
  HttpClient(std::string url, HttpUrl parsed, std::chrono::milliseconds timeout, std::string ca_file = "");
  HttpClient(std::string url, HttpUrl parsed, std::chrono::milliseconds timeout, ClientTls tls);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // `target` starts with '/', the base path is prepended. Transport failures (TLS ones included) are
  // kUnavailable errors with the message "cannot reach the scheduler at URL: <reason>"; a CA file that
  // cannot be read is kInvalidArgument; any HTTP status is a reply.
  Result<HttpReply> request(const std::string& method, const std::string& target, const std::string& body = "",
                            const std::string& bearer_token = "");

  const std::string& url() const { return url_; }

 private:
  struct Impl;
  std::string url_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace railyard::net
