// Small helpers shared by the router's translation units (router.cpp, router_more.cpp). Internal to api/.
#pragma once

#include <charconv>
#include <cstdint>
#include <map>
#include <memory>
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

// One request on its way through the table: the caller once checked, and for a mutating route its audit
// row, which goes either to the Service with the change (audit_as) or, when the answer is not a success,
// to the audit log on its own.
struct Router::Call {
  HttpRequest req;
  Route route;
  std::optional<daemon::Caller> who;
  Reply reply;
  std::shared_ptr<store::AuditRecord> audit;  // shared with the reply's wrapper, which writes it on failure
  std::shared_ptr<bool> audit_passed = std::make_shared<bool>(false);
  // The row with the status a success answers, for a Service mutator; nullptr when the route keeps none.
  const store::AuditRecord* audit_as(int status) {
    if (!audit) return nullptr;
    audit->status = status;
    *audit_passed = true;
    return &*audit;
  }
};

struct Router::Entry {
  RouteInfo info;
  void (*handler)(Router&, Call&);
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
