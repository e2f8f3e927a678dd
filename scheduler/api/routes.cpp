// The route table and what runs before every handler: matching, the token-in-URL refusal, the caller check
// of each route's Access, and the audit row of mutating routes. See router.hpp.
#include <algorithm>
#include <cctype>
#include <charconv>

#include "scheduler/api/auth.hpp"
#include "scheduler/api/router.hpp"
#include "scheduler/api/router_util.hpp"
#include "scheduler/api/views.hpp"

namespace railyard::api {

using nlohmann::json;

namespace {

std::string decode_percent(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int v = 0;
      auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
      if (ec == std::errc() && p == s.data() + i + 3) {
        out.push_back(static_cast<char>(v));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i] == '+' ? ' ' : s[i]);
  }
  return out;
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    if (path.front() == '/') path.remove_prefix(1);
    std::string_view s = path.substr(0, path.find('/'));
    if (!s.empty()) out.push_back(s);
    path.remove_prefix(s.size());
  }
  return out;
}

bool is_api(const std::vector<std::string>& seg) {
  return seg.size() >= 2 && seg[0] == "api" && seg[1] == "v1";
}

// Whether `pattern` matches the decoded segments ({name} matches any one).
bool matches(std::string_view pattern, const std::vector<std::string>& seg) {
  if (pattern == "/*") return !is_api(seg);
  const auto parts = split_path(pattern);
  if (parts.size() != seg.size()) return false;
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].front() != '{' && parts[i] != seg[i]) return false;
  return true;
}

// What the owner-or-admin rule refuses, for the 403's message: "cancel it", "read its logs".
std::string action_phrase(std::string_view pattern) {
  const std::string_view last = pattern.substr(pattern.rfind('/') + 1);
  if (last == "cancel" || last == "hold" || last == "release") return std::string(last) + " it";
  if (last == "logs") return "read its logs";
  return "see it (the scheduler runs with --private)";
}

HttpResponse websocket_only() {
  HttpResponse r = error_response(426, "upgrade_required", "a WebSocket endpoint: connect with an Upgrade");
  r.headers.emplace_back("Upgrade", "websocket");
  return r;
}

}  // namespace

std::string_view to_string(Access a) {
  switch (a) {
    case Access::kAnonymous:
      return "anonymous";
    case Access::kRead:
      return "read";
    case Access::kJobRead:
      return "job-read";
    case Access::kUser:
      return "user";
    case Access::kOwnerOrAdmin:
      return "owner-or-admin";
    case Access::kAdmin:
      return "admin";
    case Access::kExecToken:
      return "exec-token";
    case Access::kAgent:
      return "agent";
  }
  return "?";
}

// Matched in order: the first route whose pattern and method fit takes the request.
std::span<const Router::Entry> Router::table() {
  using A = Access;
  static const Entry kTable[] = {
      {{"GET", "/healthz", A::kAnonymous},
       [](Router& r, Call& c) {
         if (r.ha_)
           if (auto a = r.ha_(c.req)) return c.reply(std::move(*a));
         c.reply(json_response(200, {{"status", "ok"}, {"role", "leader"}}));
       }},
      {{"GET", "/api/v1/leader", A::kAnonymous},
       [](Router& r, Call& c) {
         if (r.ha_)
           if (auto a = r.ha_(c.req)) return c.reply(std::move(*a));
         c.reply(error_response(404, "not_found", "not a high-availability scheduler (no --ha-etcd)"));
       }},
      {{"GET", "/metrics", A::kRead}, [](Router& r, Call& c) { c.reply(r.cluster_read(c.route)); }},
      {{"GET", "/api/v1/health", A::kRead}, [](Router& r, Call& c) { c.reply(r.cluster_read(c.route)); }},
      {{"GET", "/api/v1/version", A::kRead}, [](Router& r, Call& c) { c.reply(r.cluster_read(c.route)); }},
      {{"GET", "/api/v1/metrics", A::kRead}, [](Router& r, Call& c) { c.reply(r.cluster_read(c.route)); }},
      {{"GET", "/api/v1/topology", A::kRead}, [](Router& r, Call& c) { c.reply(r.cluster_read(c.route)); }},
      {{"GET", "/api/v1/utilization", A::kRead},
       [](Router& r, Call& c) { c.reply(r.cluster_read(c.route)); }},
      {{"GET", "/api/v1/accounting", A::kRead}, [](Router& r, Call& c) { c.reply(r.accounting(c.route)); }},
      {{"GET", "/api/v1/fairshare", A::kRead}, [](Router& r, Call& c) { c.reply(r.fair_share(c.route)); }},
      {{"GET", "/api/v1/quotas", A::kRead}, [](Router& r, Call& c) { c.reply(r.quota_list()); }},
      {{"POST", "/api/v1/quotas/{kind}/{name}", A::kAdmin}, [](Router& r, Call& c) { c.reply(r.quota_action(c)); }},
      {{"POST", "/api/v1/quotas/{kind}/{name}/lift", A::kAdmin},
       [](Router& r, Call& c) { c.reply(r.quota_action(c)); }},
      {{"GET", "/api/v1/nodes", A::kRead}, [](Router& r, Call& c) { c.reply(r.cluster_read(c.route)); }},
      {{"GET", "/api/v1/nodes/{name}", A::kRead}, [](Router& r, Call& c) { c.reply(r.node_show(c.route)); }},
      {{"POST", "/api/v1/nodes/{name}/drain", A::kAdmin},
       [](Router& r, Call& c) { c.reply(r.node_action(c)); }},
      {{"POST", "/api/v1/nodes/{name}/resume", A::kAdmin},
       [](Router& r, Call& c) { c.reply(r.node_action(c)); }},
      {{"POST", "/api/v1/nodes/{name}/remove", A::kAdmin},
       [](Router& r, Call& c) { c.reply(r.node_action(c)); }},
      {{"POST", "/api/v1/nodes/{name}/key", A::kAdmin}, [](Router& r, Call& c) { c.reply(r.node_key(c)); }},
      {{"GET", "/api/v1/nodes/{name}/images", A::kRead},
       [](Router& r, Call& c) { r.node_images(c.req, c.route, c.reply); }},
      {{"POST", "/api/v1/nodes/{name}/images", A::kAdmin},
       [](Router& r, Call& c) { r.node_images(c.req, c.route, c.reply); }},
      {{"GET", "/api/v1/whoami", A::kUser},
       [](Router&, Call& c) {
         json me = {{"user", c.who->user}, {"role", store::to_string(c.who->role)}, {"auth", "token"}};
         if (c.who->uid) {
           me["auth"] = "unix";
           me["uid"] = *c.who->uid;
         }
         c.reply(json_response(200, me));
       }},
      {{"GET", "/api/v1/jobs", A::kJobRead},
       [](Router& r, Call& c) { c.reply(r.list_jobs(c.route, c.who ? &*c.who : nullptr)); }},
      {{"POST", "/api/v1/jobs", A::kUser}, [](Router& r, Call& c) { r.submit(c, false); }},
      {{"POST", "/api/v1/jobs:batch", A::kUser}, [](Router& r, Call& c) { r.submit(c, true); }},
      {{"GET", "/api/v1/jobs/{id}", A::kJobRead},
       [](Router& r, Call& c) { c.reply(r.job_show(c.route, c.who ? &*c.who : nullptr)); }},
      {{"GET", "/api/v1/jobs/{id}/events", A::kJobRead},
       [](Router& r, Call& c) { c.reply(r.job_events(c.route)); }},
      {{"GET", "/api/v1/jobs/{id}/metrics", A::kJobRead},
       [](Router& r, Call& c) { c.reply(r.job_metrics(c.route)); }},
      {{"GET", "/api/v1/jobs/{id}/runs", A::kJobRead},
       [](Router& r, Call& c) { c.reply(r.job_runs(c.route)); }},
      {{"GET", "/api/v1/jobs/{id}/logs", A::kOwnerOrAdmin},
       [](Router& r, Call& c) { r.job_logs(c.route, c.reply); }},
      {{"POST", "/api/v1/jobs/{id}/cancel", A::kOwnerOrAdmin},
       [](Router& r, Call& c) { c.reply(r.job_action(c)); }},
      {{"POST", "/api/v1/jobs/{id}/hold", A::kOwnerOrAdmin},
       [](Router& r, Call& c) { c.reply(r.job_action(c)); }},
      {{"POST", "/api/v1/jobs/{id}/release", A::kOwnerOrAdmin},
       [](Router& r, Call& c) { c.reply(r.job_action(c)); }},
      {{"POST", "/api/v1/allocs/{alloc}/exec", A::kExecToken},
       [](Router& r, Call& c) { r.alloc_exec(c.req, c.route, c.reply); }},
      {{"GET", "/api/v1/tokens", A::kAdmin}, [](Router& r, Call& c) { c.reply(r.token_list(c)); }},
      {{"POST", "/api/v1/tokens", A::kAdmin}, [](Router& r, Call& c) { c.reply(r.token_create(c)); }},
      {{"POST", "/api/v1/tokens/{id}/revoke", A::kAdmin},
       [](Router& r, Call& c) { c.reply(r.token_revoke(c)); }},
      {{"GET", "/api/v1/audit", A::kAdmin}, [](Router& r, Call& c) { c.reply(r.audit_log(c.route)); }},
      // WebSockets: upgrades go to the WatchHub and the AgentHub before the router (main.cpp), which check
      // their callers themselves (an auth frame with --private; the agent's proof); a plain GET gets 426.
      {{"GET", "/api/v1/watch", A::kRead}, [](Router&, Call& c) { c.reply(websocket_only()); }},
      {{"GET", "/api/v1/agent", A::kAgent}, [](Router&, Call& c) { c.reply(websocket_only()); }},
      {{"GET", "/*", A::kAnonymous}, [](Router& r, Call& c) { c.reply(r.static_file(c.req)); }},
      {{"HEAD", "/*", A::kAnonymous}, [](Router& r, Call& c) { c.reply(r.static_file(c.req)); }},
  };
  return kTable;
}

HttpResponse Router::static_file(const HttpRequest& req) {
  return static_files_.get(decode_percent(std::string_view(req.target).substr(0, req.target.find('?'))));
}

std::vector<RouteInfo> Router::routes() {
  std::vector<RouteInfo> out;
  for (const auto& e : table()) out.push_back(e.info);
  return out;
}

// A bug in one request's handling answers 500 and leaves the daemon running.
void Router::handle(HttpRequest&& req, const Reply& reply) {
  try {
    route(std::move(req), reply);
  } catch (const std::exception& e) {
    reply(error_response(500, "internal", std::string("internal error: ") + e.what()));
  }
}

void Router::route(HttpRequest&& req, const Reply& reply) {
  Call c{std::move(req), {}, std::nullopt, reply, nullptr};
  const std::string_view target = c.req.target;
  const size_t q = target.find('?');
  if (q != std::string_view::npos) {
    std::string_view qs = target.substr(q + 1);
    while (!qs.empty()) {
      std::string_view kv = qs.substr(0, qs.find('&'));
      qs.remove_prefix(std::min(qs.size(), kv.size() + 1));
      const size_t eq = kv.find('=');
      std::string key = decode_percent(kv.substr(0, eq));
      std::string lower = key;
      for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (lower == "token" || lower == "access_token")
        return reply(error_response(400, "invalid_argument",
                                    "tokens are not accepted in URLs (query parameter " + key +
                                        "): send them in the Authorization: Bearer header"));
      c.route.query[key] = eq == std::string_view::npos ? "" : decode_percent(kv.substr(eq + 1));
    }
  }
  std::vector<std::string> seg;
  for (auto s : split_path(target.substr(0, q))) seg.push_back(decode_percent(s));
  const Entry* entry = nullptr;
  std::string allow;
  for (const auto& e : table()) {
    if (!matches(e.info.pattern, seg)) continue;
    if (e.info.method == c.req.method) {
      entry = &e;
      break;
    }
    if (allow.find(e.info.method) == std::string::npos)
      allow += (allow.empty() ? "" : ", ") + std::string(e.info.method);
  }
  if (!entry) {
    if (allow.empty()) return reply(error_response(404, "not_found", "no such route"));
    HttpResponse r = error_response(405, "method_not_allowed", "allowed: " + allow);
    r.headers.emplace_back("Allow", allow);
    return reply(std::move(r));
  }
  if (is_api(seg)) c.route.seg.assign(seg.begin() + 2, seg.end());
  if (entry->info.method == "POST") {  // mutating: audited, whatever the outcome
    c.audit = std::make_shared<store::AuditRecord>(store::AuditRecord{
        service_.now_ms(), "", c.req.remote, c.req.method, std::string(target.substr(0, q)), 0});
    c.reply = [this, row = c.audit, passed = c.audit_passed, reply](HttpResponse r) {
      if (!*passed || r.status / 100 != 2) {
        store::AuditRecord done = *row;
        done.status = r.status;
        service_.record_audit(std::move(done));
      }
      reply(std::move(r));
    };
  }
  if (auto refused = check_access(*entry, c)) return c.reply(std::move(*refused));
  entry->handler(*this, c);
}

std::optional<HttpResponse> Router::check_access(const Entry& entry, Call& c) {
  const Access a = entry.info.access;
  const bool needs_token = a == Access::kUser || a == Access::kOwnerOrAdmin || a == Access::kAdmin ||
                           ((a == Access::kRead || a == Access::kJobRead) && options_.private_reads);
  // A job read open to anyone still names its caller when it can: a job's env values are shown only to its
  // owner and admins (views.hpp, sees_env). A token offered there must be valid (401 says why); a Unix
  // user the passwd database does not know reads as anyone does.
  const bool names_caller = a == Access::kJobRead && (!c.req.authorization.empty() || c.req.peer);
  if (!needs_token && !names_caller) return std::nullopt;
  if (c.req.authorization.empty() && c.req.peer) {
    auto who = peer_caller(*c.req.peer, options_.peer);
    if (!who && !needs_token) return std::nullopt;
    if (!who) return error_response(401, "unauthorized", who.error().message);
    c.who = std::move(*who);
  } else {
    auto token = bearer_token(c.req.authorization);
    if (!token)
      return error_response(401, "unauthorized",
                            "a bearer token is required (header Authorization: Bearer ...)");
    auto auth = service_.authenticate(*token);
    if (!auth) return error_response(auth.error());
    if (!auth->caller) return error_response(401, "unauthorized", auth->refusal);
    c.who = *auth->caller;
  }
  if (c.audit) c.audit->actor = c.who->user;
  const std::string route_name = std::string(entry.info.method) + " " + std::string(entry.info.pattern);
  if (a == Access::kAdmin && !c.who->admin())
    return error_response(403, "forbidden",
                          route_name + " needs the admin role (" + c.who->user + " is a user)");
  const bool job_route = c.route.seg.size() >= 2 && c.route.seg[0] == "jobs";
  if (!needs_token) return std::nullopt;  // named only for what it may see
  if ((a == Access::kOwnerOrAdmin || a == Access::kJobRead) && job_route && !c.who->admin()) {
    const auto id = to_int(c.route.seg[1]);
    const store::JobRecord* job = id ? service_.table().find(*id) : nullptr;
    if (job && job->spec.user != c.who->user)
      return error_response(403, "forbidden",
                            "job " + c.route.seg[1] + " belongs to " + job->spec.user +
                                "; only its owner or an admin may " + action_phrase(entry.info.pattern));
  }
  return std::nullopt;
}

}  // namespace railyard::api
