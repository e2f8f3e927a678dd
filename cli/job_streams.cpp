// `railyard logs` (polling the logs route with offsets) and `railyard watch` (progress toward the
// job's quality target from the metrics route).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/cli_util.hpp"
#include "cli/job_util.hpp"
#include "cli/output.hpp"

namespace railyard::cli {
namespace {

using Json = nlohmann::json;

// --- logs --------------------------------------------------------------------------------------------

struct LogsOptions {
  ServerOptions server;
  std::string job;
  int rank = 0;
  bool follow = false, err = false;
  double poll_s = 1.0;
  long max_bytes = 256 * 1024;
};

// Reads from `offset` until the end of what exists now; returns the new offset.
long drain_log(Api& api, const std::string& target, long offset, long max_bytes) {
  for (;;) {
    auto chunk = api.get(target + "&offset=" + std::to_string(offset) + "&max_bytes=" + std::to_string(max_bytes));
    const std::string data = chunk.value("data", "");
    std::cout << data << std::flush;
    // The route says where the next read starts (data may have had invalid bytes replaced); else count.
    const long next = chunk.contains("next_offset") && chunk["next_offset"].is_number()
                          ? chunk["next_offset"].get<long>()
                          : offset + static_cast<long>(data.size());
    const long size = chunk.contains("size") && chunk["size"].is_number() ? chunk["size"].get<long>() : next;
    if (next <= offset || next >= size) return next;
    offset = next;
  }
}

void run_logs(const LogsOptions& o) {
  const long id = parse_job_id(o.job);
  Api api(o.server);
  const std::string target = "/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(o.rank) +
                             "&stream=" + (o.err ? "err" : "out");
  long offset = drain_log(api, target, 0, o.max_bytes);
  while (o.follow) {
    // Read the state before the last drain, so output written just before the end is not missed.
    const bool final = job_is_final(api.get("/jobs/" + std::to_string(id)));
    offset = drain_log(api, target, offset, o.max_bytes);
    if (final) break;
    sleep_for_seconds(o.poll_s);
  }
}

void add_logs_command(CLI::App& app) {
  auto o = std::make_shared<LogsOptions>();
  auto* cmd = app.add_subcommand("logs", "Print a job's output (one rank's stdout or stderr)");
  cmd->add_option("job", o->job, "Job id")->required();
  cmd->add_flag("-f,--follow", o->follow, "Keep printing new output until the job ends");
  cmd->add_option("--rank", o->rank, "Rank whose log to read")->capture_default_str()->check(at_least(0));
  cmd->add_flag("--err", o->err, "Standard error instead of standard output");
  cmd->add_option("--poll", o->poll_s, "Seconds between reads with -f")->capture_default_str();
  add_server_options(*cmd, o->server);
  cmd->footer(R"(Examples:
  railyard logs 12
  railyard logs 12 -f --rank 3
  railyard logs 12 --err

Exit codes: 0 ok, 1 scheduler unreachable or the log cannot be read, 2 bad arguments, 3 no such job or not yours.)");
  cmd->callback([o] { run_logs(*o); });
}

// --- watch -------------------------------------------------------------------------------------------

struct WatchOptions {
  ServerOptions server;
  std::string job;
  double poll_s = 2.0;
  bool once = false;
};

struct Progress {
  std::string metric;
  double target = NAN;
  double value = NAN, value_t = NAN;   // latest sample of the target metric
  double first_value = NAN, first_t = NAN;
  double throughput = NAN;
  std::string throughput_unit;
};

Json metric_events(const Json& answer) {
  for (const char* key : {"events", "samples", "metrics"})
    if (answer.contains(key) && answer[key].is_array()) return answer[key];
  return Json::array();
}

Progress progress_of(const Json& job, const Json& events) {
  Progress p;
  const Json spec = job.value("spec", Json::object());
  if (spec.contains("target")) {
    p.metric = spec["target"].value("metric", "eval_accuracy");
    p.target = spec["target"].value("value", NAN);
  } else {
    p.metric = "eval_accuracy";
  }
  for (const auto& e : events) {
    const std::string key = e.value("key", "");
    // A sample is the MLLOG event itself, or {"key", "t", "data": event} as the metrics route stores it.
    const Json& d = e.contains("data") && e["data"].is_object() ? e["data"] : e;
    if (!d.contains("value") || !d["value"].is_number()) continue;
    const double v = d["value"].get<double>();
    const double t = e.contains("t") && e["t"].is_number() ? e["t"].get<double>() : NAN;
    if (key == p.metric) {
      if (std::isnan(p.first_value)) p.first_value = v, p.first_t = t;
      p.value = v, p.value_t = t;
    } else if (key == "throughput") {
      p.throughput = v;
      p.throughput_unit = d.value("unit", "");
    }
  }
  return p;
}

std::string render(const Json& job, const Progress& p, int width) {
  const std::string state = job.value("state", "?");
  char buf[128];
  std::string line = "job " + cell(job["id"]) + " " + paint(state, state_color(state)) + "  ";
  if (!std::isnan(p.target) && !std::isnan(p.value)) {
    const double frac = std::clamp(p.value / p.target, 0.0, 1.0);
    const int bar = std::clamp(width - 80, 10, 40);
    const int filled = static_cast<int>(frac * bar);
    line += "[" + std::string(filled, '#') + std::string(bar - filled, '.') + "] ";
  }
  if (std::isnan(p.value)) {
    line += p.metric + " -";
  } else {
    std::snprintf(buf, sizeof buf, "%s %.4g", p.metric.c_str(), p.value);
    line += buf;
  }
  if (!std::isnan(p.target)) {
    std::snprintf(buf, sizeof buf, " / %.4g", p.target);
    line += buf;
  }
  if (!std::isnan(p.throughput)) {
    std::snprintf(buf, sizeof buf, "  %.4g %s", p.throughput, p.throughput_unit.empty() ? "/s" : p.throughput_unit.c_str());
    line += buf;
  }
  if (job.contains("time_to_train_s") && job["time_to_train_s"].is_number()) {
    line += "  time-to-train " + format_seconds(job["time_to_train_s"].get<double>());
  } else if (!std::isnan(p.target) && !std::isnan(p.value) && p.value < p.target && p.value_t > p.first_t &&
             p.value > p.first_value) {
    // Linear extrapolation from the first to the latest sample: crude, but honest about its basis.
    const double rate = (p.value - p.first_value) / (p.value_t - p.first_t);
    line += "  ETA " + format_duration((p.target - p.value) / rate);
  }
  return line;
}

void run_watch(const WatchOptions& o) {
  const long id = parse_job_id(o.job);
  Api api(o.server);
  const bool tty = ::isatty(STDOUT_FILENO);
  for (;;) {
    const Json job = api.get("/jobs/" + std::to_string(id));
    auto metrics = api.call("GET", "/jobs/" + std::to_string(id) + "/metrics");
    if (!metrics && metrics.error().code != ErrorCode::kUnavailable) fail(metrics.error());
    const Json events = metrics ? metric_events(*metrics) : Json::array();
    const std::string line = render(job, progress_of(job, events), terminal_width());
    if (tty) std::cout << "\r\033[K" << line << std::flush;
    else std::cout << line << std::endl;
    if (o.once || job_is_final(job)) break;
    sleep_for_seconds(o.poll_s);
  }
  if (tty) std::cout << std::endl;
}

void add_watch_command(CLI::App& app) {
  auto o = std::make_shared<WatchOptions>();
  auto* cmd = app.add_subcommand("watch", "Live progress toward a job's quality target: metric, throughput, ETA");
  cmd->add_option("job", o->job, "Job id")->required();
  cmd->add_option("--poll", o->poll_s, "Seconds between updates")->capture_default_str();
  cmd->add_flag("--once", o->once, "Print one line and exit");
  add_server_options(*cmd, o->server);
  cmd->footer(R"(Examples:
  railyard watch 12
  railyard watch 12 --once

Ends when the job ends. The ETA extrapolates the metric linearly from its first to its latest value.
Exit codes: 0 ok, 1 scheduler unreachable, 2 bad job id, 3 no such job.)");
  cmd->callback([o] { run_watch(*o); });
}

}  // namespace

void add_stream_commands(CLI::App& app) {
  add_logs_command(app);
  add_watch_command(app);
}

}  // namespace railyard::cli
