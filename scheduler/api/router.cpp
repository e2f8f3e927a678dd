#include "scheduler/api/router.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <variant>

#include "common/json_text.hpp"
#include "jobs/spec_json.hpp"
#include "scheduler/api/auth.hpp"
#include "scheduler/api/router_util.hpp"
#include "scheduler/api/views.hpp"

namespace railyard::api {

using nlohmann::json;

namespace {

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
    case ErrorCode::kUnavailable: {
      // Passing (a store or etcd out of reach): the request may be sent again as it is.
      HttpResponse r = error_response(503, "unavailable", e.message);
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
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

// GET /health, /version, /metrics, /topology, /utilization, /nodes: the cluster-wide reads.
HttpResponse Router::cluster_read(const Route& route) {
  const auto& table = service_.table();
  const std::string r = route.seg.empty() ? "metrics" : route.seg[0];  // /metrics is outside /api/v1
  if (r == "utilization") return utilization(route.query, service_);
  if (r == "nodes") return json_response(200, {{"nodes", nodes_json(table)}});
  if (r == "topology") return {200, "application/json", options_.topology_json, {}};
  if (r == "health") return json_response(200, {{"status", "ok"}});
  if (r == "version") return json_response(200, {{"version", options_.version}, {"api", "v1"}});
  std::string text = metrics_text(table, service_.stats());
  if (hub_) text += agent_metrics_text(*hub_);
  return {200, "text/plain; version=0.0.4", std::move(text), {}};
}

HttpResponse Router::job_show(const Route& route, const daemon::Caller* who) {
  const auto& table = service_.table();
  auto id = to_int(route.seg[1]);
  const store::JobRecord* r = id ? table.find(*id) : nullptr;
  if (!r) return error_response(404, "not_found", "job " + route.seg[1] + " not found");
  json job = job_json(*r, table, who);
  job["estimate"] = placement_estimate_json(*r, table.cluster());  // here only: lists stay cheap
  return json_response(200, job);
}

namespace {

// The filters and the page of GET /api/v1/jobs.
struct JobQuery {
  std::set<jobs::JobState> states;
  std::optional<std::string> user, name;
  jobs::JobId array = 0;  // the tasks of this array only
  int64_t limit = kDefaultPageSize;
  int64_t after = 0, before = std::numeric_limits<int64_t>::max();  // cursors: after < id < before
  bool desc = false;                                                 // newest first
};

// The job query of a request's query parameters, or the 400 (403) that refuses it. `who`: the caller when
// the scheduler runs with --private (else null); a user then sees only their own jobs.
std::variant<JobQuery, HttpResponse> parse_job_query(const std::map<std::string, std::string>& query,
                                                     const daemon::Caller* who) {
  auto param = [&](const char* k) -> std::optional<std::string> {
    auto it = query.find(k);
    return it == query.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  JobQuery q;
  if (auto v = param("state"); v && !v->empty()) {
    std::string_view rest = *v;
    while (!rest.empty()) {
      std::string one(rest.substr(0, rest.find(',')));
      rest.remove_prefix(std::min(rest.size(), one.size() + 1));
      for (auto& ch : one) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      auto st = jobs::parse_state(one);
      if (!st) return error_response(400, "invalid_argument", "state=" + one + ": unknown state");
      q.states.insert(*st);
    }
  }
  q.user = param("user");
  if (who && !who->admin()) {
    if (q.user && !q.user->empty() && *q.user != who->user)
      return error_response(
          403, "forbidden",
          "user=" + *q.user + ": with --private a user sees only their own jobs (" + who->user + "'s)");
    q.user = who->user;
  }
  q.name = param("name");
  if (auto v = param("array")) {
    auto n = to_int(*v);
    if (!n || *n < 1) return error_response(400, "invalid_argument", "array=" + *v + ": must be a job id");
    q.array = *n;
  }
  if (auto v = param("limit")) {
    auto n = to_int(*v);
    if (!n || *n < 1 || *n > kMaxPageSize)
      return error_response(400, "invalid_argument",
                            "limit=" + *v + ": must be 1.." + std::to_string(kMaxPageSize));
    q.limit = *n;
  }
  for (auto [key, bound] : {std::pair{"after", &q.after}, std::pair{"before", &q.before}}) {
    if (auto v = param(key)) {
      auto n = to_int(*v);
      if (!n || *n < 0)
        return error_response(400, "invalid_argument", std::string(key) + "=" + *v + ": must be a job id");
      *bound = *n;
    }
  }
  if (auto v = param("order")) {
    if (*v != "asc" && *v != "desc")
      return error_response(400, "invalid_argument", "order=" + *v + ": must be asc or desc");
    q.desc = *v == "desc";
  }
  // An array's tasks come after it (their ids are taken when they are created): the rows before it are skipped.
  if (q.array != 0) q.after = std::max(q.after, q.array);
  return q;
}

}  // namespace

HttpResponse Router::list_jobs(const Route& route, const daemon::Caller* who) {
  auto parsed = parse_job_query(route.query, options_.private_reads ? who : nullptr);
  if (auto* refused = std::get_if<HttpResponse>(&parsed)) return std::move(*refused);
  const JobQuery& q = std::get<JobQuery>(parsed);
  const auto& table = service_.table();
  const auto& all = table.jobs();
  json out = json::array();
  json next = nullptr;
  // Filters are checked row by row from the cursor: a page reads only the rows up to its last match.
  auto take = [&](const store::JobRecord& r) {
    if ((!q.states.empty() && !q.states.count(r.state)) || (q.user && !q.user->empty() && r.spec.user != *q.user) ||
        (q.name && !q.name->empty() && r.spec.name != *q.name) || (q.array != 0 && r.spec.array_job != q.array))
      return true;
    if (static_cast<int64_t>(out.size()) == q.limit) {
      next = out.back()["id"];
      return false;
    }
    out.push_back(job_json(r, table, who));
    return true;
  };
  if (q.desc) {
    for (auto it = std::make_reverse_iterator(all.lower_bound(q.before)); it != all.rend() && it->first > q.after;
         ++it)
      if (!take(it->second)) break;
    return json_response(200, {{"jobs", std::move(out)}, {"next_before", next}});
  }
  for (auto it = all.upper_bound(q.after); it != all.end() && it->first < q.before; ++it)
    if (!take(it->second)) break;
  return json_response(200, {{"jobs", std::move(out)}, {"next_after", next}});
}

// Single submits and batches go through one strict parser (jobs::parse_json_text: duplicate keys, depth,
// size); a batch's entries are then read and checked with their index in front of any error.
void Router::submit(Call& call, bool batch) {
  const HttpRequest& req = call.req;
  const daemon::Caller& who = *call.who;
  const Reply& reply = call.reply;
  const std::string idempotency_key = call.route.query["idempotency_key"];
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
    auto body = jobs::parse_json_text(req.body, kMaxBodyLimit, jobs::kMaxJsonDepth + 1, "request body");
    if (!body) return reply(error_response(body.error()));
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
  service_.submit(
      std::move(specs), who,
      [reply, batch](Result<std::vector<jobs::JobId>> ids) {
        if (!ids) return reply(error_response(ids.error()));
        reply(batch ? json_response(201, {{"ids", *ids}}) : json_response(201, {{"id", ids->front()}}));
      },
      idempotency_key, call.audit_as(201));
}

HttpResponse Router::job_action(Call& call) {
  static const std::map<std::string, jobs::JobEvent, std::less<>> kActions = {
      {"cancel", jobs::JobEvent::kCancelled},
      {"hold", jobs::JobEvent::kHeld},
      {"release", jobs::JobEvent::kReleased}};
  const Route& route = call.route;
  auto action = kActions.find(route.seg[2]);
  if (action == kActions.end()) return error_response(404, "not_found", "no such route");
  auto id = to_int(route.seg[1]);
  if (!id) return error_response(404, "not_found", "job " + route.seg[1] + " not found");
  auto r = service_.act(*id, action->second, *call.who, call.audit_as(200));
  if (!r) return error_response(r.error());
  return json_response(200, job_json(*r, service_.table(), &*call.who));
}

HttpResponse Router::node_action(Call& call) {
  const HttpRequest& req = call.req;
  const Route& route = call.route;
  const daemon::Caller& who = *call.who;
  const std::string& action = route.seg[2];
  if (action == "remove") {
    if (auto st = service_.remove_node(route.seg[1], who, call.audit_as(200)); !st)
      return error_response(st.error());
    return json_response(200, {{"name", route.seg[1]}, {"health", "removed"}, {"removed", true}});
  }
  if (action != "drain" && action != "resume") return error_response(404, "not_found", "no such route");
  std::string reason;
  if (!req.body.empty()) {
    auto parsed = parse_json_bounded(req.body);
    if (!parsed) return error_response(400, "invalid_argument", "request body: " + parsed.error().message);
    if (!parsed->is_object())
      return error_response(400, "invalid_argument", "request body must be a JSON object");
    for (auto& [k, v] : parsed->items()) {
      if (k != "reason")
        return error_response(400, "invalid_argument", k + ": unknown field (known: reason)");
      if (!v.is_string()) return error_response(400, "invalid_argument", "reason: must be a string");
      reason = v.get<std::string>();
    }
  }
  const auto health = action == "drain" ? sched::NodeHealth::kDrain : sched::NodeHealth::kUp;
  if (auto s = service_.set_node_health(route.seg[1], health, reason, who, call.audit_as(200)); !s)
    return error_response(s.error());
  return json_response(200, {{"name", route.seg[1]}, {"health", sched::to_string(health)}});
}

}  // namespace railyard::api
