// The router's routes beyond the first slice: job events, metrics, runs and logs; node show;
// accounting; the exec route of railyard-agent-exec.
#include <map>
#include <set>

#include "common/json_text.hpp"
#include "scheduler/api/auth.hpp"
#include "scheduler/api/router.hpp"
#include "scheduler/api/router_util.hpp"
#include "scheduler/api/views.hpp"
#include "jobs/container.hpp"

namespace railyard::api {

using nlohmann::json;

namespace {

constexpr int kMaxRows = 10'000;
constexpr int64_t kMaxLogBytes = int64_t{1} << 20;

std::optional<std::string> param(const std::map<std::string, std::string>& q, const char* k) {
  auto it = q.find(k);
  return it == q.end() ? std::nullopt : std::optional<std::string>(it->second);
}

}  // namespace

HttpResponse Router::job_events(const Route& route) {
  auto id = to_int(route.seg[1]);
  if (!id || !service_.table().find(*id))
    return error_response(404, "not_found", "job " + route.seg[1] + " not found");
  auto ev = service_.store().events(lifecycle::job_subject(*id), kMaxRows);
  if (!ev) return error_response(ev.error());
  json out = json::array();
  for (const auto& e : *ev)
    out.push_back({{"time", e.time}, {"time_ms", e.time_ms}, {"actor", e.actor}, {"what", e.what}});
  return json_response(200, {{"job", *id}, {"events", std::move(out)}});
}

HttpResponse Router::job_metrics(const Route& route) {
  auto id = to_int(route.seg[1]);
  const store::JobRecord* r = id ? service_.table().find(*id) : nullptr;
  if (!r) return error_response(404, "not_found", "job " + route.seg[1] + " not found");
  auto samples = service_.store().metrics(*id, kMaxRows);
  if (!samples) return error_response(samples.error());
  json out = json::array();
  for (const auto& m : *samples) {
    json data = json::parse(m.data, nullptr, false);
    out.push_back({{"alloc", m.alloc}, {"key", m.key}, {"t", m.time}, {"data", std::move(data)}});
  }
  json ttt = r->time_to_train_s ? json(*r->time_to_train_s) : json(nullptr);
  return json_response(200, {{"job", *id}, {"time_to_train_s", ttt}, {"samples", std::move(out)}});
}

HttpResponse Router::job_runs(const Route& route) {
  auto id = to_int(route.seg[1]);
  const auto& table = service_.table();
  if (!id || !table.find(*id)) return error_response(404, "not_found", "job " + route.seg[1] + " not found");
  json out = json::array();
  for (auto it = table.runs().lower_bound({*id, 0}); it != table.runs().end() && it->first.first == *id;
       ++it) {
    const store::RunRecord& r = it->second;
    out.push_back({{"attempt", r.attempt},
                   {"alloc", daemon::alloc_id(r.job, r.attempt)},
                   {"nodes", r.nodes},
                   {"gpus", r.gpu_count()},
                   {"start_time", r.start},
                   {"end_time", r.end ? json(*r.end) : json(nullptr)},
                   {"outcome", r.outcome.empty() ? json(nullptr) : json(r.outcome)}});
  }
  return json_response(200, {{"job", *id}, {"runs", std::move(out)}});
}

// Owner or admin: checked by the route table (Access::kOwnerOrAdmin).
void Router::job_logs(const Route& route, const Reply& reply) {
  auto id = to_int(route.seg[1]);
  const store::JobRecord* r = id ? service_.table().find(*id) : nullptr;
  if (!r) return reply(error_response(404, "not_found", "job " + route.seg[1] + " not found"));
  auto num = [&](const char* k, int64_t dflt) -> std::optional<int64_t> {
    auto v = param(route.query, k);
    return v ? to_int(*v) : std::optional<int64_t>(dflt);
  };
  const auto rank = num("rank", 0), offset = num("offset", 0), max_bytes = num("max_bytes", 65536);
  const std::string stream = param(route.query, "stream").value_or("out");
  if (!rank || *rank < 0 || !offset || *offset < 0 || !max_bytes || *max_bytes < 1 ||
      *max_bytes > kMaxLogBytes || (stream != "out" && stream != "err"))
    return reply(error_response(400, "invalid_argument",
                                "rank, offset >= 0; max_bytes 1..1048576; stream out or err"));
  if (!hub_) return reply(error_response(503, "unavailable", "no agent protocol"));
  hub_->request_logs(*r, static_cast<int>(*rank), stream, *offset, *max_bytes,
                     [reply](int status, json body) { reply(json_response(status, body)); });
}

void Router::node_images(const HttpRequest& req, const Route& route, const Reply& reply) {
  if (!hub_) return reply(error_response(503, "unavailable", "no agent protocol"));
  const std::string& node = route.seg[1];
  if (service_.table().cluster().find_node(node) < 0)
    return reply(error_response(404, "not_found", "node " + node + " not found"));
  std::optional<std::string> pull;
  if (req.method == "POST") {
    auto body = parse_json_bounded(req.body);
    if (!body || !body->is_object() || !body->contains("image") || !(*body)["image"].is_string())
      return reply(error_response(400, "invalid_argument", "expected {\"image\": \"REGISTRY/NAME:TAG\"}"));
    auto image = jobs::parse_image((*body)["image"].get<std::string>());
    if (!image) return reply(error_response(400, "invalid_argument", "image: " + image.error().message));
    pull = *image;
  }
  const int ok = pull ? 202 : 200;
  hub_->request_images(node, pull, [reply, ok](int status, json body) {
    reply(json_response(status == 200 ? ok : status, body));
  });
}

void Router::alloc_exec(const HttpRequest& req, const Route& route, const Reply& reply) {
  if (!hub_) return reply(error_response(503, "unavailable", "no agent protocol"));
  auto token = bearer_token(req.authorization);
  if (!token) return reply(error_response(401, "unauthorized", "an exec token is required"));
  auto parsed = parse_json_bounded(req.body);
  if (!parsed)
    return reply(error_response(400, "invalid_argument", "request body: " + parsed.error().message));
  const json& body = *parsed;
  if (!body.is_object() || !body.contains("node") || !body["node"].is_string() || !body.contains("argv") ||
      !body["argv"].is_array() || body["argv"].empty())
    return reply(error_response(400, "invalid_argument", R"(body must be {"node": "...", "argv": [...]})"));
  std::vector<std::string> argv;
  for (const auto& a : body["argv"]) {
    if (!a.is_string()) return reply(error_response(400, "invalid_argument", "argv: strings only"));
    argv.push_back(a);
  }
  hub_->request_exec(route.seg[1], *token, body["node"], std::move(argv),
                     [reply](int status, json b) { reply(json_response(status, b)); });
}

HttpResponse Router::node_show(const Route& route) {
  const auto& table = service_.table();
  const auto& c = table.cluster();
  const topology::NodeId n = c.find_node(route.seg[1]);
  if (n < 0) return error_response(404, "not_found", "node " + route.seg[1] + " not found");
  json node;
  for (auto& j : nodes_json(table))
    if (j["name"] == route.seg[1]) node = std::move(j);
  json job_ids = json::array();
  for (const auto& [id, r] : table.jobs())
    if ((r.state == jobs::JobState::kStarting || r.state == jobs::JobState::kRunning) &&
        std::find(r.nodes.begin(), r.nodes.end(), route.seg[1]) != r.nodes.end())
      job_ids.push_back(id);
  node["jobs"] = std::move(job_ids);
  node["connected"] = hub_ && hub_->connected(route.seg[1]);
  auto hb = hub_ ? hub_->last_heartbeat(route.seg[1]) : std::nullopt;
  node["last_heartbeat"] = hb ? json(*hb) : json(nullptr);
  return json_response(200, node);
}

// GPU-seconds (and hours) of the runs that overlap [since, until), by user or project: every run of a job
// counts (a requeued job has several, see JobTable::runs), each from its start to its end (or now while it
// lasts), times its GPUs (whole GPUs and MIG slices).
HttpResponse Router::accounting(const Route& route) {
  const int64_t now = service_.now();
  auto since_v = param(route.query, "since"), until_v = param(route.query, "until");
  const auto since = since_v ? to_int(*since_v) : std::optional<int64_t>(0);
  const auto until = until_v ? to_int(*until_v) : std::optional<int64_t>(now);
  const std::string by = param(route.query, "by").value_or("user");
  if (!since || !until || *until < *since || (by != "user" && by != "project"))
    return error_response(400, "invalid_argument",
                          "since/until: unix seconds, since <= until; by: user or project");
  struct Row {
    double gpu_seconds = 0;
    std::set<jobs::JobId> jobs;
    int64_t runs = 0;
  };
  std::map<std::string, Row> rows;
  const auto& table = service_.table();
  for (const auto& [key, run] : table.runs()) {
    const store::JobRecord* r = table.find(run.job);
    if (!r) continue;
    const int64_t from = std::max(run.start, *since), to = std::min(run.end.value_or(now), *until);
    if (to <= from) continue;
    Row& row = rows[by == "user" ? r->spec.user : r->spec.project];
    row.gpu_seconds += static_cast<double>(run.gpu_count()) * static_cast<double>(to - from);
    row.jobs.insert(run.job);
    ++row.runs;
  }
  json out = json::array();
  for (const auto& [k, v] : rows)
    out.push_back({{by, k},
                   {"gpu_seconds", v.gpu_seconds},
                   {"gpu_hours", v.gpu_seconds / 3600.0},
                   {"jobs", static_cast<int64_t>(v.jobs.size())},
                   {"runs", v.runs}});
  return json_response(200, {{"since", *since}, {"until", *until}, {"by", by}, {"rows", std::move(out)}});
}

}  // namespace railyard::api
