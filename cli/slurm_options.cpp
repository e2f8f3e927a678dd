#include "cli/slurm_options.hpp"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "cli/cli_util.hpp"
#include "cli/job_util.hpp"

namespace railyard::cli {
namespace {

using Json = nlohmann::json;

const SlurmFlag* find_flag(std::span<const SlurmFlag> flags, std::string_view name, bool is_short) {
  for (const auto& f : flags)
    if (is_short ? name.size() == 1 && f.short_name == name[0] : f.long_name == name) return &f;
  return nullptr;
}

// Railyard's state, Slurm's long name, Slurm's code.
struct StateName {
  std::string_view railyard, slurm, code;
};
constexpr StateName kStates[] = {
    {"PENDING", "PENDING", "PD"},
    {"HELD", "PENDING", "PD"},
    {"STARTING", "CONFIGURING", "CF"},
    {"RUNNING", "RUNNING", "R"},
    {"COMPLETED", "COMPLETED", "CD"},
    {"FAILED", "FAILED", "F"},
    {"CANCELLED", "CANCELLED", "CA"},
    {"TIMEOUT", "TIMEOUT", "TO"},
    {"NODE_FAIL", "NODE_FAIL", "NF"},
    {"PREEMPTED", "PREEMPTED", "PR"},
    {"OUT_OF_MEMORY", "OUT_OF_MEMORY", "OOM"},
};
// Slurm states Railyard never puts a job in: asking for them selects nothing, quietly for COMPLETING (a job
// here ends at once), with a warning for the rest.
constexpr std::string_view kNeverHere[] = {"CG", "COMPLETING"};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool wanted(const std::vector<std::string>& filter, const std::string& value) {
  return filter.empty() || std::find(filter.begin(), filter.end(), value) != filter.end();
}

std::string current_user(Api& api) {
  if (auto who = api.call("GET", "/whoami"); who && who->is_object() && who->contains("user"))
    return (*who)["user"].get<std::string>();
  for (const char* var : {"RAILYARD_USER", "USER", "LOGNAME"})
    if (const char* v = std::getenv(var); v && *v) return v;
  fail_usage("--me: cannot tell who you are; use -u NAME");
}

// "12" → job 12; "12_3" → the task of array 12 with index 3.
std::optional<Json> find_job(Api& api, const std::string& text) {
  const size_t us = text.find('_');
  const long id = parse_job_id(text.substr(0, us));
  auto job = api.call("GET", "/jobs/" + std::to_string(id));
  if (!job) return std::nullopt;
  if (us == std::string::npos) return *job;
  const std::string index = text.substr(us + 1);
  if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos || index.size() > 9)
    fail_usage("\"" + text + "\" is not a job id (12, or 12_3 for task 3 of array 12)");
  const long task = std::stol(index);
  for (auto& t : list_jobs(api, "array=" + std::to_string(id)))
    if (t.value("array_task", -1L) == task) return t;
  return std::nullopt;
}

}  // namespace

std::vector<std::string> SlurmArgs::list(std::string_view name) const {
  std::vector<std::string> out;
  auto it = values.find(name);
  if (it == values.end()) return out;
  for (const auto& v : it->second)
    for (size_t start = 0; start <= v.size();) {
      const size_t comma = std::min(v.find(',', start), v.size());
      if (comma > start) out.push_back(v.substr(start, comma - start));
      start = comma + 1;
    }
  return out;
}

SlurmArgs parse_slurm_args(std::string_view command, const std::vector<std::string>& args,
                           std::span<const SlurmFlag> flags) {
  SlurmArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w.size() < 2 || w[0] != '-') {
      out.positional.push_back(w);
      continue;
    }
    const bool is_short = !w.starts_with("--");
    const size_t eq = w.find('=');
    const std::string name = is_short ? w.substr(1, 1) : w.substr(2, eq == std::string::npos ? eq : eq - 2);
    std::optional<std::string> value;
    if (is_short && w.size() > 2) value = w.substr(2);
    if (!is_short && eq != std::string::npos) value = w.substr(eq + 1);
    const SlurmFlag* f = find_flag(flags, name, is_short);
    if (f && f->takes_value && !value) {
      if (i + 1 >= args.size()) fail_usage(std::string(command) + ": " + w + ": needs a value");
      value = args[++i];
    }
    if (!f || !f->ignored_because.empty()) {
      std::cerr << "railyard: " << command << ": " << w
                << (value && eq == std::string::npos && f ? " " + *value : "")
                << " ignored: " << (f ? f->ignored_because : "not an option Railyard knows") << "\n";
      continue;
    }
    out.values[std::string(f->long_name)].push_back(value.value_or(""));
  }
  return out;
}

std::string slurm_state(const std::string& s) {
  for (const auto& n : kStates)
    if (n.railyard == s) return std::string(n.slurm);
  return s;
}

std::string slurm_state_code(const std::string& s) {
  for (const auto& n : kStates)
    if (n.railyard == s) return std::string(n.code);
  return s;
}

std::vector<std::string> railyard_states(std::string_view command, const std::vector<std::string>& slurm) {
  std::vector<std::string> out;
  for (const std::string& raw : slurm) {
    const std::string s = upper(raw);
    bool known = std::find(std::begin(kNeverHere), std::end(kNeverHere), s) != std::end(kNeverHere);
    for (const auto& n : kStates)
      if (s == "ALL" || s == n.slurm || s == n.code || s == n.railyard) {
        if (std::find(out.begin(), out.end(), n.railyard) == out.end()) out.emplace_back(n.railyard);
        known = true;
      }
    if (!known) std::cerr << "railyard: " << command << ": state " << raw << ": Railyard has no such state\n";
  }
  return out;
}

std::vector<Json> select_jobs(std::string_view command, Api& api, const SlurmArgs& a,
                              const std::vector<std::string>& ids) {
  std::vector<std::string> users = a.list("user");
  if (a.has("me")) users.push_back(current_user(api));
  std::vector<Json> jobs;
  for (const auto& id : ids)
    if (auto job = find_job(api, id))
      jobs.push_back(std::move(*job));
    else
      std::cerr << "railyard: " << command << ": job " << id << ": not found\n";
  if (ids.empty()) {
    const std::vector<std::string> states =
        a.has("states") ? railyard_states(command, a.list("states"))
                        : std::vector<std::string>{"PENDING", "HELD", "STARTING", "RUNNING"};
    const std::string user_q = users.size() == 1 ? "&user=" + url_encode(users[0]) : "";
    for (const auto& s : states) {
      auto part = list_jobs(api, "state=" + s + user_q);
      jobs.insert(jobs.end(), part.begin(), part.end());
    }
  }
  const auto names = a.list("name"), parts = a.list("partition"), accounts = a.list("account"),
             qos = a.list("qos");
  std::erase_if(jobs, [&](const Json& j) {
    const Json& spec = j.contains("spec") && j["spec"].is_object() ? j["spec"] : Json::object();
    const auto features = spec.value("features", std::vector<std::string>{});
    const bool in_partition =
        parts.empty() || std::any_of(parts.begin(), parts.end(), [&](const std::string& p) {
          return std::find(features.begin(), features.end(), p) != features.end();
        });
    return !wanted(users, j.value("user", "")) || !wanted(names, j.value("name", "")) || !in_partition ||
           !wanted(accounts, j.value("project", "")) || !wanted(qos, spec.value("qos", "normal"));
  });
  std::sort(jobs.begin(), jobs.end(), [](const Json& x, const Json& y) { return x["id"] < y["id"]; });
  return jobs;
}

}  // namespace railyard::cli
