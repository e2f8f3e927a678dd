// Synthetic job traces: a mixed workload with a given size mix, run-time distribution and offered load, for
// load sweeps beyond the shared traces (`railyard sim --synth SPEC`).
//
// Offered load is GPU-seconds asked per second over the cluster's GPUs: arrivals are a Poisson process whose
// rate is load × cluster GPUs / E[GPUs × duration], so load 1.0 asks for exactly the whole cluster on average
// (a queue that neither drains nor grows without bound only with a perfect packer) and 1.2 more than it has.
// Sizes and durations are drawn independently; durations are log-normal, clamped to [min_s, max_s].
//
// Contract: deterministic for a given spec and cluster size (std::mt19937_64 with the spec's seed, and
// sampling done here, not by <random>'s distributions, whose output the standard leaves to the library).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "scheduler/sim/trace.hpp"

namespace railyard::sim {

struct SynthSpec {
  int64_t jobs = 10000;
  double load = 1.0;
  // (GPUs, weight) by job count. Default: 1 to 256 GPUs, most jobs small, most GPU-time in large jobs.
  std::vector<std::pair<int, double>> mix = {{1, 30}, {2, 8},  {4, 10},  {8, 25},   {16, 10},
                                             {32, 8}, {64, 5}, {128, 3}, {256, 1}};
  double median_s = 3600;  // median run time
  double sigma = 1.5;      // log-normal shape: p90 ≈ median × e^(1.28 σ)
  double min_s = 60, max_s = 3 * 86400.0;
  int users = 16;
  uint64_t seed = 1;
  // QoS: each job of more than 8 GPUs (more than a DGX node) is high with probability `high`, each job of 8 or
  // fewer scavenger with probability `scavenger`; the others are normal. Drawn from a generator of their own,
  // so the sizes, run times, users and arrivals are those of the same spec without them.
  double high = 0, scavenger = 0;
};

// "jobs=100000,load=0.8,mix=1:30/8:50/64:20,median=3600,sigma=1.5,min=60,max=259200,users=16,seed=7,
// high=0.5,scavenger=0.5"; every key optional (defaults above). Errors name the bad key or value.
Result<SynthSpec> parse_synth_spec(std::string_view text);
// The spec back as text, keys in the order above (for headers and results pages; high and scavenger only when
// above 0).
std::string to_string(const SynthSpec& spec);

// A trace for a cluster of `cluster_gpus` GPUs; mix entries larger than the cluster are an error.
Result<std::vector<TraceJob>> synthesize(const SynthSpec& spec, int64_t cluster_gpus);

// Writes `jobs` as a trace CSV that read_trace reads back to the same jobs (duration and submit in seconds;
// status failed or unknown, QoS, dependencies by job_id, array). `jobs` is in submit order, as read_trace
// and synthesize give it, so a dependency names an earlier row.
void write_trace_csv(std::ostream& out, const std::vector<TraceJob>& jobs);

}  // namespace railyard::sim
