// The router's quota and fair-share routes: what an admin sets on users and projects (a bound on the GPUs
// held at once, fair-share shares), and the fair-share standing passes order jobs by (JobTable::track_usage,
// sched::fair_shares).
#include <cstdint>
#include <map>
#include <unordered_map>

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

QuotaRecord blank(QuotaRecord::Kind kind, const std::string& name) {
  QuotaRecord q;
  q.kind = kind;
  q.name = name;
  return q;
}

int in_map(const std::unordered_map<std::string, int>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

json quota_json(const QuotaRecord& q) {
  return {{"kind", lifecycle::to_string(q.kind)},
          {"name", q.name},
          {"gpus", q.gpus ? json(*q.gpus) : json(nullptr)},
          {"shares", q.shares}};
}

}  // namespace

HttpResponse Router::quota_list() {
  const auto& table = service_.table();
  const auto in_use = table.gpus_in_use();
  json out = json::array();
  for (const auto& [key, q] : table.quotas()) {
    json row = quota_json(q);
    row["in_use"] = in_map(q.kind == QuotaRecord::Kind::kUser ? in_use.users : in_use.projects, q.name);
    out.push_back(std::move(row));
  }
  return json_response(200, {{"quotas", std::move(out)}});
}

// POST /quotas/{kind}/{name} with {"gpus": N or null, "shares": S} (either or both; what is left out stays as
// it was) sets a quota; POST /quotas/{kind}/{name}/lift drops it.
HttpResponse Router::quota_action(Call& call) {
  const Route& route = call.route;
  const auto kind = parse_kind(route.seg[1]);
  if (!kind) return error_response(404, "not_found", "quotas are per user or per project, not " + route.seg[1]);
  const std::string& name = route.seg[2];
  const QuotaRecord* now = service_.table().quota(*kind, name);
  QuotaRecord q = now ? *now : blank(*kind, name);
  if (route.seg.size() == 4) {
    if (route.seg[3] != "lift") return error_response(404, "not_found", "no such route");
    q.lifted = true;
  } else {
    auto parsed = parse_json_bounded(call.req.body);
    if (!parsed) return error_response(400, "invalid_argument", "request body: " + parsed.error().message);
    if (!parsed->is_object() || parsed->empty())
      return error_response(400, "invalid_argument", R"(body must be {"gpus": N or null, "shares": S}, one or both)");
    for (auto& [k, v] : parsed->items()) {
      if (k == "gpus") {
        if (v.is_null()) {
          q.gpus.reset();
          continue;
        }
        if (!v.is_number_integer())
          return error_response(400, "invalid_argument", "gpus: must be a whole number of GPUs, or null for no bound");
        q.gpus = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
      } else if (k == "shares") {
        if (!v.is_number()) return error_response(400, "invalid_argument", "shares: must be a number");
        q.shares = v.get<double>();
      } else {
        return error_response(400, "invalid_argument", k + ": unknown field (known: gpus, shares)");
      }
    }
  }
  if (auto s = service_.set_quota(q, *call.who, call.audit_as(200)); !s) return error_response(s.error());
  const QuotaRecord* after = service_.table().quota(*kind, name);
  json out = quota_json(after ? *after : blank(*kind, name));
  out["lifted"] = after == nullptr;
  return json_response(200, out);
}

// GET /fairshare?by=user|project: each party's decayed usage, its part of the total, its shares and factor as
// the next pass computes them (sched::fair_shares: the parties with usage and those with jobs in the pass).
HttpResponse Router::fair_share(const Route& route) {
  auto it = route.query.find("by");
  const std::string by = it == route.query.end() ? "user" : it->second;
  if (by != "user" && by != "project") return error_response(400, "invalid_argument", "by: user or project");
  const bool user = by == "user";
  const auto& table = service_.table();
  const int64_t now = service_.now();
  const auto usage = table.usage_at(now);
  std::unordered_map<std::string, double> shares;
  for (const auto& [key, q] : table.quotas())
    if (key.first == (user ? QuotaRecord::Kind::kUser : QuotaRecord::Kind::kProject)) shares[q.name] = q.shares;
  const auto parties = sched::fair_shares(user ? usage.users : usage.projects, shares, table.pass_pending(), user);
  const auto in_use = table.gpus_in_use();
  const auto& held = user ? in_use.users : in_use.projects;
  json rows = json::array();
  for (const auto& [who, f] : std::map<std::string, sched::FairShare>(parties.begin(), parties.end()))
    rows.push_back({{by, who},
                    {"usage_gpu_hours", f.usage / 3600.0},
                    {"usage_share", f.usage_share},
                    {"shares", f.shares},
                    {"fair_share", f.share},
                    {"factor", f.factor},
                    {"gpus_in_use", in_map(held, who)},
                    {"pending_jobs", f.pending_jobs}});
  return json_response(200, {{"by", by},
                             {"time", now},
                             {"half_life_s", table.usage_half_life_s()},
                             {"rows", std::move(rows)}});
}

}  // namespace railyard::api
