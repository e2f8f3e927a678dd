// Plain HTTP request/response values: the only face of the HTTP server that the router and daemon see, so
// that Boost.Beast stays inside server.cpp.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace railyard::api {

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // path and query, as sent
  std::string authorization;  // the Authorization header, "" when absent
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Called exactly once per request, on the server's event loop.
using Reply = std::function<void(HttpResponse)>;
using Handler = std::function<void(HttpRequest&&, Reply)>;

inline constexpr size_t kDefaultBodyLimit = size_t{1} << 20;  // 1 MiB
inline constexpr size_t kMaxBodyLimit = size_t{64} << 20;     // 64 MiB (batch submits)

// {"error": {"code": ..., "message": ...}} with the status that matches the code.
HttpResponse error_response(int status, std::string_view code, std::string_view message);
// The status and code for an Error from the layers below (kInvalidArgument -> 400 "invalid_argument", ...).
HttpResponse error_response(const Error& error);

}  // namespace railyard::api
