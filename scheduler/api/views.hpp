// What the API shows: jobs, nodes and metrics rendered from the daemon's in-memory state.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "scheduler/daemon/agents.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::api {

// A job as the API shows it. A task of an array has "array_job" and "array_task" (else null); an array has
// "array_tasks": {"total", "created", "active", "completed", "failed"} (else null).
nlohmann::json job_json(const store::JobRecord& r, const lifecycle::JobTable& table);
// The allreduce size the job view's cost-model estimate is for (1 GiB, the CLI's `show --bytes` default).
inline constexpr double kEstimateBytes = 1024.0 * 1024 * 1024;
// The cost model's (topology/cost.hpp) allreduce estimate for the GPUs the job holds or last held, on the
// scheduler's cluster: {"allreduce_bytes", "seconds", "ring_seconds", "tree_seconds", "algorithm",
// "bus_gbytes_s", "bottleneck_gbits_s" (null for one GPU), "span", "rail_aligned"}; null when never placed.
nlohmann::json placement_estimate_json(const store::JobRecord& r, const topology::Cluster& cluster);
nlohmann::json nodes_json(const lifecycle::JobTable& table);
// GPUs busy in [since, until), averaged over each `step` seconds, derived from the job history: a job holds
// its GPUs (whole ones and the GPUs of its MIG slices) from start_time to end_time, or `now` while it runs.
// {"gpus": total, "since", "until", "step", "samples": [[step start, GPUs busy], ...]}. Earlier attempts of a
// requeued job are not in the history, so they do not count.
nlohmann::json utilization_json(const lifecycle::JobTable& table, int64_t since, int64_t until, int64_t step,
                                int64_t now);
// Prometheus text exposition format 0.0.4.
std::string metrics_text(const lifecycle::JobTable& table, const daemon::ServiceStats& stats);
// The agent protocol's metrics: connected nodes, refused agents, bad messages, launches.
std::string agent_metrics_text(const daemon::AgentHub& hub);

}  // namespace railyard::api
