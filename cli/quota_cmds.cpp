// `railyard quota [list|set|lift]`, `railyard fairshare`.
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/job_util.hpp"
#include "cli/output.hpp"

namespace railyard::cli {
namespace {

using Json = nlohmann::json;

struct QuotaOptions {
  ServerOptions server;
  std::string user, project, gpus;
  double shares = 0;  // 0: not given
  bool json = false;
};

// "user/alice" or "project/vision": the API path part that --user or --project (exactly one) names.
std::string quota_path(const QuotaOptions& o) {
  if (o.user.empty() == o.project.empty()) fail_usage("give --user NAME or --project NAME (one of them)");
  return o.user.empty() ? "project/" + url_encode(o.project) : "user/" + url_encode(o.user);
}

void run_quota_list(const QuotaOptions& o) {
  Api api(o.server);
  const Json answer = api.get("/quotas");
  if (o.json) return print_json(answer);
  const Json rows = answer.value("quotas", Json::array());
  if (rows.empty()) {
    std::cerr << "railyard: no quotas set (every user and project may use every GPU, with 1 share)" << std::endl;
    return;
  }
  Table t({"KIND", "NAME", "GPUS", "IN USE", "SHARES"});
  for (const auto& q : rows) {
    const bool bounded = q["gpus"].is_number_integer();
    const int used = q.value("in_use", 0);
    const bool full = bounded && used >= q["gpus"].get<int>();
    t.add({q.value("kind", ""), q.value("name", ""), bounded ? std::to_string(q["gpus"].get<int>()) : "-",
           std::to_string(used), cell(q.value("shares", Json(1)))},
          {Color::kNone, Color::kNone, Color::kNone, full ? Color::kYellow : Color::kNone, Color::kNone});
  }
  t.print();
}

// "at most 64 GPUs at once, 2 shares" (or "no GPU bound, 1 share")
std::string describe(const Json& q) {
  std::string out = q["gpus"].is_number_integer() ? "at most " + std::to_string(q["gpus"].get<int>()) + " GPUs at once"
                                                  : "no GPU bound";
  const double shares = q.value("shares", 1.0);
  return out + ", " + cell(q.value("shares", Json(1))) + (shares == 1 ? " share" : " shares");
}

void run_quota_set(const QuotaOptions& o) {
  const std::string path = quota_path(o);
  Json body = Json::object();
  if (!o.gpus.empty()) {
    if (o.gpus == "none") {
      body["gpus"] = nullptr;
    } else {
      long long n = -1;
      const auto [end, ec] = std::from_chars(o.gpus.data(), o.gpus.data() + o.gpus.size(), n);
      if (ec != std::errc() || end != o.gpus.data() + o.gpus.size() || n < 0 || n > 1'000'000)
        fail_usage("--gpus " + o.gpus + ": a number of GPUs 0..1000000, or none");
      body["gpus"] = n;
    }
  }
  if (o.shares != 0) body["shares"] = o.shares;
  if (body.empty()) fail_usage("give --gpus N (or none) and/or --shares S");
  Api api(o.server);
  api.require_token();
  const Json q = api.post("/quotas/" + path, body);
  if (o.json) return print_json(q);
  std::cout << q.value("kind", "") << " " << q.value("name", "") << ": "
            << (q.value("lifted", false) ? std::string("no quota (no GPU bound, 1 share)") : describe(q)) << "\n";
}

void run_quota_lift(const QuotaOptions& o) {
  const std::string path = quota_path(o);
  Api api(o.server);
  api.require_token();
  const Json q = api.post("/quotas/" + path + "/lift");
  if (o.json) return print_json(q);
  std::cout << q.value("kind", "") << " " << q.value("name", "") << ": quota lifted\n";
}

void add_quota_command(CLI::App& app) {
  auto* quota = app.add_subcommand("quota", "GPU quotas of users and projects: list, set, lift (admin)");
  quota->require_subcommand(1);
  auto list = std::make_shared<QuotaOptions>();
  auto* cmd = quota->add_subcommand("list", "Every quota and the GPUs its user or project holds now");
  cmd->add_flag("--json", list->json, "The API's JSON");
  add_server_options(*cmd, list->server);
  cmd->callback([list] { run_quota_list(*list); });

  auto set = std::make_shared<QuotaOptions>();
  cmd = quota->add_subcommand("set", "Bound the GPUs a user's or a project's jobs hold at once, or set its shares");
  cmd->add_option("--gpus", set->gpus, "At most this many GPUs at once (whole GPUs and MIG slices, 0..1000000); none: no bound");
  cmd->add_option("--shares", set->shares, "Fair-share shares (default 1): its part of the cluster is its shares over all")
      ->check(CLI::Range(1e-6, 1e6));
  cmd->add_option("--user", set->user, "The user");
  cmd->add_option("--project", set->project, "The project");
  cmd->add_flag("--json", set->json, "The API's JSON");
  add_server_options(*cmd, set->server);
  cmd->footer(R"X(Admin only. What is not given stays as it was. Jobs that would take their user or project past
its GPU bound wait, saying so (`railyard show`: "quota of user alice reached (56 of 64 GPUs in use, needs
16)"); running jobs stay. Shares weigh the fair-share factor (`railyard fairshare`): a project with 3 shares
is due three times the GPU-time of one with 1.

Examples:
  railyard quota set --user alice --gpus 64
  railyard quota set --project vision --gpus 256 --shares 3
  railyard quota set --project vision --gpus none

Exit codes: 0 ok, 1 scheduler unreachable, 2 bad arguments, 3 not an admin.)X");
  cmd->callback([set] { run_quota_set(*set); });

  auto lift = std::make_shared<QuotaOptions>();
  cmd = quota->add_subcommand("lift", "Remove a user's or a project's quota (no GPU bound, 1 share)");
  cmd->add_option("--user", lift->user, "The user");
  cmd->add_option("--project", lift->project, "The project");
  cmd->add_flag("--json", lift->json, "The API's JSON");
  add_server_options(*cmd, lift->server);
  cmd->footer(R"(Admin only.

Examples:
  railyard quota lift --user alice

Exit codes: 0 ok, 1 scheduler unreachable, 2 bad arguments, 3 no such quota or not an admin.)");
  cmd->callback([lift] { run_quota_lift(*lift); });
}

struct FairShareOptions {
  ServerOptions server;
  std::string by = "user";
  bool json = false;
};

std::string fixed(double v, const char* format) {
  char b[32];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

void run_fairshare(const FairShareOptions& o) {
  Api api(o.server);
  const Json answer = api.get("/fairshare?by=" + url_encode(o.by));
  if (o.json) return print_json(answer);
  std::string by = o.by;
  for (char& c : by) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  Table t({by, "USAGE GPU-H", "USAGE SHARE", "SHARES", "FAIR SHARE", "FACTOR", "GPUS IN USE", "PENDING"});
  for (const auto& r : answer.value("rows", Json::array()))
    t.add({r.value(o.by, ""), fixed(r.value("usage_gpu_hours", 0.0), "%.1f"),
           fixed(100 * r.value("usage_share", 0.0), "%.1f %%"), cell(r.value("shares", Json(1))),
           fixed(100 * r.value("fair_share", 0.0), "%.1f %%"),
           fixed(r.value("factor", 0.0), "%.3f"), std::to_string(r.value("gpus_in_use", 0)),
           std::to_string(r.value("pending_jobs", 0))});
  if (t.empty()) {
    std::cerr << "railyard: no usage and no pending jobs yet" << std::endl;
    return;
  }
  t.print();
}

void add_fairshare_command(CLI::App& app) {
  auto o = std::make_shared<FairShareOptions>();
  auto* cmd = app.add_subcommand("fairshare", "Fair share: each user's or project's decayed GPU use and priority factor");
  cmd->add_option("--by", o->by, "user or project")->check(CLI::IsMember({"user", "project"}))->capture_default_str();
  cmd->add_flag("--json", o->json, "The API's JSON");
  add_server_options(*cmd, o->server);
  cmd->footer(R"(USAGE GPU-H is GPU-hours, each hour's weight halved every --fairshare-half-life (7 days by default);
FAIR SHARE is SHARES over every listed party's (`railyard quota set --shares`); FACTOR is
2^(-USAGE SHARE / FAIR SHARE), 1 for a party that used nothing: the scheduler's priority adds
fairshare weight x (user factor + project factor) / 2.

Examples:
  railyard fairshare
  railyard fairshare --by project --json

Exit codes: 0 ok, 1 scheduler unreachable, 2 bad arguments.)");
  cmd->callback([o] { run_fairshare(*o); });
}

}  // namespace

void add_quota_commands(CLI::App& app) {
  add_quota_command(app);
  add_fairshare_command(app);
}

}  // namespace railyard::cli
