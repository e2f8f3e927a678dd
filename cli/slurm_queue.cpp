// `railyard squeue` and `railyard scancel`: Slurm's commands with their common options, so that scripts and
// habits built on them keep working. squeue's -o takes the common % fields (%i %j %u %t %T %M %l %L %D %R
// %r %N %P %C %b %a %q %p %Q %V %S %e %Z %o %A %F %K); what Railyard cannot show is a warning, never a
// silent drop.
#include <CLI/CLI.hpp>
#include <ctime>
#include <iostream>

#include "cli/cli_util.hpp"
#include "cli/job_util.hpp"
#include "cli/slurm_options.hpp"
#include "common/hostlist.hpp"

namespace railyard::cli {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kDefaultFormat = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
constexpr std::string_view kLongFormat = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";

// Slurm's duration text: "M:SS", "H:MM:SS", "D-HH:MM:SS".
std::string slurm_duration(int64_t s) {
  if (s < 0) s = 0;
  char buf[64];
  const int64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;
  if (d > 0)
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", static_cast<long long>(d),
                  static_cast<long long>(h), static_cast<long long>(m), static_cast<long long>(sec));
  else if (h > 0)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(h), static_cast<long long>(m),
                  static_cast<long long>(sec));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(m), static_cast<long long>(sec));
  return buf;
}

std::string slurm_time(const Json& t) {
  if (!t.is_number()) return "N/A";
  const std::time_t v = t.get<std::time_t>();
  std::tm tm{};
  localtime_r(&v, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

const Json& spec_of(const Json& j) {
  static const Json kEmpty = Json::object();
  return j.contains("spec") && j["spec"].is_object() ? j["spec"] : kEmpty;
}

int64_t elapsed(const Json& j) {
  if (!j["start_time"].is_number()) return 0;
  const int64_t end = j["end_time"].is_number() ? j["end_time"].get<int64_t>() : std::time(nullptr);
  return end - j["start_time"].get<int64_t>();
}

std::string node_list(const Json& j) {
  if (!j.contains("nodes") || !j["nodes"].is_array() || j["nodes"].empty()) return "";
  return compress_hostlist(j["nodes"].get<std::vector<std::string>>());
}

std::string reason(const Json& j) {
  if (j.contains("reason") && j["reason"].is_string()) return j["reason"].get<std::string>();
  return j.value("state", "") == "HELD" ? "JobHeldUser" : "None";
}

std::string time_limit(const Json& j) {
  const int64_t limit = spec_of(j).value("time_limit", int64_t{0});
  return limit > 0 ? slurm_duration(limit) : "UNLIMITED";
}

std::string node_count(const Json& j) {
  const size_t placed = j.contains("nodes") && j["nodes"].is_array() ? j["nodes"].size() : 0;
  return std::to_string(placed > 0 ? static_cast<int64_t>(placed)
                                   : std::max(spec_of(j).value("nodes", 1), 1));
}

// One % field of a job; nullopt for a letter this squeue does not know.
std::optional<std::string> field(char c, const Json& j) {
  const Json& spec = spec_of(j);
  const bool task = j["array_task"].is_number();
  const std::string id = std::to_string(j.value("id", 0L));
  const std::string state = j.value("state", "");
  switch (c) {
    case 'i':
      return task ? std::to_string(j["array_job"].get<long>()) + "_" +
                        std::to_string(j["array_task"].get<long>())
                  : id;
    case 'A':
      return id;
    case 'F':
      return task ? std::to_string(j["array_job"].get<long>()) : id;
    case 'K':
      return task ? std::to_string(j["array_task"].get<long>()) : "N/A";
    case 'j':
      return j.value("name", "");
    case 'u':
      return j.value("user", "");
    case 'a':
      return j.value("project", "");
    case 't':
      return slurm_state_code(state);
    case 'T':
      return slurm_state(state);
    case 'M':
      return slurm_duration(elapsed(j));
    case 'l':
      return time_limit(j);
    case 'L': {
      const int64_t limit = spec.value("time_limit", int64_t{0});
      return limit > 0 ? slurm_duration(limit - elapsed(j)) : "UNLIMITED";
    }
    case 'D':
      return node_count(j);
    case 'R':
      return state == "PENDING" || state == "HELD" ? "(" + reason(j) + ")" : node_list(j);
    case 'r':
      return reason(j);
    case 'N':
      return node_list(j);
    case 'P': {
      const auto features = spec.value("features", std::vector<std::string>{});
      return features.empty() ? "gpu" : features.front();
    }
    case 'C':
      return std::to_string(j.value("gpus", 0));  // GPUs: Railyard schedules GPUs, not CPUs
    case 'b':
      return "gpu:" + std::to_string(spec.value("gpus_per_node", 0) > 0 ? spec.value("gpus_per_node", 0)
                                                                        : j.value("gpus", 0));
    case 'q':
      return spec.value("qos", "normal");
    case 'p':
    case 'Q':
      return std::to_string(spec.value("priority", 0));
    case 'V':
      return slurm_time(j["submit_time"]);
    case 'S':
      return slurm_time(j["start_time"].is_number() ? j["start_time"] : j["estimated_start"]);
    case 'e':
      return slurm_time(j["end_time"]);
    case 'Z':
      return spec.value("workdir", "");
    case 'o': {
      std::string out;
      for (const auto& w : spec.value("command", std::vector<std::string>{}))
        out += (out.empty() ? "" : " ") + w;
      return out;
    }
    default:
      return std::nullopt;
  }
}

std::string header(char c) {
  switch (c) {
    case 'i':
    case 'A':
      return "JOBID";
    case 'F':
      return "ARRAY_JOB_ID";
    case 'K':
      return "ARRAY_TASK_ID";
    case 'j':
      return "NAME";
    case 'u':
      return "USER";
    case 'a':
      return "ACCOUNT";
    case 't':
      return "ST";
    case 'T':
      return "STATE";
    case 'M':
      return "TIME";
    case 'l':
      return "TIME_LIMIT";
    case 'L':
      return "TIME_LEFT";
    case 'D':
      return "NODES";
    case 'R':
      return "NODELIST(REASON)";
    case 'r':
      return "REASON";
    case 'N':
      return "NODELIST";
    case 'P':
      return "PARTITION";
    case 'C':
      return "CPUS";
    case 'b':
      return "TRES_PER_NODE";
    case 'q':
      return "QOS";
    case 'p':
    case 'Q':
      return "PRIORITY";
    case 'V':
      return "SUBMIT_TIME";
    case 'S':
      return "START_TIME";
    case 'e':
      return "END_TIME";
    case 'Z':
      return "WORK_DIR";
    case 'o':
      return "COMMAND";
    default:
      return std::string(1, c);
  }
}

// One row of -o FORMAT: "%[.][SIZE]X" fields (SIZE: width, text cut to it; '.': right-justified), other
// characters as they are. `value` gives a field's text.
template <typename Value>
std::string render(std::string_view format, Value&& value) {
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    const bool right = format[++i] == '.';
    if (right) ++i;
    size_t width = 0;
    while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i])))
      width = width * 10 + (format[i++] - '0');
    if (i >= format.size()) break;
    std::string text = value(format[i]);
    if (width > 0 && text.size() > width) text.resize(width);
    const std::string pad(width > text.size() ? width - text.size() : 0, ' ');
    out += right ? pad + text : text + pad;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

constexpr SlurmFlag kSqueueFlags[] = {
    {"user", 'u', true, ""},
    {"jobs", 'j', true, ""},
    {"states", 't', true, ""},
    {"me", 0, false, ""},
    {"format", 'o', true, ""},
    {"noheader", 'h', false, ""},
    {"long", 'l', false, ""},
    {"name", 'n', true, ""},
    {"partition", 'p', true, ""},
    {"account", 'A', true, ""},
    {"qos", 'q', true, ""},
    {"array", 'r', false, ""},
    {"all", 'a', false, ""},
    {"verbose", 'v', false, ""},
    {"noconvert", 0, false, ""},
    {"Format", 'O', true, "use -o with % fields"},
    {"sort", 'S', true, "jobs are listed by id"},
    {"iterate", 'i', true, "run it under `watch`, or use railyard watch"},
    {"start", 0, false, "the expected start is in %S and in the reason"},
    {"nodelist", 'w', true, "not a filter here"},
    {"clusters", 'M', true, "one cluster"},
    {"json", 0, false, "use railyard queue --json"},
    {"yaml", 0, false, "use railyard queue --json"},
    {"steps", 's', false, "jobs have no steps here"},
};

void run_squeue(const std::vector<std::string>& args) {
  const SlurmArgs a = parse_slurm_args("squeue", args, kSqueueFlags);
  Api api(ServerOptions{});
  std::vector<std::string> ids = a.list("jobs");
  ids.insert(ids.end(), a.positional.begin(), a.positional.end());
  const auto jobs = select_jobs("squeue", api, a, ids);
  const std::string format = a.has("format") ? a.values.at("format").back()
                             : a.has("long") ? std::string(kLongFormat)
                                             : std::string(kDefaultFormat);
  std::string unknown;
  if (!a.has("noheader")) std::cout << render(format, header) << "\n";
  for (const Json& j : jobs)
    std::cout << render(format, [&](char c) {
      auto v = field(c, j);
      if (!v && unknown.find(c) == std::string::npos) {
        unknown += c;
        std::cerr << "railyard: squeue: -o field %" << c << ": not one Railyard shows (N/A)\n";
      }
      return v.value_or("N/A");
    }) << "\n";
}

constexpr SlurmFlag kScancelFlags[] = {
    {"user", 'u', true, ""},
    {"jobs", 'j', true, ""},
    {"state", 't', true, ""},
    {"me", 0, false, ""},
    {"name", 'n', true, ""},
    {"partition", 'p', true, ""},
    {"account", 'A', true, ""},
    {"qos", 'q', true, ""},
    {"quiet", 'Q', false, ""},
    {"verbose", 'v', false, ""},
    {"batch", 'b', false, ""},
    {"full", 'f', false, ""},
    {"signal", 's', true, "Railyard cancels (SIGTERM, then SIGKILL); it sends no other signal"},
    {"interactive", 'i', false, "no confirmation is asked"},
    {"nodelist", 'w', true, "not a filter here"},
    {"clusters", 'M', true, "one cluster"},
    {"reservation", 'R', true, "no reservations"},
    {"wckey", 0, true, "no workload keys"},
};

void run_scancel(const std::vector<std::string>& args) {
  SlurmArgs a = parse_slurm_args("scancel", args, kScancelFlags);
  if (a.has("state")) a.values["states"] = a.values["state"];
  std::vector<std::string> ids = a.list("jobs");
  ids.insert(ids.end(), a.positional.begin(), a.positional.end());
  const bool filtered = a.has("user") || a.has("me") || a.has("name") || a.has("states") ||
                        a.has("partition") || a.has("account") || a.has("qos");
  if (ids.empty() && !filtered)
    fail_usage("scancel: no job identification given (a job id, -u, -n, -t, ...)");
  Api api(ServerOptions{});
  api.require_token();
  int worst = kExitOk;
  for (const Json& j : select_jobs("scancel", api, a, ids)) {
    const std::string id = std::to_string(j.value("id", 0L));
    if (job_is_final(j) && !ids.empty()) {
      std::cerr << "railyard: scancel: job " << id << ": already ended (" << j.value("state", "") << ")\n";
      continue;
    }
    auto r = api.call("POST", "/jobs/" + id + "/cancel");
    if (!r) {
      std::cerr << "railyard: scancel: job " << id << ": " << r.error().message << "\n";
      if (r.error().code == ErrorCode::kUnavailable) fail(r.error());
      worst = 1;
    } else if (a.has("verbose")) {
      std::cerr << "railyard: scancel: job " << id << " " << r->value("state", "") << "\n";
    }
  }
  if (worst != kExitOk) throw CLI::RuntimeError(worst);
}

CLI::App* passthrough(CLI::App& app, const std::string& name, const std::string& help,
                      const std::string& footer) {
  auto* cmd = app.add_subcommand(name, help);
  cmd->prefix_command();
  cmd->allow_extras();
  cmd->set_help_flag("--help", "Print this help message and exit");  // -h is squeue's --noheader
  cmd->footer(footer);
  return cmd;
}

}  // namespace

void add_squeue_scancel_commands(CLI::App& app) {
  auto* squeue =
      passthrough(app, "squeue", "List jobs as Slurm's squeue does (-u, -j, -t, --me, -o %fields)",
                  R"(Usage: railyard squeue [-u USERS] [-j JOBS] [-t STATES] [--me] [-n NAMES] [-p PARTITIONS]
                      [-A ACCOUNTS] [-q QOS] [-o FORMAT] [-l] [-h]

Default: pending and running jobs of every user, as "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R".
States (-t): PD PENDING, CF CONFIGURING (starting), R RUNNING, CD COMPLETED, F FAILED, CA CANCELLED,
TO TIMEOUT, NF NODE_FAIL, PR PREEMPTED, OOM OUT_OF_MEMORY, all; CG matches nothing (jobs end at once here).
A held job is PD with reason JobHeldUser. %P is the job's first feature (a partition imported from #SBATCH
-p), "gpu" when it has none; %C counts GPUs (Railyard schedules GPUs, not CPUs).

Examples:
  railyard squeue --me
  railyard squeue -t PD,R -o "%i %t %R"
  railyard squeue -j 12 -h -o %T

Exit codes: 0 ok, 1 scheduler unreachable, 2 bad options.)");
  squeue->callback([squeue] { run_squeue(squeue->remaining()); });
  auto* scancel = passthrough(
      app, "scancel", "Cancel jobs as Slurm's scancel does (ids, -u, -n, -t, --me)",
      R"(Usage: railyard scancel [JOB_ID[_TASK]...] [-u USER] [-n NAME] [-t STATE] [--me] [-p PARTITION]

With ids, those jobs; with filters only, every active job they select (as scancel -u ada). Silent on success,
as scancel is (-v: one line per job on stderr).

Examples:
  railyard scancel 12 13_4
  railyard scancel --me -t PENDING

Exit codes: 0 ok, 1 a job could not be cancelled or the scheduler is unreachable, 2 bad options.)");
  scancel->callback([scancel] { run_scancel(scancel->remaining()); });
}

}  // namespace railyard::cli
