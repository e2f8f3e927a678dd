// Small helpers shared by the router's translation units (router.cpp, router_more.cpp). Internal to api/.
#pragma once

#include <charconv>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/api/http.hpp"
#include "scheduler/api/router.hpp"

namespace railyard::api {

// A request target split into path segments below /api/v1 and query parameters.
struct Router::Route {
  std::vector<std::string> seg;
  std::map<std::string, std::string> query;
};

inline std::optional<int64_t> to_int(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Invalid UTF-8 (e.g. from a percent-decoded path echoed in a message) is replaced, never thrown on.
inline HttpResponse json_response(int status, const nlohmann::json& body) {
  return {
      status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), {}};
}

}  // namespace railyard::api
