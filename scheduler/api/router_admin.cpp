// The router's admin routes (issues 32, 46): tokens (create, list, revoke), node keys and the audit log. Only admins reach
// them (Access::kAdmin in the route table); the Service checks the role again.
#include <ctime>

#include "common/json_text.hpp"
#include "scheduler/api/auth.hpp"
#include "scheduler/api/router.hpp"
#include "scheduler/api/router_util.hpp"

namespace railyard::api {

using nlohmann::json;

namespace {

json optional_time(const std::optional<int64_t>& t) { return t ? json(*t) : json(nullptr); }

json token_json(const store::TokenRecord& t) {
  return {{"id", t.id()},
          {"user", t.user},
          {"role", store::to_string(t.role)},
          {"created", t.created ? json(t.created) : json(nullptr)},
          {"expires", optional_time(t.expires)},
          {"last_used", optional_time(t.last_used)},
          {"revoked", optional_time(t.revoked)}};
}

}  // namespace

// Body {"user": "ada", "role": "user"|"admin" (default user), "expires": "30d"|"never" (default 90d)}.
// 201 with the token's view and "token": the secret, which is never shown again.
HttpResponse Router::token_create(Call& call) {
  auto parsed = parse_json_bounded(call.req.body);
  if (!parsed) return error_response(400, "invalid_argument", "request body: " + parsed.error().message);
  const json& body = *parsed;
  if (!body.is_object())
    return error_response(400, "invalid_argument",
                          R"(body must be {"user": "...", "role": ..., "expires": ...})");
  std::string user, role_text = "user", expires_text;
  for (auto& [k, v] : body.items()) {
    if (!v.is_string()) return error_response(400, "invalid_argument", k + ": must be a string");
    if (k == "user") {
      user = v.get<std::string>();
    } else if (k == "role") {
      role_text = v.get<std::string>();
    } else if (k == "expires") {
      expires_text = v.get<std::string>();
    } else {
      return error_response(400, "invalid_argument", k + ": unknown field (known: user, role, expires)");
    }
  }
  auto role = store::parse_role(role_text);
  if (!role) return error_response(400, "invalid_argument", "role " + role_text + ": must be user or admin");
  std::optional<int64_t> expires = service_.now() + daemon::kDefaultTokenLifetimeS;
  if (!expires_text.empty()) {
    auto life = parse_lifetime(expires_text);
    if (!life) return error_response(life.error());
    if (*life)
      expires = service_.now() + **life;
    else
      expires.reset();  // "never"
  }
  auto made = service_.create_token(user, *role, expires, *call.who, call.audit_as(201));
  if (!made) return error_response(made.error());
  json out = token_json(made->second);
  out["token"] = made->first;
  return json_response(201, out);
}

// Body {"rotate": false, "grace": 600, "force": false} (each optional). 201 {"node", "key", "rotated"}: the key,
// shown once, for the node's agent (--key-file). Through the Service's commit, so with replicated state every
// controller has it.
HttpResponse Router::node_key(Call& call) {
  bool rotate = false, force = false;
  int64_t grace = 600;
  if (!call.req.body.empty()) {
    auto parsed = parse_json_bounded(call.req.body);
    if (!parsed) return error_response(400, "invalid_argument", "request body: " + parsed.error().message);
    if (!parsed->is_object()) return error_response(400, "invalid_argument", "request body must be a JSON object");
    for (auto& [k, v] : parsed->items()) {
      if (k == "rotate" || k == "force") {
        if (!v.is_boolean()) return error_response(400, "invalid_argument", k + ": must be true or false");
        (k == "rotate" ? rotate : force) = v.get<bool>();
      } else if (k == "grace") {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 30 * 86400)
          return error_response(400, "invalid_argument", "grace: must be 0..2592000 (seconds)");
        grace = v.get<int64_t>();
      } else {
        return error_response(400, "invalid_argument", k + ": unknown field (known: rotate, grace, force)");
      }
    }
  }
  const std::string& node = call.route.seg[1];
  auto key = service_.issue_node_key(node, rotate, grace, force, *call.who, call.audit_as(201));
  if (!key) return error_response(key.error());
  return json_response(201, {{"node", node}, {"key", *key}, {"rotated", rotate}});
}

HttpResponse Router::token_list(const Call& call) {
  auto all = service_.tokens(*call.who);
  if (!all) return error_response(all.error());
  json out = json::array();
  for (const auto& t : *all) out.push_back(token_json(t));
  return json_response(200, {{"tokens", std::move(out)}});
}

HttpResponse Router::token_revoke(Call& call) {
  const std::string& id = call.route.seg[1];
  if (auto s = service_.revoke_token(id, *call.who, call.audit_as(200)); !s) return error_response(s.error());
  return json_response(200, {{"id", id}, {"revoked", true}});
}

// GET /audit?user=&since=&limit=: `since` in unix seconds, limit 1..10,000 (default 1,000), oldest first.
HttpResponse Router::audit_log(const Route& route) {
  store::AuditQuery q;
  if (auto it = route.query.find("user"); it != route.query.end()) q.actor = it->second;
  if (auto it = route.query.find("since"); it != route.query.end()) {
    auto n = to_int(it->second);
    if (!n || *n < 0 || *n > 253'402'300'799)
      return error_response(400, "invalid_argument", "since=" + it->second + ": must be unix seconds");
    q.since_ms = *n * 1000;
  }
  if (auto it = route.query.find("limit"); it != route.query.end()) {
    auto n = to_int(it->second);
    if (!n || *n < 1 || *n > kMaxPageSize)
      return error_response(400, "invalid_argument",
                            "limit=" + it->second + ": must be 1.." + std::to_string(kMaxPageSize));
    q.limit = static_cast<int>(*n);
  }
  auto rows = service_.store().audit(q);
  if (!rows) return error_response(rows.error());
  json out = json::array();
  for (const auto& a : *rows)
    out.push_back({{"time_ms", a.time_ms},
                   {"actor", a.actor},
                   {"source", a.source},
                   {"method", a.method},
                   {"target", a.target},
                   {"status", a.status}});
  return json_response(200, {{"rows", std::move(out)}});
}

}  // namespace railyard::api
