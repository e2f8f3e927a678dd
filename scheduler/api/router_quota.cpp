// The router's quota and fair-share routes: quotas an admin sets on users and projects (GPUs held at once),
// and the fair-share usage passes order jobs by (JobTable::track_usage, sched::fair_share_factor).
#include <algorithm>
#include <map>
#include <set>

#include "common/json_text.hpp"
#include "scheduler/api/router.hpp"
#include "scheduler/api/router_util.hpp"
#include "scheduler/queue/priority.hpp"

namespace railyard::api {

using nlohmann::json;
using lifecycle::QuotaRecord;

namespace {

std::optional<QuotaRecord::Kind> parse_kind(const std::string& s) {
  if (s == "user") return QuotaRecord::Kind::kUser;
  if (s == "project") return QuotaRecord::Kind::kProject;
  return std::nullopt;
}

int in_map(const std::unordered_map<std::string, int>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

}  // namespace

HttpResponse Router::quota_list() {
  const auto& table = service_.table();
  const auto in_use = table.gpus_in_use();
  json out = json::array();
  for (auto kind : {QuotaRecord::Kind::kUser, QuotaRecord::Kind::kProject}) {
    const bool user = kind == QuotaRecord::Kind::kUser;
    const auto& quotas = user ? table.user_quotas() : table.project_quotas();
    const std::map<std::string, int> sorted(quotas.begin(), quotas.end());
    for (const auto& [name, gpus] : sorted)
      out.push_back({{"kind", lifecycle::to_string(kind)},
                     {"name", name},
                     {"gpus", gpus},
                     {"in_use", in_map(user ? in_use.users : in_use.projects, name)}});
  }
  return json_response(200, {{"quotas", std::move(out)}});
}

// POST /quotas/{kind}/{name} with {"gpus": N} sets a quota; POST /quotas/{kind}/{name}/lift lifts it.
HttpResponse Router::quota_action(Call& call) {
  const Route& route = call.route;
  const auto kind = parse_kind(route.seg[1]);
  if (!kind) return error_response(404, "not_found", "quotas are per user or per project, not " + route.seg[1]);
  QuotaRecord q{*kind, route.seg[2], std::nullopt};
  const bool lift = route.seg.size() == 4;
  if (lift && route.seg[3] != "lift") return error_response(404, "not_found", "no such route");
  if (!lift) {
    auto parsed = parse_json_bounded(call.req.body);
    if (!parsed) return error_response(400, "invalid_argument", "request body: " + parsed.error().message);
    if (!parsed->is_object() || !parsed->contains("gpus"))
      return error_response(400, "invalid_argument", R"(body must be {"gpus": N})");
    for (auto& [k, v] : parsed->items()) {
      if (k != "gpus") return error_response(400, "invalid_argument", k + ": unknown field (known: gpus)");
      if (!v.is_number_integer())
        return error_response(400, "invalid_argument", "gpus: must be a whole number of GPUs");
      const auto n = v.get<int64_t>();
      if (n < 0 || n > daemon::Service::kMaxQuotaGpus)
        return error_response(400, "invalid_argument",
                              "gpus: " + std::to_string(n) + " is out of range (0 to " +
                                  std::to_string(daemon::Service::kMaxQuotaGpus) + ")");
      q.gpus = static_cast<int>(n);
    }
  }
  json out = {{"kind", route.seg[1]}, {"name", q.name}, {"gpus", q.gpus ? json(*q.gpus) : json(nullptr)}};
  if (auto s = service_.set_quota(std::move(q), *call.who, call.audit_as(200)); !s) return error_response(s.error());
  return json_response(200, out);
}

// GET /fairshare?by=user|project: each party's decayed usage, its part of the total, and its fair-share
// factor as the next pass computes it (the parties: those with usage and those with jobs in the pass).
HttpResponse Router::fair_share(const Route& route) {
  auto it = route.query.find("by");
  const std::string by = it == route.query.end() ? "user" : it->second;
  if (by != "user" && by != "project") return error_response(400, "invalid_argument", "by: user or project");
  const bool user = by == "user";
  const auto& table = service_.table();
  const int64_t now = service_.now();
  const auto usage = table.usage_at(now);
  const auto& used = user ? usage.users : usage.projects;
  const auto in_use = table.gpus_in_use();
  const auto& held = user ? in_use.users : in_use.projects;
  std::map<std::string, int64_t> pending;  // every party the pass counts, with its waiting jobs
  for (const auto& [who, u] : used) pending.emplace(who, 0);
  for (const auto& p : table.pass_pending()) ++pending[user ? p.spec->user : p.spec->project];
  double total = 0;
  for (const auto& [who, u] : used) total += u;
  json rows = json::array();
  for (const auto& [who, waiting] : pending) {
    auto u = used.find(who);
    const double mine = u == used.end() ? 0.0 : u->second;
    rows.push_back({{by, who},
                    {"usage_gpu_hours", mine / 3600.0},
                    {"usage_share", total > 0 ? mine / total : 0.0},
                    {"fair_share", pending.empty() ? 1.0 : 1.0 / static_cast<double>(pending.size())},
                    {"factor", sched::fair_share_factor(mine, total, pending.size())},
                    {"gpus_in_use", in_map(held, who)},
                    {"pending_jobs", waiting}});
  }
  return json_response(200, {{"by", by},
                             {"time", now},
                             {"half_life_s", table.usage_half_life_s()},
                             {"rows", std::move(rows)}});
}

}  // namespace railyard::api
