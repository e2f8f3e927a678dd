#include "scheduler/sim/synth.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>
#include <ostream>
#include <random>

namespace railyard::sim {
namespace {

// Uniform in (0, 1): the top 53 bits of the generator, never 0 (log and Box-Muller take it).
double uniform(std::mt19937_64& rng) { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1p-53; }

double standard_normal(std::mt19937_64& rng) {
  return std::sqrt(-2.0 * std::log(uniform(rng))) * std::cos(2.0 * std::numbers::pi * uniform(rng));
}

bool parse_number(std::string_view s, double& out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(out);
}

Result<std::vector<std::pair<int, double>>> parse_mix(std::string_view text) {
  std::vector<std::pair<int, double>> mix;
  while (!text.empty()) {
    const size_t slash = text.find('/');
    const std::string_view item = text.substr(0, slash);
    text = slash == std::string_view::npos ? std::string_view() : text.substr(slash + 1);
    const size_t colon = item.find(':');
    double gpus = 0, weight = 0;
    if (colon == std::string_view::npos || !parse_number(item.substr(0, colon), gpus) ||
        !parse_number(item.substr(colon + 1), weight) || gpus < 1 || gpus != std::floor(gpus) || gpus > 1e6 ||
        weight < 0)
      return invalid("synth: mix entry \"" + std::string(item) + "\" is not GPUS:WEIGHT (e.g. 8:25)");
    mix.emplace_back(static_cast<int>(gpus), weight);
  }
  double total = 0;
  for (const auto& entry : mix) total += entry.second;
  if (!(total > 0)) return invalid("synth: mix needs at least one entry with a weight above 0");
  return mix;
}

Status check(const SynthSpec& s) {
  if (s.jobs < 1 || s.jobs > 100'000'000) return invalid("synth: jobs must be 1..100000000");
  if (!(s.load > 0)) return invalid("synth: load must be above 0");
  if (!(s.median_s > 0) || !(s.sigma >= 0)) return invalid("synth: median must be above 0 and sigma >= 0");
  if (!(s.min_s >= 1) || !(s.max_s >= s.min_s)) return invalid("synth: need 1 <= min <= max");
  if (s.users < 1) return invalid("synth: users must be >= 1");
  if (!(s.high >= 0 && s.high <= 1) || !(s.scavenger >= 0 && s.scavenger <= 1))
    return invalid("synth: high and scavenger must be between 0 and 1");
  return ok();
}

}  // namespace

Result<SynthSpec> parse_synth_spec(std::string_view text) {
  SynthSpec spec;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return invalid("synth: \"" + std::string(item) + "\" is not KEY=VALUE");
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "mix") {
      auto mix = parse_mix(value);
      if (!mix) return mix.error();
      spec.mix = std::move(mix).value();
      continue;
    }
    static constexpr std::string_view kKeys[] = {"jobs", "load",  "median", "sigma", "min",
                                                 "max",  "users", "seed",   "high",  "scavenger"};
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys))
      return invalid("synth: unknown key \"" + std::string(key) +
                     "\" (known: jobs, load, mix, median, sigma, min, max, users, seed, high, scavenger)");
    double v = 0;
    if (!parse_number(value, v)) return invalid("synth: " + std::string(key) + " is not a number");
    if (key == "jobs") spec.jobs = static_cast<int64_t>(v);
    else if (key == "load") spec.load = v;
    else if (key == "median") spec.median_s = v;
    else if (key == "sigma") spec.sigma = v;
    else if (key == "min") spec.min_s = v;
    else if (key == "max") spec.max_s = v;
    else if (key == "users") spec.users = static_cast<int>(v);
    else if (key == "high") spec.high = v;
    else if (key == "scavenger") spec.scavenger = v;
    else spec.seed = static_cast<uint64_t>(v);
  }
  if (auto s = check(spec); !s) return s.error();
  return spec;
}

std::string to_string(const SynthSpec& s) {
  auto num = [](double v) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, static_cast<size_t>(end - buf));
  };
  std::string mix;
  for (const auto& [gpus, weight] : s.mix) {
    if (!mix.empty()) mix += '/';
    mix += std::to_string(gpus);
    mix += ':';
    mix += num(weight);
  }
  std::string text = "jobs=" + std::to_string(s.jobs) + ",load=" + num(s.load) + ",mix=" + mix +
                     ",median=" + num(s.median_s) + ",sigma=" + num(s.sigma) + ",min=" + num(s.min_s) +
                     ",max=" + num(s.max_s) + ",users=" + std::to_string(s.users) + ",seed=" + std::to_string(s.seed);
  if (s.high > 0) text += ",high=" + num(s.high);
  if (s.scavenger > 0) text += ",scavenger=" + num(s.scavenger);
  return text;
}

Result<std::vector<TraceJob>> synthesize(const SynthSpec& spec, int64_t cluster_gpus) {
  if (auto s = check(spec); !s) return s.error();
  double total_weight = 0;
  for (const auto& [gpus, weight] : spec.mix) {
    if (gpus > cluster_gpus)
      return invalid("synth: mix asks for " + std::to_string(gpus) + "-GPU jobs, the cluster has " +
                     std::to_string(cluster_gpus) + " GPUs");
    total_weight += weight;
  }
  if (!(total_weight > 0)) return invalid("synth: mix needs at least one entry with a weight above 0");
  std::mt19937_64 rng(spec.seed);
  std::vector<TraceJob> jobs(static_cast<size_t>(spec.jobs));
  double work = 0;  // GPU-seconds asked by the whole trace
  for (size_t i = 0; i < jobs.size(); ++i) {
    double pick = uniform(rng) * total_weight;
    size_t m = 0;
    while (m + 1 < spec.mix.size() && (pick -= spec.mix[m].second) >= 0) ++m;
    const double d = spec.median_s * std::exp(spec.sigma * standard_normal(rng));
    TraceJob& job = jobs[i];
    job.job_id = "synth-" + std::to_string(i);
    job.gpus = spec.mix[m].first;
    job.duration_s = std::round(std::clamp(d, spec.min_s, spec.max_s));
    job.user = "u" + std::to_string(rng() % static_cast<uint64_t>(spec.users));
    job.line = static_cast<int>(i + 2);
    work += job.duration_s * job.gpus;
  }
  // Arrivals spread over the time the cluster needs for the work at the asked load: mean gap = span / jobs.
  const double mean_gap = work / (spec.load * static_cast<double>(cluster_gpus)) / static_cast<double>(jobs.size());
  double t = 0;
  for (TraceJob& job : jobs) {
    job.submit_s = std::round(t);
    t += -std::log(uniform(rng)) * mean_gap;
  }
  std::mt19937_64 qos_rng(spec.seed ^ 0x9e3779b97f4a7c15ULL);
  for (TraceJob& job : jobs) {
    const bool big = job.gpus > 8;
    if (uniform(qos_rng) < (big ? spec.high : spec.scavenger))
      job.qos = big ? railyard::jobs::Qos::kHigh : railyard::jobs::Qos::kScavenger;
  }
  return jobs;
}

void write_trace_csv(std::ostream& out, const std::vector<TraceJob>& jobs) {
  auto num = [](double v) {  // shortest text that reads back as the same double
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, static_cast<size_t>(end - buf));
  };
  out << "job_id,submit_s,duration_s,num_gpus,user,status,qos,dependency,array\n";
  for (const TraceJob& j : jobs) {
    out << j.job_id << ',' << num(j.submit_s) << ',' << num(j.duration_s) << ',' << j.gpus << ',' << j.user << ','
        << (j.fails ? "failed" : "unknown") << ',' << railyard::jobs::to_string(j.qos) << ',';
    for (size_t i = 0; i < j.after.size(); ++i) {
      const TraceJob::After& a = j.after[i];
      out << (i ? ";" : "") << railyard::jobs::to_string(a.type) << ':' << jobs[a.row].job_id;
      if (a.task >= 0) out << '_' << a.task;
    }
    out << ',' << (j.array ? j.array->text() : "") << '\n';
  }
}

}  // namespace railyard::sim
