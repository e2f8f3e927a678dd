// A small synchronous HTTP/1.1 client for the `railyard` command (http:// URLs only).
//
// One connection, kept alive between requests and reopened once when the server closed it. Every
// operation (resolve, connect, write, read) has a timeout. Beast lives only in http_client.cpp (compile
// time); this header is plain C++.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "common/result.hpp"

namespace railyard::cli {

struct HttpUrl {
  std::string host;
  std::string port = "80";
  std::string base_path;  // "" or "/prefix" without a trailing slash
};

// "http://127.0.0.1:8600", "http://host:8600/", "127.0.0.1:8600" (scheme optional). https is refused.
Result<HttpUrl> parse_http_url(const std::string& url);

struct HttpReply {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  // `url` is kept for messages ("cannot reach the scheduler at URL: ...").
  HttpClient(std::string url, HttpUrl parsed, std::chrono::milliseconds timeout);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // `target` starts with '/', the base path is prepended. Transport failures are kUnavailable errors with
  // the message "cannot reach the scheduler at URL: <reason>"; any HTTP status is a reply.
  Result<HttpReply> request(const std::string& method, const std::string& target, const std::string& body = "",
                            const std::string& bearer_token = "");

  const std::string& url() const { return url_; }

 private:
  struct Impl;
  std::string url_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace railyard::cli
