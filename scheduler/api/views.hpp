// What the API shows: jobs, nodes and metrics rendered from the daemon's in-memory state.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "scheduler/daemon/agents.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::api {

nlohmann::json job_json(const store::JobRecord& r, const topology::Cluster& cluster);
nlohmann::json nodes_json(const daemon::JobTable& table);
// Prometheus text exposition format 0.0.4.
std::string metrics_text(const daemon::JobTable& table, const daemon::ServiceStats& stats);
// The agent protocol's metrics: connected nodes, refused agents, bad messages, launches.
std::string agent_metrics_text(const daemon::AgentHub& hub);

}  // namespace railyard::api
