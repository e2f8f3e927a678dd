// `railyard queue`, `show`, `cancel`, `hold`, `release`, `history`.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <memory>

#include "cli/cli_util.hpp"
#include "cli/job_util.hpp"
#include "cli/output.hpp"
#include "common/hostlist.hpp"
#include "topology/cost.hpp"
#include "topology/io.hpp"

namespace railyard::cli {
namespace {

using Json = nlohmann::json;

const std::vector<std::string> kActiveStates = {"PENDING", "HELD", "STARTING", "RUNNING"};

// --- queue -------------------------------------------------------------------------------------------

struct QueueOptions {
  ServerOptions server;
  std::string user, state;
  int64_t array = 0;
  bool me = false, all = false, json = false;
};

// The user `--me` means: the scheduler's whoami route when served, else RAILYARD_USER, else $USER.
std::string current_user(Api& api) {
  if (auto who = api.call("GET", "/whoami"); who && who->is_object() && who->contains("user"))
    return (*who)["user"].get<std::string>();
  for (const char* var : {"RAILYARD_USER", "USER", "LOGNAME"})
    if (const char* v = std::getenv(var); v && *v) return v;
  fail_usage("--me: cannot tell who you are; use --user NAME");
}

std::string gpus_cell(const Json& job) {
  const int gpus = job.value("gpus", 0);
  const auto& spec = job.contains("spec") ? job["spec"] : Json::object();
  if (spec.is_object() && spec.value("nodes", 0) > 0 && spec.value("gpus_per_node", 0) > 0)
    return std::to_string(gpus) + " (" + std::to_string(spec.value("nodes", 0)) + "x" +
           std::to_string(spec.value("gpus_per_node", 0)) + ")";
  return std::to_string(gpus);
}

// "array 0-999: 40 active, 60 ended of 1000" for an array, "" for anything else.
std::string array_progress(const Json& job) {
  const Json& a = job.contains("array_tasks") ? job["array_tasks"] : Json();
  if (!a.is_object()) return "";
  const int64_t ended = a.value("completed", int64_t{0}) + a.value("failed", int64_t{0});
  std::string out = "array " + job["spec"].value("array", "") + ": " + std::to_string(a.value("active", 0)) +
                    " active, " + std::to_string(ended) + " ended of " + std::to_string(a.value("total", 0));
  if (a.value("failed", 0) > 0) out += " (" + std::to_string(a.value("failed", 0)) + " not completed)";
  return out;
}

// "train[7]" for task 7 of an array, the name otherwise.
std::string name_cell(const Json& job) {
  std::string name = job.value("name", "");
  if (job.contains("array_task") && job["array_task"].is_number())
    name += "[" + cell(job["array_task"]) + "]";
  return name;
}

// A waiting job's reason, with when its reservation starts it ("starts in ~4 min, 00:19").
std::string reason_text(const Json& job) {
  std::string reason = job.contains("reason") && job["reason"].is_string() ? job["reason"].get<std::string>() : "";
  if (job.value("state", "") == "PENDING" && job.contains("estimated_start") && job["estimated_start"].is_number())
    reason += (reason.empty() ? "" : "; ") +
              format_starts_in(job["estimated_start"].get<int64_t>(), static_cast<int64_t>(std::time(nullptr)));
  return reason;
}

std::string where_cell(const Json& job) {
  const std::string reason = reason_text(job);
  if (auto a = array_progress(job); !a.empty()) return "(" + a + (reason.empty() ? "" : "; " + reason) + ")";
  if (job.contains("nodes") && job["nodes"].is_array() && !job["nodes"].empty())
    return compress_hostlist(job["nodes"].get<std::vector<std::string>>());
  return reason.empty() ? "" : "(" + reason + ")";
}

std::string age_cell(const Json& job) {
  const std::string state = job.value("state", "");
  const Json& since = state == "PENDING" || state == "HELD" ? job["submit_time"] : job["start_time"];
  if (!since.is_number()) return "-";
  const Json& until = job.contains("end_time") ? job["end_time"] : Json();
  const double end = until.is_number() ? until.get<double>() : static_cast<double>(std::time(nullptr));
  return format_duration(end - since.get<double>());
}

void run_queue(QueueOptions& o) {
  Api api(o.server);
  if (o.me) o.user = current_user(api);
  std::string user_q = o.user.empty() ? "" : "user=" + url_encode(o.user);
  if (o.array > 0) user_q += (user_q.empty() ? "" : "&") + std::string("array=") + std::to_string(o.array);
  std::vector<Json> jobs;
  if (!o.state.empty() || o.all) {
    std::string q = user_q;
    if (!o.state.empty()) q += (q.empty() ? "" : "&") + std::string("state=") + url_encode(o.state);
    jobs = list_jobs(api, q);
  } else {
    for (const auto& s : kActiveStates) {
      auto part = list_jobs(api, "state=" + s + (user_q.empty() ? "" : "&" + user_q));
      jobs.insert(jobs.end(), part.begin(), part.end());
    }
    std::sort(jobs.begin(), jobs.end(), [](const Json& a, const Json& b) { return a["id"] < b["id"]; });
  }
  if (o.json) return print_json({{"jobs", jobs}});
  Table t({"ID", "NAME", "USER", "STATE", "GPUS", "TIME", "NODES (REASON)"});
  for (const auto& j : jobs) {
    const std::string state = j.value("state", "?");
    t.add({cell(j["id"]), name_cell(j), j.value("user", ""), state, gpus_cell(j), age_cell(j), where_cell(j)},
          {Color::kNone, Color::kNone, Color::kNone, state_color(state)});
  }
  if (t.empty()) {
    std::cerr << "railyard: no " << (o.all || !o.state.empty() ? "" : "active ") << "jobs" << std::endl;
    return;
  }
  t.print();
}

void add_queue_command(CLI::App& app) {
  auto o = std::make_shared<QueueOptions>();
  auto* cmd = app.add_subcommand("queue", "List jobs: pending and running by default");
  cmd->add_option("--user", o->user, "Only this user's jobs");
  cmd->add_flag("--me", o->me, "Only my jobs");
  cmd->add_option("--state", o->state, "Only jobs in this state (PENDING, RUNNING, COMPLETED, ...)")
      ->transform([](std::string s) {
        for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        return s;
      });
  cmd->add_flag("-a,--all", o->all, "Finished jobs too");
  cmd->add_option("--array", o->array, "Only the tasks of this array (its job id)")->check(at_least(1));
  cmd->add_flag("--json", o->json, "The API's JSON: {\"jobs\": [...]}");
  add_server_options(*cmd, o->server);
  cmd->footer(R"(Examples:
  railyard queue
  railyard queue --me --all
  railyard queue --state PENDING --json | jq '.jobs[].id'

Exit codes: 0 ok, 1 scheduler unreachable or failing, 2 bad arguments.)");
  cmd->callback([o] { run_queue(*o); });
}

// --- show --------------------------------------------------------------------------------------------

struct ShowOptions {
  ServerOptions server;
  std::string job;
  std::string bytes = "1G";
  bool json = false;
};

// The cost model's allreduce estimate for the job's GPUs, on the scheduler's own cluster: the job's
// "estimate" when the scheduler gives one for this size, else computed here from GET /topology.
Json placement_estimate(Api& api, const Json& job, double bytes) {
  if (const Json& e = job.contains("estimate") ? job["estimate"] : Json(); e.is_object() &&
      e.value("allreduce_bytes", 0.0) == bytes) {
    Json out = e;
    out.erase("allreduce_bytes");
    out["bytes"] = bytes;
    return out;
  }
  if (!job.contains("gpu_ids") || !job["gpu_ids"].is_array() || job["gpu_ids"].empty()) return nullptr;
  auto topo = api.call("GET", "/topology");
  if (!topo) return nullptr;
  auto cluster = topology::parse_cluster(topo->dump(), "scheduler", "dgx-h100");
  if (!cluster) return nullptr;
  std::vector<topology::GpuId> gpus;
  for (const auto& g : job["gpu_ids"]) {
    const long id = g.is_number_integer() ? g.get<long>() : g.is_object() ? g.value("gpu", -1L) : -1;
    if (id < 0 || id >= static_cast<long>(cluster->gpu_count())) return nullptr;
    gpus.push_back(static_cast<topology::GpuId>(id));
  }
  const auto e = topology::estimate_allreduce(*cluster, gpus, bytes);
  return {{"bytes", bytes},
          {"seconds", e.seconds},
          {"ring_seconds", e.ring_seconds},
          {"tree_seconds", e.tree_seconds},
          {"bus_gbytes_s", e.bus_gbytes_s},
          {"bottleneck_gbits_s", e.bottleneck_gbits_s},
          {"span", std::string(topology::to_string(e.span))},
          {"rail_aligned", e.rail_aligned}};
}

// Time-to-train as MLPerf counts it, to the millisecond, with minutes (MLPerf's unit) past one; else why
// there is none, from the agent's note in the history ("no time-to-train: ...", agent/streams/metrics.hpp),
// and the last thing the agent said about the log ("MLPerf log: ... could not be read").
template <typename Row>
void print_time_to_train(const Json& job, const Json& events, Row row) {
  constexpr std::string_view kNone = "no time-to-train: ", kLog = "MLPerf log: ";
  std::string none, log;
  for (const auto& e : events.is_array() ? events : Json::array()) {
    const std::string what = e.is_object() ? e.value("what", "") : "";
    if (what.starts_with(kNone)) none = what.substr(kNone.size());
    if (what.starts_with(kLog)) log = what.substr(kLog.size());
  }
  if (job.contains("time_to_train_s") && job["time_to_train_s"].is_number()) {
    const double s = job["time_to_train_s"].get<double>();
    char buf[64];
    std::snprintf(buf, sizeof buf, s >= 60 ? "%.3f s (%.2f min)" : "%.3f s", s, s / 60);
    row("time-to-train", buf);
  } else if (!none.empty()) {
    row("time-to-train", "none: " + none);
  }
  if (!log.empty()) row("MLPerf log", log);
}

void print_show(const Json& job, const Json& estimate, const Json& events) {
  auto row = [](const std::string& k, const std::string& v) { std::cout << "  " << k << std::string(16 - k.size(), ' ') << v << "\n"; };
  const std::string state = job.value("state", "?");
  std::cout << paint("job " + cell(job["id"]), Color::kBold) << "  " << job.value("name", "") << "  "
            << paint(state, state_color(state)) << "\n";
  row("user", job.value("user", "") + " (project " + job.value("project", "") + ")");
  row("gpus", gpus_cell(job) + (job.value("gpu_type", "").empty() ? "" : " x " + job.value("gpu_type", "")));
  if (job.contains("spec") && job["spec"].contains("command") && !job["spec"]["command"].empty())
    row("command", job["spec"]["command"].dump());
  if (job.contains("spec"))
    for (const auto& [k, v] : container_rows(job["spec"])) row(k, v);
  row("submitted", format_time(job["submit_time"]));
  row("started", format_time(job["start_time"]));
  row("ended", format_time(job["end_time"]));
  if (const std::string reason = reason_text(job); !reason.empty()) row("reason", reason);
  if (job.contains("held_by") && job["held_by"].is_string())
    row("held by", job["held_by"].get<std::string>() +
                       (job.value("held_by_admin", false) ? " (an admin: only an admin may release it)" : ""));
  if (job.contains("spec") && job["spec"].contains("env") && job["spec"]["env"].is_object() &&
      !job["spec"]["env"].empty()) {  // values only for the owner and admins: others see the keys
    std::string env;
    for (const auto& [k, v] : job["spec"]["env"].items()) env += (env.empty() ? "" : " ") + k + "=" + cell(v);
    row("env", env + (job.value("env_hidden", false) ? "  (values hidden: only the owner and admins see them)" : ""));
  }
  if (job.contains("spec")) {  // "afterok:12, afterany:40" as the user wrote them
    std::string deps;
    const Json& spec = job["spec"];
    if (spec.contains("afterok") && spec["afterok"].is_array())
      for (const auto& id : spec["afterok"]) deps += (deps.empty() ? "" : ", ") + ("afterok:" + cell(id));
    if (spec.contains("after") && spec["after"].is_array())
      for (const auto& d : spec["after"]) deps += (deps.empty() ? "" : ", ") + cell(d);
    if (!deps.empty()) row("depends on", deps);
  }
  if (auto a = array_progress(job); !a.empty()) row("array", a);
  if (job.contains("array_job") && job["array_job"].is_number())
    row("array", "task " + cell(job["array_task"]) + " of array " + cell(job["array_job"]));
  if (job.contains("estimated_start") && job["estimated_start"].is_number())
    row("est. start", format_time(job["estimated_start"]));
  if (job.contains("exit_code") && !job["exit_code"].is_null()) row("exit code", cell(job["exit_code"]));
  if (job.contains("nodes") && job["nodes"].is_array() && !job["nodes"].empty()) {
    row("nodes", compress_hostlist(job["nodes"].get<std::vector<std::string>>()));
    const Json& spanned = job["leaves_spanned"];
    const Json& min = job["min_leaves"];
    std::string span = cell(spanned) + " leaf group(s), minimum " + cell(min);
    if (spanned.is_number() && min.is_number())
      span += spanned == min ? "  " + paint("(optimal)", Color::kGreen) : "  " + paint("(fragmented)", Color::kYellow);
    row("switch span", span);
  }
  if (!estimate.is_null() && !(estimate.value("seconds", 0.0) > 0)) {
    row("allreduce est.", "none: one GPU, no collective crosses a link");
  } else if (!estimate.is_null()) {
    char buf[200];
    // An infinite bottleneck (no link crossed) is null in the API's JSON.
    const Json& slowest = estimate["bottleneck_gbits_s"];
    std::snprintf(buf, sizeof buf, "%s in %s (bus %.1f GB/s, slowest link %.0f Gb/s, within one %s%s)",
                  format_bytes(estimate["bytes"].get<double>()).c_str(),
                  format_seconds(estimate["seconds"].get<double>()).c_str(), estimate["bus_gbytes_s"].get<double>(),
                  slowest.is_number() ? slowest.get<double>() : HUGE_VAL, estimate["span"].get<std::string>().c_str(),
                  estimate["rail_aligned"].get<bool>() ? "" : ", rails crossed");
    row("allreduce est.", buf);
  }
  if (job.contains("spec") && job["spec"].contains("target"))
    row("target", job["spec"]["target"].value("metric", "") + " >= " + cell(job["spec"]["target"]["value"]));
  print_time_to_train(job, events, row);
  if (events.is_array() && !events.empty()) {
    std::cout << "  history\n";
    for (const auto& e : events) {
      std::string line = "    " + format_time(e.value("time", Json())) + "  " + e.value("what", "");
      if (e.contains("actor") && e["actor"].is_string() && !e["actor"].get<std::string>().empty())
        line += "  (" + e["actor"].get<std::string>() + ")";
      if (e.contains("reason") && e["reason"].is_string()) line += "  (" + e["reason"].get<std::string>() + ")";
      std::cout << line << "\n";
    }
  }
}

void run_show(const ShowOptions& o) {
  const long id = parse_job_id(o.job);
  auto bytes = parse_byte_size(o.bytes);
  if (!bytes) fail(bytes.error());
  Api api(o.server);
  const Json job = api.get("/jobs/" + std::to_string(id));
  const Json estimate = placement_estimate(api, job, *bytes);
  Json events = nullptr;
  if (auto ev = api.call("GET", "/jobs/" + std::to_string(id) + "/events"); ev && ev->is_object())
    events = ev->value("events", Json::array());
  if (o.json) return print_json({{"job", job}, {"allreduce_estimate", estimate}, {"events", events}});
  print_show(job, estimate, events);
}

void add_show_command(CLI::App& app) {
  auto o = std::make_shared<ShowOptions>();
  auto* cmd = app.add_subcommand("show", "One job: placement, switch span, allreduce estimate, history");
  cmd->add_option("job", o->job, "Job id")->required();
  cmd->add_option("--bytes", o->bytes, "Allreduce size for the cost-model estimate")->capture_default_str();
  cmd->add_flag("--json", o->json, "{\"job\": API job, \"allreduce_estimate\": ..., \"events\": [...]}");
  add_server_options(*cmd, o->server);
  cmd->footer(R"(Examples:
  railyard show 12
  railyard show 12 --bytes 4G --json

Exit codes: 0 ok, 1 scheduler unreachable, 2 bad job id, 3 no such job.)");
  cmd->callback([o] { run_show(*o); });
}

// --- cancel, hold, release ---------------------------------------------------------------------------

struct ActionOptions {
  ServerOptions server;
  std::vector<std::string> jobs;
};

void add_action_command(CLI::App& app, const std::string& action, const std::string& help,
                        const std::string& example) {
  auto o = std::make_shared<ActionOptions>();
  auto* cmd = app.add_subcommand(action, help);
  cmd->add_option("jobs", o->jobs, "Job ids")->required();
  add_server_options(*cmd, o->server);
  cmd->footer("Examples:\n  railyard " + action + " " + example +
              "\n\nEvery job is tried; the exit code is the worst: 0 ok, 1 failure (e.g. the job's state forbids it),"
              "\n2 bad job id, 3 no such job or not yours.");
  cmd->callback([o, action] {
    std::vector<long> ids;
    for (const auto& j : o->jobs) ids.push_back(parse_job_id(j));
    Api api(o->server);
    api.require_token();
    int worst = kExitOk;
    for (long id : ids) {
      auto r = api.call("POST", "/jobs/" + std::to_string(id) + "/" + action);
      if (!r) {
        std::cerr << "railyard: " << r.error().message << std::endl;
        const int code = exit_code(r.error().code);
        if (r.error().code == ErrorCode::kUnavailable) fail(r.error());
        worst = worst == kExitOk ? code : std::max(worst, code);
        continue;
      }
      std::cout << id << " " << r->value("state", "") << "\n";
    }
    if (worst != kExitOk) throw CLI::RuntimeError(worst);
  });
}

// --- history -----------------------------------------------------------------------------------------

struct HistoryOptions {
  ServerOptions server;
  std::string since, until, by = "user", user;
  bool json = false, audit = false;
};

// Unix seconds, "YYYY-MM-DD" (local midnight) or "7d"/"12h" (that long ago).
long parse_when(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (!text.empty() && *end == '\0') return n;
  if (!text.empty() && end != text.c_str() && (std::string(end) == "d" || std::string(end) == "h"))
    return static_cast<long>(std::time(nullptr)) - n * (*end == 'd' ? 86400 : 3600);
  std::tm tm{};
  if (::strptime(text.c_str(), "%Y-%m-%d", &tm) && std::strlen(text.c_str()) == 10) {
    tm.tm_isdst = -1;
    return static_cast<long>(std::mktime(&tm));
  }
  fail_usage(flag + " " + text + ": expected unix seconds, YYYY-MM-DD, or a span ago such as 7d or 12h");
}

// `history --audit`: the audit log of mutating requests (admin; GET /audit).
void run_audit(const HistoryOptions& o) {
  Api api(o.server);
  api.require_token();
  std::string q = "/audit?limit=10000";
  if (!o.user.empty()) q += "&user=" + url_encode(o.user);
  if (!o.since.empty()) q += "&since=" + std::to_string(parse_when(o.since, "--since"));
  const Json answer = api.get(q);
  if (o.json) return print_json(answer);
  Table t({"TIME", "ACTOR", "SOURCE", "METHOD", "TARGET", "STATUS"});
  for (const auto& r : answer.value("rows", Json::array())) {
    const std::string actor = r.value("actor", "");
    t.add({format_time(r.value("time_ms", int64_t{0}) / 1000), actor.empty() ? "-" : actor,
           r.value("source", ""), r.value("method", ""), r.value("target", ""),
           std::to_string(r.value("status", 0))});
  }
  t.print();
}

void run_history(const HistoryOptions& o) {
  if (o.audit) return run_audit(o);
  if (!o.user.empty()) fail_usage("--user goes with --audit");
  Api api(o.server);
  std::string q = "/accounting?by=" + url_encode(o.by);
  if (!o.since.empty()) q += "&since=" + std::to_string(parse_when(o.since, "--since"));
  if (!o.until.empty()) q += "&until=" + std::to_string(parse_when(o.until, "--until"));
  const Json answer = api.get(q);
  if (o.json) return print_json(answer);
  Json rows = Json::array();
  for (const char* key : {"rows", "usage", "accounting", "users", "projects"})
    if (answer.contains(key) && answer[key].is_array()) rows = answer[key];
  if (rows.empty()) {
    std::cerr << "railyard: no usage in that period" << std::endl;
    return;
  }
  std::vector<std::string> keys{o.by};  // the group first, then the figures
  for (auto it = rows[0].begin(); it != rows[0].end(); ++it)
    if (it.key() != o.by) keys.push_back(it.key());
  std::vector<std::string> headers;
  for (auto k : keys) {
    for (char& c : k) c = c == '_' ? ' ' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    headers.push_back(k);
  }
  Table t(headers);
  for (const auto& r : rows) {
    std::vector<std::string> cells;
    for (const auto& k : keys) cells.push_back(r.contains(k) ? cell(r[k]) : "-");
    t.add(cells);
  }
  t.print();
}

void add_history_command(CLI::App& app) {
  auto o = std::make_shared<HistoryOptions>();
  auto* cmd = app.add_subcommand("history", "Accounting: GPU-hours and jobs by user or project over a period");
  cmd->add_option("--since", o->since, "Start of the period: unix seconds, YYYY-MM-DD, or 7d (ago)");
  cmd->add_option("--until", o->until, "End of the period (default: now)");
  cmd->add_option("--by", o->by, "Group by user or project")->check(CLI::IsMember({"user", "project"}))->capture_default_str();
  cmd->add_flag("--json", o->json, "The API's JSON");
  cmd->add_flag("--audit", o->audit,
                "The audit log instead: every mutating request, who, from where, outcome (admin)");
  cmd->add_option("--user", o->user, "With --audit: only this user's requests");
  add_server_options(*cmd, o->server);
  cmd->footer(R"(Examples:
  railyard history --since 2026-12-01 --by project
  railyard history --json
  railyard history --audit --user ada --since 1d

Exit codes: 0 ok, 1 scheduler unreachable, 2 bad arguments.)");
  cmd->callback([o] { run_history(*o); });
}

}  // namespace

void add_job_read_commands(CLI::App& app) {
  add_queue_command(app);
  add_show_command(app);
  add_action_command(app, "cancel", "Cancel jobs (pending, held or running)", "12 13");
  add_action_command(app, "hold", "Hold pending jobs (they do not start until released)", "12");
  add_action_command(app, "release", "Release held jobs", "12");
  add_history_command(app);
}

}  // namespace railyard::cli
