// Metrics of a simulation run, and their outputs (side-by-side table, JSON, per-job CSV).
// Definitions: scheduler/sim/README.md ("Metrics").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "scheduler/sim/simulator.hpp"

namespace railyard::sim {

struct PolicyReport {
  std::string policy;
  int64_t jobs = 0;  // trace jobs simulated
  int64_t finished = 0;
  int64_t rejected = 0;
  int64_t unfinished = 0;
  double mean_wait_s = 0, median_wait_s = 0, p99_wait_s = 0;  // first start - submit, started jobs
  double mean_jct_s = 0, p99_jct_s = 0;                       // end - submit, finished jobs
  double mean_bounded_slowdown = 0;  // max(1, JCT / max(trace duration, 10 s)), finished jobs
  double makespan_s = 0;             // last end - first submit
  double utilization = 0;            // busy GPU-seconds / (GPUs * makespan)
  int64_t multi_node_jobs = 0;
  double min_span_share = 0;      // multi-node jobs with leaves_spanned == min_leaves
  double mean_extra_leaves = 0;   // mean of leaves_spanned - min_leaves, multi-node jobs
  double mean_comm_slowdown = 1;  // mean stretch of the last placement, started jobs
  double fragmentation = 0;       // fragmented free GPU-seconds / free GPU-seconds
  int64_t preemptions = 0;
  int64_t skipped_rows = 0;
  int64_t passes = 0;
  int64_t plan_conflicts = 0;
  double wall_s = 0;
};

PolicyReport summarize(const SimResult& result, int64_t skipped_rows);

// Percentile with linear interpolation between closest ranks (numpy's default); 0 for an empty set.
// Sorts `values`.
double percentile(std::vector<double>& values, double p);

// Policies as columns, metrics as rows.
void print_table(std::ostream& out, const std::vector<PolicyReport>& reports);
nlohmann::json to_json(const PolicyReport& report);
// {"policies": {name: {...}}, "wall_seconds": ...}
nlohmann::json to_json(const std::vector<PolicyReport>& reports, double wall_seconds);

// Header and one row per job (JobResult::name for job_id): job_id,policy,submit_s,start_s,end_s,gpus,nodes,
// leaves_spanned,min_leaves,comm_slowdown,qos,preemptions (start_s / end_s empty when the job never started /
// ended; start_s is the first start, the placement columns are the last one's).
void write_jobs_csv_header(std::ostream& out);
void write_jobs_csv(std::ostream& out, const SimResult& result);

}  // namespace railyard::sim
