// What the API shows: jobs, nodes and metrics rendered from the daemon's in-memory state.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "scheduler/daemon/agents.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::api {

// What a job's spec.env values show to a reader who may not see them: people keep HF_TOKEN and
// WANDB_API_KEY there. The keys stay, so a reader still sees which variables a job sets.
inline constexpr const char* kHiddenEnvValue = "<hidden>";
// Whether `viewer` may read the values of the job's spec.env: its owner and admins; nobody else, and never
// an anonymous reader (`viewer` null).
bool sees_env(const store::JobRecord& r, const daemon::Caller* viewer);
// A job as the API shows it to `viewer` (null: an anonymous reader). A task of an array has "array_job" and
// "array_task" (else null); an array has "array_tasks": {"total", "created", "active", "completed",
// "failed"} (else null). "env_hidden": true when the spec's env values were replaced by kHiddenEnvValue
// (sees_env is false and the job has env); every serialized spec goes through here. "held_by": who placed
// the hold of a HELD job (else null), "held_by_admin": whether with the admin role.
nlohmann::json job_json(const store::JobRecord& r, const lifecycle::JobTable& table,
                        const daemon::Caller* viewer);
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
