#include "scheduler/api/router.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "jobs/spec_json.hpp"
#include "scheduler/api/auth.hpp"
#include "scheduler/api/router_util.hpp"
#include "scheduler/api/views.hpp"

namespace railyard::api {

using nlohmann::json;

namespace {

constexpr std::string_view kPrefix = "/api/v1";

std::string percent_decode(std::string_view s) {
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

HttpResponse method_not_allowed(const char* allow) {
  HttpResponse r = error_response(405, "method_not_allowed", std::string("allowed: ") + allow);
  r.headers.emplace_back("Allow", allow);
  return r;
}

HttpResponse not_found_route() { return error_response(404, "not_found", "no such route"); }

// GET /utilization?since=&until=&step=: the last hour in 10 s steps by default, at most kMaxSteps steps.
HttpResponse utilization(const std::map<std::string, std::string>& query, const daemon::Service& service) {
  constexpr int64_t kMaxSteps = 3600;
  constexpr int64_t kMaxTime = 253'402'300'799;  // 9999-12-31T23:59:59Z
  const int64_t now = service.now();
  std::map<std::string, int64_t> v = {{"until", now}, {"step", 10}};
  for (const char* key : {"until", "step", "since"}) {
    if (auto it = query.find(key); it != query.end()) {
      auto n = to_int(it->second);
      if (!n || *n < 0 || *n > kMaxTime)  // bounded, so since + step cannot overflow
        return error_response(
            400, "invalid_argument",
            std::string(key) + "=" + it->second + ": must be 0.." + std::to_string(kMaxTime));
      v[key] = *n;
    } else if (std::string_view(key) == "since") {
      v[key] = v["until"] - 3600;
    }
  }
  if (v["step"] < 1) return error_response(400, "invalid_argument", "step=0: must be >= 1");
  if (v["since"] >= v["until"])
    return error_response(400, "invalid_argument",
                          "since=" + std::to_string(v["since"]) + ": must be before until");
  const int64_t span = v["until"] - v["since"];
  if (span / v["step"] + (span % v["step"] != 0) > kMaxSteps)
    return error_response(400, "invalid_argument",
                          "step=" + std::to_string(v["step"]) + ": at most " + std::to_string(kMaxSteps) +
                              " steps from since to until");
  return json_response(200, utilization_json(service.table(), v["since"], v["until"], v["step"], now));
}

// Parses a request body, refusing nesting deeper than `max_depth` before it costs anything.
std::optional<json> parse_body(const std::string& text, int max_depth, std::string& error) {
  if (jobs::json_text_depth(text) > max_depth) {
    error = "request body: nested deeper than " + std::to_string(max_depth) + " levels";
    return std::nullopt;
  }
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    error = "request body is not valid JSON";
    return std::nullopt;
  }
  return j;
}

}  // namespace

HttpResponse error_response(int status, std::string_view code, std::string_view message) {
  return json_response(status, {{"error", {{"code", code}, {"message", message}}}});
}

HttpResponse error_response(const Error& e) {
  switch (e.code) {
    case ErrorCode::kInvalidArgument:
      return error_response(400, "invalid_argument", e.message);
    case ErrorCode::kNotFound:
      return error_response(404, "not_found", e.message);
    case ErrorCode::kPermission:
      return error_response(403, "forbidden", e.message);
    case ErrorCode::kConflict:
      return error_response(409, "conflict", e.message);
    case ErrorCode::kUnavailable:
      return error_response(503, "unavailable", e.message);
    case ErrorCode::kInternal:
      break;
  }
  return error_response(500, "internal", e.message);
}

Router::Router(daemon::Service& service, RouterOptions options)
    : service_(service), options_(std::move(options)), static_files_(options_.web_root) {}

size_t Router::body_limit(std::string_view target) {
  return target.substr(0, target.find('?')) == "/api/v1/jobs:batch" ? kMaxBodyLimit : kDefaultBodyLimit;
}

bool Router::concurrent(const HttpRequest& req) {
  const std::string_view path = std::string_view(req.target).substr(0, req.target.find('?'));
  return req.method == "POST" && (path == "/api/v1/jobs" || path == "/api/v1/jobs:batch");
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
  std::string_view target = req.target;
  const size_t q = target.find('?');
  std::string_view path = target.substr(0, q);
  Route route;
  if (q != std::string_view::npos) {
    std::string_view qs = target.substr(q + 1);
    while (!qs.empty()) {
      std::string_view kv = qs.substr(0, qs.find('&'));
      qs.remove_prefix(std::min(qs.size(), kv.size() + 1));
      const size_t eq = kv.find('=');
      route.query[percent_decode(kv.substr(0, eq))] =
          eq == std::string_view::npos ? "" : percent_decode(kv.substr(eq + 1));
    }
  }
  if (path == "/metrics") path = "/api/v1/metrics";
  if (path.substr(0, kPrefix.size()) != kPrefix ||
      (path.size() > kPrefix.size() && path[kPrefix.size()] != '/')) {
    if (req.method != "GET" && req.method != "HEAD") return reply(method_not_allowed("GET, HEAD"));
    return reply(static_files_.get(percent_decode(path)));
  }
  path.remove_prefix(kPrefix.size());
  while (!path.empty()) {
    if (path.front() == '/') path.remove_prefix(1);
    std::string_view s = path.substr(0, path.find('/'));
    if (!s.empty()) route.seg.push_back(percent_decode(s));
    path.remove_prefix(s.size());
  }
  // railyard-agent-exec authenticates with the allocation's exec token, not an API token.
  if (route.seg.size() == 3 && route.seg[0] == "allocs" && route.seg[2] == "exec") {
    if (req.method != "POST") return reply(method_not_allowed("POST"));
    return alloc_exec(req, route, reply);
  }
  // Auth: POST always; reads only when private, and logs always (owner or admin).
  std::optional<daemon::Caller> who;
  const bool logs = route.seg.size() == 3 && route.seg[0] == "jobs" && route.seg[2] == "logs";
  const bool whoami = route.seg.size() == 1 && route.seg[0] == "whoami";
  const bool mutating = req.method != "GET" && req.method != "HEAD";
  if (mutating || options_.private_reads || logs || whoami) {
    auto token = bearer_token(req.authorization);
    if (!token) return reply(error_response(401, "unauthorized", "a bearer token is required"));
    auto c = service_.authenticate(*token);
    if (!c) return reply(error_response(c.error()));
    if (!*c) return reply(error_response(401, "unauthorized", "unknown token"));
    who = **c;
  }
  if (req.method == "POST" && route.seg.size() == 1 &&
      (route.seg[0] == "jobs" || route.seg[0] == "jobs:batch"))
    return submit(req, *who, route.seg[0] == "jobs:batch", route.query["idempotency_key"], reply);
  if (logs) {
    if (req.method != "GET") return reply(method_not_allowed("GET"));
    return job_logs(route, &*who, reply);
  }
  if (whoami) {
    if (req.method != "GET") return reply(method_not_allowed("GET"));
    return reply(json_response(200, {{"user", who->user}, {"role", store::to_string(who->role)}}));
  }
  reply(dispatch(req, route, who ? &*who : nullptr));
}

HttpResponse Router::dispatch(const HttpRequest& req, const Route& route, const daemon::Caller* who) {
  const auto& s = route.seg;
  const bool get = req.method == "GET", post = req.method == "POST";
  const auto& table = service_.table();
  if (s.size() == 1) {
    const std::string& r = s[0];
    if (r == "jobs") return get ? list_jobs(route) : method_not_allowed("GET, POST");
    if (r == "jobs:batch") return method_not_allowed("POST");
    if (r != "nodes" && r != "topology" && r != "health" && r != "version" && r != "metrics" &&
        r != "accounting" && r != "utilization")
      return not_found_route();
    if (!get) return method_not_allowed("GET");
    if (r == "accounting") return accounting(route);
    if (r == "utilization") return utilization(route.query, service_);
    if (r == "nodes") return json_response(200, {{"nodes", nodes_json(table)}});
    if (r == "topology") return {200, "application/json", options_.topology_json, {}};
    if (r == "health") return json_response(200, {{"status", "ok"}});
    if (r == "version") return json_response(200, {{"version", options_.version}, {"api", "v1"}});
    std::string text = metrics_text(table, service_.stats());
    if (hub_) text += agent_metrics_text(*hub_);
    return {200, "text/plain; version=0.0.4", std::move(text), {}};
  }
  if (s.size() == 2 && s[0] == "nodes") {
    if (!get) return method_not_allowed("GET");
    return node_show(route);
  }
  if (s.size() == 3 && s[0] == "jobs" && (s[2] == "events" || s[2] == "metrics" || s[2] == "runs")) {
    if (!get) return method_not_allowed("GET");
    if (s[2] == "runs") return job_runs(route);
    return s[2] == "events" ? job_events(route) : job_metrics(route);
  }
  if (s.size() == 2 && s[0] == "jobs") {
    if (!get) return method_not_allowed("GET");
    auto id = to_int(s[1]);
    const store::JobRecord* r = id ? table.find(*id) : nullptr;
    if (!r) return error_response(404, "not_found", "job " + s[1] + " not found");
    json job = job_json(*r, table);
    job["estimate"] = placement_estimate_json(*r, table.cluster());  // here only: lists stay cheap
    return json_response(200, job);
  }
  if (s.size() == 3 && (s[0] == "jobs" || s[0] == "nodes")) {
    if (!post) return method_not_allowed("POST");
    return s[0] == "jobs" ? job_action(route, *who) : node_action(req, route, *who);
  }
  return not_found_route();
}

HttpResponse Router::list_jobs(const Route& route) {
  auto param = [&](const char* k) -> std::optional<std::string> {
    auto it = route.query.find(k);
    return it == route.query.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  std::set<jobs::JobState> states;
  if (auto v = param("state"); v && !v->empty()) {
    std::string_view rest = *v;
    while (!rest.empty()) {
      std::string one(rest.substr(0, rest.find(',')));
      rest.remove_prefix(std::min(rest.size(), one.size() + 1));
      for (auto& ch : one) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      auto st = jobs::parse_state(one);
      if (!st) return error_response(400, "invalid_argument", "state=" + one + ": unknown state");
      states.insert(*st);
    }
  }
  const auto user = param("user");
  const auto name = param("name");
  jobs::JobId array = 0;  // the tasks of this array only
  if (auto v = param("array")) {
    auto n = to_int(*v);
    if (!n || *n < 1) return error_response(400, "invalid_argument", "array=" + *v + ": must be a job id");
    array = *n;
  }
  int64_t limit = kDefaultPageSize;
  if (auto v = param("limit")) {
    auto n = to_int(*v);
    if (!n || *n < 1 || *n > kMaxPageSize)
      return error_response(400, "invalid_argument",
                            "limit=" + *v + ": must be 1.." + std::to_string(kMaxPageSize));
    limit = *n;
  }
  // Cursors: jobs with after < id < before, ascending by default or newest first with order=desc.
  int64_t after = 0, before = std::numeric_limits<int64_t>::max();
  for (auto [key, bound] : {std::pair{"after", &after}, std::pair{"before", &before}}) {
    if (auto v = param(key)) {
      auto n = to_int(*v);
      if (!n || *n < 0)
        return error_response(400, "invalid_argument", std::string(key) + "=" + *v + ": must be a job id");
      *bound = *n;
    }
  }
  bool desc = false;
  if (auto v = param("order")) {
    if (*v != "asc" && *v != "desc")
      return error_response(400, "invalid_argument", "order=" + *v + ": must be asc or desc");
    desc = *v == "desc";
  }
  // An array's tasks come after it (their ids are taken when they are created): the rows before it are skipped.
  if (array != 0) after = std::max(after, array);
  const auto& table = service_.table();
  const auto& all = table.jobs();
  json out = json::array();
  json next = nullptr;
  // Filters are checked row by row from the cursor: a page reads only the rows up to its last match.
  auto take = [&](const store::JobRecord& r) {
    if ((!states.empty() && !states.count(r.state)) || (user && !user->empty() && r.spec.user != *user) ||
        (name && !name->empty() && r.spec.name != *name) || (array != 0 && r.spec.array_job != array))
      return true;
    if (static_cast<int64_t>(out.size()) == limit) {
      next = out.back()["id"];
      return false;
    }
    out.push_back(job_json(r, table));
    return true;
  };
  if (desc) {
    for (auto it = std::make_reverse_iterator(all.lower_bound(before)); it != all.rend() && it->first > after;
         ++it)
      if (!take(it->second)) break;
    return json_response(200, {{"jobs", std::move(out)}, {"next_before", next}});
  }
  for (auto it = all.upper_bound(after); it != all.end() && it->first < before; ++it)
    if (!take(it->second)) break;
  return json_response(200, {{"jobs", std::move(out)}, {"next_after", next}});
}

// Single submits go through parse_job_spec_text (duplicate keys, depth); a batch is parsed once, then each
// entry is read and checked with its index in front of any error.
void Router::submit(const HttpRequest& req, const daemon::Caller& who, bool batch,
                    const std::string& idempotency_key, const Reply& reply) {
  if (idempotency_key.size() > 200)
    return reply(error_response(400, "invalid_argument", "idempotency_key: at most 200 characters"));
  std::vector<jobs::JobSpec> specs;
  auto add = [&](Result<jobs::JobSpec> spec, const std::string& where) -> bool {
    Status s = spec ? service_.prepare(*spec, who, specs) : Status(spec.error());
    if (!s) {
      Error e = s.error();
      e.message = where + e.message;
      reply(error_response(e));
      return false;
    }
    specs.push_back(std::move(*spec));
    return true;
  };
  if (!batch) {
    if (!add(jobs::parse_job_spec_text(req.body), "")) return;
  } else {
    std::string error;
    auto body = parse_body(req.body, jobs::kMaxJsonDepth + 1, error);
    if (!body) return reply(error_response(400, "invalid_argument", error));
    if (!body->is_object() || body->size() != 1 || !body->contains("jobs") || !(*body)["jobs"].is_array())
      return reply(error_response(400, "invalid_argument", R"(batch body must be {"jobs": [...]})"));
    const json& items = (*body)["jobs"];
    if (items.size() > kMaxBatchJobs)
      return reply(error_response(400, "invalid_argument",
                                  "jobs: at most " + std::to_string(kMaxBatchJobs) + " per batch"));
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string where = "jobs[" + std::to_string(i) + "]: ";
      if (!items[i].is_object())
        return reply(error_response(400, "invalid_argument", where + "must be an object"));
      if (!add(jobs::parse_job_spec(items[i]), where)) return;
    }
  }
  service_.submit(std::move(specs), who, [reply, batch](Result<std::vector<jobs::JobId>> ids) {
    if (!ids) return reply(error_response(ids.error()));
    reply(batch ? json_response(201, {{"ids", *ids}}) : json_response(201, {{"id", ids->front()}}));
  }, idempotency_key);
}

HttpResponse Router::job_action(const Route& route, const daemon::Caller& who) {
  static const std::map<std::string, jobs::JobEvent, std::less<>> kActions = {
      {"cancel", jobs::JobEvent::kCancelled},
      {"hold", jobs::JobEvent::kHeld},
      {"release", jobs::JobEvent::kReleased}};
  auto action = kActions.find(route.seg[2]);
  if (action == kActions.end()) return not_found_route();
  auto id = to_int(route.seg[1]);
  if (!id) return error_response(404, "not_found", "job " + route.seg[1] + " not found");
  auto r = service_.act(*id, action->second, who);
  if (!r) return error_response(r.error());
  return json_response(200, job_json(*r, service_.table()));
}

HttpResponse Router::node_action(const HttpRequest& req, const Route& route, const daemon::Caller& who) {
  const std::string& action = route.seg[2];
  if (action == "remove") {
    if (auto st = service_.remove_node(route.seg[1], who); !st) return error_response(st.error());
    return json_response(200, {{"name", route.seg[1]}, {"health", "removed"}, {"removed", true}});
  }
  if (action != "drain" && action != "resume") return not_found_route();
  std::string reason;
  if (!req.body.empty()) {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object())
      return error_response(400, "invalid_argument", "request body must be a JSON object");
    for (auto& [k, v] : body.items()) {
      if (k != "reason")
        return error_response(400, "invalid_argument", k + ": unknown field (known: reason)");
      if (!v.is_string()) return error_response(400, "invalid_argument", "reason: must be a string");
      reason = v.get<std::string>();
    }
  }
  const auto health = action == "drain" ? sched::NodeHealth::kDrain : sched::NodeHealth::kUp;
  if (auto s = service_.set_node_health(route.seg[1], health, reason, who); !s)
    return error_response(s.error());
  return json_response(200, {{"name", route.seg[1]}, {"health", sched::to_string(health)}});
}

}  // namespace railyard::api
