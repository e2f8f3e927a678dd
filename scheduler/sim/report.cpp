#include "scheduler/sim/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iomanip>

namespace railyard::sim {
namespace {

constexpr double kSlowdownBound = 10.0;  // seconds: bounded slowdown's floor on the run time

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Seconds as "12345 s (3.4 h)" for long spans; plain seconds below an hour.
std::string duration(double s) {
  if (std::abs(s) < 3600) return fixed(s, 0) + " s";
  if (std::abs(s) < 2 * 86400) return fixed(s, 0) + " s (" + fixed(s / 3600, 1) + " h)";
  return fixed(s, 0) + " s (" + fixed(s / 86400, 1) + " d)";
}

struct Row {
  std::string label;
  std::function<std::string(const PolicyReport&)> cell;
};

const std::vector<Row>& rows() {
  static const std::vector<Row> kRows = {
      {"jobs", [](const PolicyReport& r) { return std::to_string(r.jobs); }},
      {"finished", [](const PolicyReport& r) { return std::to_string(r.finished); }},
      {"rejected / unfinished",
       [](const PolicyReport& r) {
         return std::to_string(r.rejected) + " / " + std::to_string(r.unfinished);
       }},
      {"mean wait", [](const PolicyReport& r) { return duration(r.mean_wait_s); }},
      {"median wait", [](const PolicyReport& r) { return duration(r.median_wait_s); }},
      {"p99 wait", [](const PolicyReport& r) { return duration(r.p99_wait_s); }},
      {"mean JCT", [](const PolicyReport& r) { return duration(r.mean_jct_s); }},
      {"p99 JCT", [](const PolicyReport& r) { return duration(r.p99_jct_s); }},
      {"mean bounded slowdown", [](const PolicyReport& r) { return fixed(r.mean_bounded_slowdown, 3); }},
      {"makespan", [](const PolicyReport& r) { return duration(r.makespan_s); }},
      {"GPU utilization", [](const PolicyReport& r) { return fixed(100 * r.utilization, 1) + " %"; }},
      {"fragmentation", [](const PolicyReport& r) { return fixed(100 * r.fragmentation, 1) + " %"; }},
      {"multi-node jobs", [](const PolicyReport& r) { return std::to_string(r.multi_node_jobs); }},
      {"min leaf span share", [](const PolicyReport& r) { return fixed(100 * r.min_span_share, 1) + " %"; }},
      {"mean extra leaves", [](const PolicyReport& r) { return fixed(r.mean_extra_leaves, 3); }},
      {"mean comm slowdown", [](const PolicyReport& r) { return fixed(r.mean_comm_slowdown, 4); }},
      {"preemptions", [](const PolicyReport& r) { return std::to_string(r.preemptions); }},
      {"skipped rows", [](const PolicyReport& r) { return std::to_string(r.skipped_rows); }},
      {"scheduling passes", [](const PolicyReport& r) { return std::to_string(r.passes); }},
      {"wall time", [](const PolicyReport& r) { return fixed(r.wall_s, 2) + " s"; }},
  };
  return kRows;
}

void fill_span_stats(const SimResult& result, PolicyReport& r) {
  int64_t at_min = 0;
  double extra = 0;
  for (const JobResult& j : result.jobs) {
    if (j.first_start < 0 || j.nodes <= 1) continue;
    ++r.multi_node_jobs;
    if (j.leaves_spanned == j.min_leaves) ++at_min;
    extra += j.leaves_spanned - j.min_leaves;
  }
  if (r.multi_node_jobs > 0) {
    r.min_span_share = static_cast<double>(at_min) / static_cast<double>(r.multi_node_jobs);
    r.mean_extra_leaves = extra / static_cast<double>(r.multi_node_jobs);
  }
}

}  // namespace

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

PolicyReport summarize(const SimResult& result, int64_t skipped_rows) {
  PolicyReport r;
  r.policy = result.policy;
  r.jobs = static_cast<int64_t>(result.jobs.size());
  r.rejected = result.rejected;
  r.unfinished = result.unfinished;
  std::vector<double> waits, jcts, slowdowns, stretches;
  for (const JobResult& j : result.jobs) {
    if (j.first_start < 0) continue;
    waits.push_back(static_cast<double>(j.first_start - j.submit));
    stretches.push_back(j.comm_slowdown);
    if (j.end < 0) continue;
    const double jct = static_cast<double>(j.end - j.submit);
    jcts.push_back(jct);
    slowdowns.push_back(std::max(1.0, jct / std::max(j.duration_s, kSlowdownBound)));
  }
  r.finished = static_cast<int64_t>(jcts.size());
  r.mean_wait_s = mean(waits);
  r.median_wait_s = percentile(waits, 0.5);
  r.p99_wait_s = percentile(waits, 0.99);
  r.mean_jct_s = mean(jcts);
  r.p99_jct_s = percentile(jcts, 0.99);
  r.mean_bounded_slowdown = mean(slowdowns);
  r.mean_comm_slowdown = stretches.empty() ? 1.0 : mean(stretches);
  r.makespan_s = static_cast<double>(result.last_end - result.first_submit);
  if (r.makespan_s > 0 && result.cluster_gpus > 0)
    r.utilization = result.busy_gpu_s / (r.makespan_s * result.cluster_gpus);
  if (result.free_gpu_s > 0) r.fragmentation = result.fragmented_gpu_s / result.free_gpu_s;
  fill_span_stats(result, r);
  r.preemptions = result.preemptions;
  r.skipped_rows = skipped_rows;
  r.passes = result.passes;
  r.plan_conflicts = result.plan_conflicts;
  r.wall_s = result.wall_s;
  return r;
}

void print_table(std::ostream& out, const std::vector<PolicyReport>& reports) {
  size_t label_w = 0;
  for (const Row& row : rows()) label_w = std::max(label_w, row.label.size());
  std::vector<size_t> widths;
  for (const PolicyReport& r : reports) {
    size_t w = r.policy.size();
    for (const Row& row : rows()) w = std::max(w, row.cell(r).size());
    widths.push_back(w);
  }
  out << std::left << std::setw(static_cast<int>(label_w)) << "metric";
  for (size_t i = 0; i < reports.size(); ++i)
    out << "  " << std::right << std::setw(static_cast<int>(widths[i])) << reports[i].policy;
  out << '\n';
  for (const Row& row : rows()) {
    out << std::left << std::setw(static_cast<int>(label_w)) << row.label;
    for (size_t i = 0; i < reports.size(); ++i)
      out << "  " << std::right << std::setw(static_cast<int>(widths[i])) << row.cell(reports[i]);
    out << '\n';
  }
  for (const PolicyReport& r : reports)
    if (r.plan_conflicts > 0)
      out << "warning: " << r.policy << ": " << r.plan_conflicts
          << " planned starts were refused (GPU already held or job not pending)\n";
}

nlohmann::json to_json(const PolicyReport& r) {
  return {{"jobs", r.jobs},
          {"finished", r.finished},
          {"rejected", r.rejected},
          {"unfinished", r.unfinished},
          {"mean_wait_s", r.mean_wait_s},
          {"median_wait_s", r.median_wait_s},
          {"p99_wait_s", r.p99_wait_s},
          {"mean_jct_s", r.mean_jct_s},
          {"p99_jct_s", r.p99_jct_s},
          {"mean_bounded_slowdown", r.mean_bounded_slowdown},
          {"makespan_s", r.makespan_s},
          {"utilization", r.utilization},
          {"multi_node_jobs", r.multi_node_jobs},
          {"min_span_share", r.min_span_share},
          {"mean_extra_leaves", r.mean_extra_leaves},
          {"mean_comm_slowdown", r.mean_comm_slowdown},
          {"fragmentation", r.fragmentation},
          {"preemptions", r.preemptions},
          {"skipped_rows", r.skipped_rows},
          {"passes", r.passes},
          {"plan_conflicts", r.plan_conflicts},
          {"wall_s", r.wall_s}};
}

nlohmann::json to_json(const std::vector<PolicyReport>& reports, double wall_seconds) {
  nlohmann::json policies = nlohmann::json::object();
  for (const PolicyReport& r : reports) policies[r.policy] = to_json(r);
  return {{"policies", policies}, {"wall_seconds", wall_seconds}};
}

void write_jobs_csv_header(std::ostream& out) {
  out << "job_id,policy,submit_s,start_s,end_s,gpus,nodes,leaves_spanned,min_leaves,comm_slowdown,qos,preemptions\n";
}

void write_jobs_csv(std::ostream& out, const SimResult& result) {
  for (const JobResult& j : result.jobs) {
    out << j.name << ',' << result.policy << ',' << j.submit << ',';
    if (j.first_start >= 0) out << j.first_start;
    out << ',';
    if (j.end >= 0) out << j.end;
    out << ',' << j.gpus << ',' << j.nodes << ',' << j.leaves_spanned << ',' << j.min_leaves << ','
        << fixed(j.comm_slowdown, 6) << ',' << jobs::to_string(j.qos) << ',' << j.preemptions << '\n';
  }
}

}  // namespace railyard::sim
