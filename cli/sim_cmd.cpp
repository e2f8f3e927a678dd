// `railyard sim`: replay a job trace through the real scheduling core on a virtual cluster, once per policy,
// and print the policies side by side. The simulator itself is scheduler/sim (README there).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "scheduler/queue/priority.hpp"
#include "scheduler/sim/report.hpp"
#include "scheduler/sim/simulator.hpp"
#include "scheduler/sim/synth.hpp"
#include "scheduler/sim/trace.hpp"
#include "topology/generator.hpp"
#include "topology/io.hpp"

namespace railyard::cli {
namespace {

struct SimCmdOptions {
  std::string cluster_file;
  std::string preset;
  int sus = 1;
  int nodes = 0;
  int leaf_size = 32;
  double oversubscription = 1.0;
  std::string profile = "dgx-h100";
  std::string trace;
  std::string synth;      // --synth SPEC instead of --trace
  std::string trace_out;  // write the trace that was simulated
  std::vector<std::string> policies = sim::policy_names();
  int scale_gpus = 1;
  double load = 1.0;
  std::optional<double> offered_load;  // --offered-load: submit times scaled to it
  int64_t limit = 0;
  std::string user;
  bool json = false;
  std::string jobs_out;
  std::string on_bad_row = "skip";
  int64_t pass_interval_s = 0;
  bool full_passes = false;
  int64_t compact_wait_s = sched::PolicyConfig{}.compact_wait_s;
  int64_t compact_wait_max_s = sched::PolicyConfig{}.compact_wait_max_s;
  double compact_wait_share = sched::PolicyConfig{}.compact_wait_share;
  std::string priority_weights;
  bool no_preemption = false;
  bool progress = false;
  int threads = 1;
  sim::CommParams comm;
  int max_problems_shown = 10;
};

topology::Cluster build_cluster(const SimCmdOptions& o) {
  const int sources = !o.cluster_file.empty() + !o.preset.empty() + (o.nodes > 0);
  if (sources != 1) fail_usage("give exactly one of --cluster FILE, --preset NAME (with --sus), --nodes N");
  Result<topology::Cluster> c =
      !o.cluster_file.empty() ? topology::load_cluster_file(o.cluster_file, o.profile)
      : !o.preset.empty()     ? topology::generate_superpod(o.preset, o.sus)
                              : topology::generate_fat_tree({.nodes = o.nodes,
                                                             .leaf_size = o.leaf_size,
                                                             .profile = o.profile,
                                                             .leaf_oversubscription = o.oversubscription});
  if (!c) fail(c.error());
  return std::move(c).value();
}

sim::Trace load_trace(const SimCmdOptions& o, const topology::Cluster& cluster) {
  if (o.trace.empty() == o.synth.empty()) fail_usage("give exactly one of --trace FILE, --synth SPEC");
  if (!o.synth.empty()) {
    if (o.scale_gpus != 1 || o.limit > 0 || !o.user.empty())
      fail_usage("--scale-gpus, --limit and --user apply to --trace only (--synth sets sizes and counts)");
    if (o.offered_load) fail_usage("--offered-load applies to --trace only (--synth takes load=L)");
    auto spec = sim::parse_synth_spec(o.synth);
    if (!spec) fail_usage(spec.error().message);
    auto jobs = sim::synthesize(*spec, cluster.gpu_count());
    if (!jobs) fail_usage(jobs.error().message);
    sim::Trace trace;
    trace.jobs = std::move(jobs).value();
    for (auto& job : trace.jobs) job.submit_s /= o.load;
    return trace;
  }
  sim::TraceOptions t;
  t.scale_gpus = o.scale_gpus;
  t.load = o.load;
  t.limit = o.limit;
  t.user = o.user;
  t.max_gpus = cluster.gpu_count();
  t.stop_on_bad_row = o.on_bad_row == "stop";
  auto trace = sim::load_trace_file(o.trace, t);
  if (!trace) fail(trace.error());
  const auto shown = std::min<size_t>(trace->problems.size(), static_cast<size_t>(o.max_problems_shown));
  for (size_t i = 0; i < shown; ++i)
    std::cerr << "railyard: " << o.trace << ": " << trace->problems[i] << "\n";
  if (trace->problems.size() > shown)
    std::cerr << "railyard: ... and " << trace->problems.size() - shown << " more bad rows\n";
  if (trace->skipped_rows > 0) std::cerr << "railyard: skipped " << trace->skipped_rows << " bad rows\n";
  if (trace->jobs.empty()) fail_usage(o.trace + ": no jobs to simulate (after filters)");
  if (o.offered_load)
    if (auto divisor = sim::set_offered_load(trace->jobs, cluster.gpu_count(), *o.offered_load); !divisor)
      fail_usage(o.trace + ": " + divisor.error().message);
  return std::move(trace).value();
}

void write_trace_out(const std::string& path, const std::vector<sim::TraceJob>& jobs) {
  std::ofstream out(path);
  if (!out) fail(invalid("cannot write --trace-out file \"" + path + "\""));
  sim::write_trace_csv(out, jobs);
  out.flush();
  if (!out) fail(internal_error("write error on \"" + path + "\""));
}

// One status line on stderr for all policies: "sim  railyard 42%  first-fit 17%  fifo 3%".
class ProgressLine {
 public:
  ProgressLine(const std::vector<std::string>& names, bool enabled)
      : names_(names), done_(names.size(), 0), on_(enabled) {}
  void update(size_t policy, int64_t done, int64_t total) {
    if (!on_ || total <= 0) return;
    std::lock_guard lock(mu_);
    done_[policy] = static_cast<int>(100 * done / total);
    std::string line = "\rsim";
    for (size_t i = 0; i < names_.size(); ++i)
      line += "  " + names_[i] + " " + std::to_string(done_[i]) + "%";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }
  void finish() {
    if (on_) std::fputs("\n", stderr);
  }

 private:
  std::vector<std::string> names_;
  std::vector<int> done_;
  bool on_;
  std::mutex mu_;
};

// Runs every policy on its own fresh virtual cluster, `threads` at a time.
std::vector<sim::SimResult> run_policies(const SimCmdOptions& o, const topology::Cluster& cluster,
                                         const std::vector<sim::TraceJob>& jobs,
                                         const std::vector<sim::PolicySpec>& policies) {
  std::vector<std::string> names;
  for (const auto& p : policies) names.push_back(p.name);
  ProgressLine progress(names, o.progress || isatty(STDERR_FILENO));
  sim::SimOptions options;
  options.pass_interval_s = o.pass_interval_s;
  options.full_passes = o.full_passes;
  options.comm = o.comm;
  std::vector<sim::SimResult> results(policies.size());
  auto run_one = [&](size_t i) {
    sim::ProgressFn fn = [&progress, i](int64_t done, int64_t total) { progress.update(i, done, total); };
    results[i] = sim::simulate(cluster, jobs, policies[i], options, fn);
  };
  const size_t width = static_cast<size_t>(std::max(1, o.threads));
  for (size_t first = 0; first < policies.size(); first += width) {
    std::vector<std::thread> workers;
    for (size_t i = first; i < std::min(policies.size(), first + width); ++i)
      workers.emplace_back(run_one, i);
    for (auto& w : workers) w.join();
  }
  progress.finish();
  return results;
}

void write_jobs_out(const std::string& path, const std::vector<sim::SimResult>& results) {
  std::ofstream out(path);
  if (!out) fail(invalid("cannot write --jobs-out file \"" + path + "\""));
  sim::write_jobs_csv_header(out);
  for (const auto& r : results) sim::write_jobs_csv(out, r);
  out.flush();
  if (!out) fail(internal_error("write error on \"" + path + "\""));
}

void print_header(const SimCmdOptions& o, const topology::Cluster& cluster, const sim::Trace& trace) {
  std::cout << "cluster  " << cluster.name() << ": " << cluster.node_count() << " nodes, "
            << cluster.gpu_count() << " GPUs, " << cluster.leaves().size() << " leaf groups\n"
            << "trace    " << (o.synth.empty() ? o.trace : "synthetic " + o.synth) << ": " << trace.jobs.size()
            << " jobs";
  if (!o.user.empty()) std::cout << " of user " << o.user;
  std::cout << " (GPUs x" << o.scale_gpus;
  if (!o.offered_load) std::cout << ", load x" << o.load;
  if (o.limit > 0) std::cout << ", first " << o.limit;
  std::cout << ", " << trace.skipped_rows << " rows skipped)\n";
  if (auto load = sim::offered_load(trace.jobs, cluster.gpu_count())) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", *load);
    std::cout << "load     offered " << text << " (GPU-seconds asked over the submit span, per GPU)\n";
  }
  if (o.pass_interval_s > 0)
    std::cout << "passes   at most one per " << o.pass_interval_s << " s of virtual time\n";
  if (o.compact_wait_s > 0)
    std::cout << "compact  waits for a placement on the fewest leaf groups: with a reservation that makes it faster "
                 "up to "
              << o.compact_wait_max_s << " s, else " << o.compact_wait_share << "x its time limit (at least "
              << o.compact_wait_s << " s)\n";
  else
    std::cout << "compact  off\n";
  std::cout << '\n';
}

void run_sim(const SimCmdOptions& o) {
  const auto wall_start = std::chrono::steady_clock::now();
  if (o.pass_interval_s < 0) fail_usage("--pass-interval must be >= 0");
  if (o.threads < 1) fail_usage("--threads must be >= 1");
  if (o.compact_wait_s < 0 || o.compact_wait_max_s < 0 || !(o.compact_wait_share >= 0))
    fail_usage("--compact-wait, --compact-wait-max and --compact-wait-share must be >= 0");
  for (double share : {o.comm.share_in_node, o.comm.share_multi_node})
    if (!(share >= 0 && share <= 1)) fail_usage("--comm-share-* must be between 0 and 1");
  if (!(o.comm.max_ratio >= 1)) fail_usage("--comm-max-ratio must be >= 1");
  std::vector<sim::PolicySpec> policies;
  for (const auto& name : o.policies) {
    auto p = sim::policy_by_name(name);
    if (!p) fail(p.error());
    // first-fit ignores the compact wait (no leaf-aware placement); slurm-tree never waits (its definition)
    if (p->config.compact_wait_s > 0) {
      p->config.compact_wait_s = o.compact_wait_s;
      p->config.compact_wait_max_s = o.compact_wait_max_s;
      p->config.compact_wait_share = o.compact_wait_share;
    }
    if (o.no_preemption) p->config.preemption = false;
    if (auto s = sched::apply_priority_weights(o.priority_weights, p->config); !s)
      fail_usage("--priority-weights " + s.error().message);
    policies.push_back(std::move(p).value());
  }
  const topology::Cluster cluster = build_cluster(o);
  const sim::Trace trace = load_trace(o, cluster);
  if (!o.trace_out.empty()) write_trace_out(o.trace_out, trace.jobs);
  const auto results = run_policies(o, cluster, trace.jobs, policies);
  std::vector<sim::PolicyReport> reports;
  for (const auto& r : results) reports.push_back(sim::summarize(r, trace.skipped_rows));
  if (!o.jobs_out.empty()) write_jobs_out(o.jobs_out, results);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  if (o.json) {
    nlohmann::json out = sim::to_json(reports, wall);
    const auto load = sim::offered_load(trace.jobs, cluster.gpu_count());
    out["offered_load"] = load ? nlohmann::json(*load) : nlohmann::json(nullptr);
    std::cout << out.dump(2) << std::endl;
    return;
  }
  print_header(o, cluster, trace);
  sim::print_table(std::cout, reports);
  std::cout << "\nwall time " << format_seconds(wall) << '\n';
}

void add_options(CLI::App& cmd, SimCmdOptions& o) {
  auto* cluster = cmd.add_option("--cluster", o.cluster_file, "Cluster file (JSON or Slurm topology.conf)");
  auto* preset =
      cmd.add_option("--preset", o.preset, "SuperPOD preset, e.g. dgx-h100-superpod")->excludes(cluster);
  cmd.add_option("--sus", o.sus, "Scalable units of the preset")->capture_default_str()->needs(preset);
  auto* nodes = cmd.add_option("--nodes", o.nodes, "Nodes of a plain fat tree")->excludes(cluster, preset);
  cmd.add_option("--leaf-size", o.leaf_size, "Fat tree: nodes per leaf")->capture_default_str()->needs(nodes);
  cmd.add_option("--oversubscription", o.oversubscription, "Fat tree: leaf uplink oversubscription (2 = 2:1)")
      ->capture_default_str()
      ->needs(nodes);
  cmd.add_option("--profile", o.profile, "Node profile (fat tree; topology.conf nodes without one)")
      ->capture_default_str();
  auto* trace = cmd.add_option("--trace", o.trace, "Trace CSV: job_id,submit_s,duration_s,num_gpus,user,status");
  cmd.add_option("--synth", o.synth,
                 "A synthetic mixed workload instead of --trace: KEY=VALUE,... with keys jobs, load, "
                 "mix (GPUS:WEIGHT/...), median, sigma, min, max (run time, s), users, seed")
      ->excludes(trace);
  cmd.add_option("--trace-out", o.trace_out, "Write the simulated trace (after filters, or --synth's) as CSV");
  cmd.add_option("--policy", o.policies, "Policies to compare, comma separated")
      ->delimiter(',')
      ->check(CLI::IsMember(sim::policy_names()))
      ->capture_default_str();
  cmd.add_option("--scale-gpus", o.scale_gpus, "Multiply every job's GPU count")->capture_default_str();
  auto* load = cmd.add_option("--load", o.load, "Divide submit times by this (> 1: more load)")->capture_default_str();
  cmd.add_option("--offered-load", o.offered_load,
                 "--trace: scale submit times so that the offered load (GPU-seconds asked over the submit span, "
                 "per cluster GPU) is this")
      ->excludes(load);
  cmd.add_option("--limit", o.limit, "Only the first N rows (after --user)");
  cmd.add_option("--user", o.user, "Only rows of this user (philly: a virtual cluster id)");
  cmd.add_flag("--json", o.json, "JSON on standard output instead of the table");
  cmd.add_option("--jobs-out", o.jobs_out, "Write a per-job CSV of every policy to this file");
  cmd.add_option("--on-bad-row", o.on_bad_row, "skip: report and go on; stop: exit 2 at the first")
      ->check(CLI::IsMember({"skip", "stop"}))
      ->capture_default_str();
  cmd.add_option("--pass-interval", o.pass_interval_s,
                 "At most one scheduling pass per this many virtual seconds")
      ->capture_default_str();
  cmd.add_flag("--full-passes", o.full_passes,
               "Every pass examines every waiting job (by default a pass skips the jobs that cannot start and "
               "leaves their reasons; the starts are the same)");
  cmd.add_option("--compact-wait", o.compact_wait_s,
                 "Seconds a multi-node job that fits now only on more leaf groups than its minimum waits for "
                 "a placement on its minimum (0: off)")
      ->capture_default_str();
  cmd.add_option("--compact-wait-max", o.compact_wait_max_s,
                 "Longest compact wait (seconds)")
      ->capture_default_str();
  cmd.add_option("--compact-wait-share", o.compact_wait_share,
                 "Compact wait that buys the job no speed by the cost model, or without a reservation: this "
                 "many times the job's time limit (--compact-wait at least)")
      ->capture_default_str();
  cmd.add_option("--priority-weights", o.priority_weights,
                 "Multifactor weights to change, e.g. size=0 (keys qos, age, fairshare, size), as the daemon's");
  cmd.add_flag("--no-preemption", o.no_preemption,
               "High-QoS jobs never preempt scavenger ones (by default they do, to start or to start compact)");
  cmd.add_flag("--progress", o.progress, "Progress on stderr even when it is not a terminal");
  cmd.add_option("--threads", o.threads, "Policies simulated at once")->capture_default_str();
  cmd.add_option("--comm-share-node", o.comm.share_in_node, "Comm share of step time, 2..8 GPU jobs")
      ->capture_default_str();
  cmd.add_option("--comm-share-multi", o.comm.share_multi_node, "Comm share of step time, multi-node jobs")
      ->capture_default_str();
  cmd.add_option("--comm-max-ratio", o.comm.max_ratio, "Cap on T_placed / T_ideal")->capture_default_str();
}

}  // namespace

void add_sim_commands(CLI::App& app) {
  auto o = std::make_shared<SimCmdOptions>();
  auto* cmd = app.add_subcommand("sim", "Replay a job trace through the scheduler on a virtual cluster");
  cmd->footer(
      "Policies: railyard (topology placement, backfill, compact wait), first-fit (topology-oblivious,\n"
      "backfill), fifo (topology placement, no backfill), slurm-tree (topology placement, backfill, no compact\n"
      "wait). Model and metrics: scheduler/sim/README.md.");
  add_options(*cmd, *o);
  cmd->callback([o] { run_sim(*o); });
}

}  // namespace railyard::cli
