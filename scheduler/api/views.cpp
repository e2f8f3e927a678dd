#include "scheduler/api/views.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "jobs/spec_json.hpp"
#include "topology/cost.hpp"

namespace railyard::api {
namespace {

using nlohmann::json;

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

std::string gpu_type_of(const store::JobRecord& r, const topology::Cluster& c) {
  if (!r.spec.gpu_type.empty()) return r.spec.gpu_type;
  const topology::GpuId g = !r.gpus.empty() ? r.gpus.front() : !r.slices.empty() ? r.slices.front().gpu : -1;
  return g >= 0 ? c.profile_of(c.node_of(g)).gpu_type : "any";
}

json array_tasks_json(const store::JobRecord& r, const lifecycle::JobTable& table) {
  const lifecycle::ArrayProgress* a = r.spec.array ? table.array(r.id) : nullptr;
  if (!a) return nullptr;
  return {{"total", a->total},
          {"created", a->created()},
          {"active", a->active},
          {"completed", a->completed},
          {"failed", a->failed}};
}

// The spec as `viewer` may see it, and whether its env values were hidden.
std::pair<json, bool> spec_for(const store::JobRecord& r, const daemon::Caller* viewer) {
  json spec = jobs::to_json(r.spec);
  if (r.spec.env.empty() || sees_env(r, viewer)) return {std::move(spec), false};
  for (auto& [key, value] : spec["env"].items()) value = kHiddenEnvValue;
  return {std::move(spec), true};
}

}  // namespace

bool sees_env(const store::JobRecord& r, const daemon::Caller* viewer) {
  return viewer && (viewer->admin() || viewer->user == r.spec.user);
}

json job_json(const store::JobRecord& r, const lifecycle::JobTable& table, const daemon::Caller* viewer) {
  const topology::Cluster& cluster = table.cluster();
  json gpu_ids = json::array();
  for (auto g : r.gpus) gpu_ids.push_back(g);
  for (const auto& s : r.slices)
    gpu_ids.push_back({{"gpu", s.gpu}, {"mig", s.profile}, {"first_slot", s.first_slot}});
  const bool placed = !r.nodes.empty();
  auto [spec, env_hidden] = spec_for(r, viewer);
  return {{"id", r.id},
          {"name", r.spec.name},
          {"user", r.spec.user},
          {"project", r.spec.project},
          {"state", jobs::to_string(r.state)},
          {"gpus", r.spec.total_gpus()},
          {"gpu_ids", std::move(gpu_ids)},
          {"nodes", r.nodes},
          {"gpu_type", gpu_type_of(r, cluster)},
          {"submit_time", r.submit_time},
          {"start_time", opt(r.start_time)},
          {"end_time", opt(r.end_time)},
          {"exit_code", opt(r.exit_code)},
          {"reason", !table.starting_note(r).empty() ? json(table.starting_note(r))
                     : r.reason.empty()             ? json(nullptr)
                                                    : json(r.reason)},
          {"estimated_start", opt(r.estimated_start)},
          {"leaves_spanned", placed ? json(r.leaves_spanned) : json(nullptr)},
          {"min_leaves", placed ? json(r.min_leaves) : json(nullptr)},
          {"time_to_train_s", opt(r.time_to_train_s)},
          {"array_job", r.spec.array_job != 0 ? json(r.spec.array_job) : json(nullptr)},
          {"array_task", r.spec.array_job != 0 ? json(r.spec.array_task) : json(nullptr)},
          {"array_tasks", array_tasks_json(r, table)},
          {"held_by", r.held_by.empty() ? json(nullptr) : json(r.held_by)},
          {"held_by_admin", r.held_by_admin},
          {"env_hidden", env_hidden},
          {"spec", std::move(spec)}};
}

json placement_estimate_json(const store::JobRecord& r, const topology::Cluster& cluster) {
  // MIG slices count their GPU once: the estimate is for the GPUs the job's ranks talk across.
  std::vector<topology::GpuId> gpus = r.gpus;
  for (const auto& s : r.slices) gpus.push_back(s.gpu);
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  if (gpus.empty() || gpus.front() < 0 || gpus.back() >= cluster.gpu_count()) return nullptr;
  const auto e = topology::estimate_allreduce(cluster, gpus, kEstimateBytes);
  return {{"allreduce_bytes", static_cast<int64_t>(kEstimateBytes)},
          {"seconds", e.seconds},
          {"ring_seconds", e.ring_seconds},
          {"tree_seconds", e.tree_seconds},
          {"algorithm", e.ring_seconds <= e.tree_seconds ? "ring" : "tree"},
          {"bus_gbytes_s", e.bus_gbytes_s},
          {"bottleneck_gbits_s",
           std::isfinite(e.bottleneck_gbits_s) ? json(e.bottleneck_gbits_s) : json(nullptr)},
          {"span", std::string(topology::to_string(e.span))},
          {"rail_aligned", e.rail_aligned}};
}

json nodes_json(const lifecycle::JobTable& table) {
  const auto& c = table.cluster();
  const std::vector<jobs::JobId> owners = table.gpu_owners();
  json out = json::array();
  for (topology::NodeId n = 0; n < c.node_count(); ++n) {
    const auto& node = c.node(n);
    int used = 0;
    for (int g = node.first_gpu; g < node.first_gpu + node.gpus; ++g)
      used += owners[static_cast<size_t>(g)] != 0;
    const auto leaf = node.leaf();
    out.push_back(
        {{"name", node.name},
         {"profile", c.profile_of(n).name},
         {"gpu_type", c.profile_of(n).gpu_type},
         {"gpus", node.gpus},
         {"gpus_allocated", used},
         {"leaf", leaf >= 0 ? json(c.domain(leaf).name) : json(nullptr)},
         {"health", sched::to_string(table.health(n))},
         {"reason", table.health_reason(n).empty() ? json(nullptr) : json(table.health_reason(n))}});
  }
  return out;
}

json utilization_json(const lifecycle::JobTable& table, int64_t since, int64_t until, int64_t step,
                      int64_t now) {
  // A sweep over (time, +-GPUs) events clipped to the window, in one pass over the history.
  // Every run counts, the earlier runs of requeued jobs too.
  std::vector<std::pair<int64_t, int64_t>> events;
  for (const auto& [key, r] : table.runs()) {
    const int64_t from = std::max(r.start, since), to = std::min(r.end.value_or(now), until);
    if (to <= from) continue;
    std::vector<topology::GpuId> gpus = r.gpus;
    for (const auto& s : r.slices) gpus.push_back(s.gpu);
    std::sort(gpus.begin(), gpus.end());
    const auto held = static_cast<int64_t>(std::unique(gpus.begin(), gpus.end()) - gpus.begin());
    events.emplace_back(from, held);
    events.emplace_back(to, -held);
  }
  std::sort(events.begin(), events.end());
  json samples = json::array();
  size_t next = 0;
  int64_t busy = 0;
  for (int64_t t0 = since; t0 < until; t0 += step) {
    const int64_t t1 = std::min(t0 + step, until);
    double gpu_seconds = 0;
    int64_t t = t0;
    for (; next < events.size() && events[next].first < t1; ++next) {
      gpu_seconds += static_cast<double>(busy) * static_cast<double>(events[next].first - t);
      t = events[next].first;
      busy += events[next].second;
    }
    gpu_seconds += static_cast<double>(busy) * static_cast<double>(t1 - t);
    samples.push_back({t0, gpu_seconds / static_cast<double>(t1 - t0)});
  }
  return {{"gpus", table.cluster().gpu_count() - table.removed_gpus()},  // capacity: removed nodes are not
          {"since", since},
          {"until", until},
          {"step", step},
          {"samples", std::move(samples)}};
}

std::string metrics_text(const lifecycle::JobTable& table, const daemon::ServiceStats& stats) {
  constexpr std::array kStates = {jobs::JobState::kPending,   jobs::JobState::kHeld,
                                  jobs::JobState::kStarting,  jobs::JobState::kRunning,
                                  jobs::JobState::kCompleted, jobs::JobState::kFailed,
                                  jobs::JobState::kCancelled, jobs::JobState::kTimeout,
                                  jobs::JobState::kNodeFail,  jobs::JobState::kPreempted,
                                  jobs::JobState::kOutOfMemory};
  std::map<jobs::JobState, int64_t> by_state;
  for (const auto& [id, r] : table.jobs()) ++by_state[r.state];
  int64_t allocated = 0;
  for (auto o : table.gpu_owners()) allocated += o != 0;
  const int64_t removed = table.removed_gpus();
  const int64_t total = table.cluster().gpu_count() - removed;  // capacity
  std::string m;
  auto metric = [&](const char* name, const char* type, const char* help, const std::string& lines) {
    m += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + lines;
  };
  metric("railyard_queue_length", "gauge", "Jobs waiting to start (PENDING).",
         "railyard_queue_length " + std::to_string(by_state[jobs::JobState::kPending]) + "\n");
  std::string lines;
  for (auto s : kStates)
    lines += "railyard_jobs{state=\"" + std::string(jobs::to_string(s)) + "\"} " +
             std::to_string(by_state[s]) + "\n";
  metric("railyard_jobs", "gauge", "Jobs by state.", lines);
  metric("railyard_jobs_parked", "gauge",
         "Waiting jobs left out of scheduling passes until they or a job they name change (held, or waiting "
         "on a dependency).",
         "railyard_jobs_parked " + std::to_string(table.parked_count()) + "\n");
  metric("railyard_scheduling_pass_seconds", "summary", "Duration of scheduling passes.",
         "railyard_scheduling_pass_seconds_sum " + std::to_string(stats.pass_seconds_sum) +
             "\nrailyard_scheduling_pass_seconds_count " + std::to_string(stats.passes_total) + "\n");
  metric("railyard_scheduling_last_pass_seconds", "gauge", "Duration of the last scheduling pass.",
         "railyard_scheduling_last_pass_seconds " + std::to_string(stats.last_pass_seconds) + "\n");
  metric("railyard_scheduling_cut_passes_total", "counter",
         "Scheduling passes that stopped at their time budget (--pass-budget-ms) before the end of the queue.",
         "railyard_scheduling_cut_passes_total " + std::to_string(stats.cut_passes_total) + "\n");
  metric("railyard_jobs_not_reached", "gauge", "Pending jobs the last scheduling pass did not reach (its budget).",
         "railyard_jobs_not_reached " + std::to_string(stats.last_unexamined) + "\n");
  metric("railyard_gpus_allocated", "gauge", "GPUs held by STARTING or RUNNING jobs.",
         "railyard_gpus_allocated " + std::to_string(allocated) + "\n");
  metric("railyard_gpus_free", "gauge", "GPUs of nodes not removed that no job holds.",
         "railyard_gpus_free " + std::to_string(total - allocated) + "\n");
  metric("railyard_gpus_removed", "gauge", "GPUs of removed nodes (not capacity).",
         "railyard_gpus_removed " + std::to_string(removed) + "\n");
  metric("railyard_submits_total", "counter", "Jobs accepted since start.",
         "railyard_submits_total " + std::to_string(stats.submits_total) + "\n");
  metric("railyard_array_tasks_total", "counter", "Jobs created as the tasks of arrays since start.",
         "railyard_array_tasks_total " + std::to_string(stats.array_tasks_total) + "\n");
  metric("railyard_submit_commits_total", "counter", "Store transactions that carried submits.",
         "railyard_submit_commits_total " + std::to_string(stats.submit_commits_total) + "\n");
  metric("railyard_log_syncs_total", "counter",
         "Syncs of the state database's log for passes and agent reports (not by an acknowledged commit).",
         "railyard_log_syncs_total " + std::to_string(stats.log_syncs_total) + "\n");
  metric("railyard_submits_synced", "gauge",
         "1: a submit is acknowledged once on disk (fsynced); 0: once written to the log "
         "(--submit-durability written).",
         std::string("railyard_submits_synced ") + (stats.submits_synced ? "1" : "0") + "\n");
  metric("railyard_deferred_reports_total", "counter",
         "Agent reports (launches, ends) written with a later transaction instead of one of their own.",
         "railyard_deferred_reports_total " + std::to_string(stats.deferred_batches_total) + "\n");
  return m;
}

std::string agent_metrics_text(const daemon::AgentHub& hub) {
  const auto& s = hub.stats();
  std::string m;
  auto metric = [&](const std::string& name, const char* type, const char* help, int64_t v) {
    m += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
         std::to_string(v) + "\n";
  };
  metric("railyard_agents_connected_nodes", "gauge", "Nodes whose agent is connected.",
         static_cast<int64_t>(hub.connected_nodes()));
  metric("railyard_agent_refused_total", "counter", "Agent connections refused (bad secret, ...).",
         s.refused_total);
  metric("railyard_agent_bad_messages_total", "counter", "Malformed or unknown agent messages.",
         s.bad_messages_total);
  metric("railyard_agent_launches_total", "counter", "Launch orders sent to agents.", s.launches_total);
  return m;
}

}  // namespace railyard::api
