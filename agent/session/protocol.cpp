#include "agent/session/protocol.hpp"

#include <chrono>
#include <fstream>
#include <limits>
#include <type_traits>

#include "jobs/spec_json.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;
using nlohmann::json;

Result<LaunchRequest> parse_launch(const json& o) {
  try {
    return to_launch_request(o.get<protocol::Launch>());
  } catch (const json::exception& e) {
    return invalid(std::string("launch: ") + e.what());
  }
}

Result<LaunchRequest> to_launch_request(const protocol::Launch& o) {
  LaunchRequest r;
  r.alloc_id = o.alloc;
  r.job_id = o.job;
  r.node_rank = o.node_rank;
  if (o.job < 0) return invalid("launch: job must not be negative");
  for (const auto& n : o.nodes) {
    for (int g : n.gpus)
      if (g < 0) return invalid("launch: gpus must not be negative");
    r.nodes.push_back(NodeSlots{n.name, n.gpus});
  }
  auto spec = jobs::parse_job_spec(o.spec);
  if (!spec) return invalid("launch.spec: " + spec.error().message);
  r.spec = std::move(*spec);
  if (o.master_addr) r.master_addr = *o.master_addr;
  if (o.master_port) {
    if (*o.master_port < 0 || *o.master_port > 65535) return invalid("launch: master_port out of range");
    r.master_port = *o.master_port;
  }
  if (o.time_limit_s) {
    if (*o.time_limit_s < 0 || *o.time_limit_s > int64_t{1} << 40) return invalid("launch: time_limit_s out of range");
    r.time_limit = std::chrono::seconds(*o.time_limit_s);
  }
  if (r.node_rank < 0 || r.node_rank >= static_cast<int>(r.nodes.size()))
    return invalid("launch: node_rank outside nodes");
  if (o.node != r.local().name) return invalid("launch: node is not nodes[node_rank]");
  return r;
}

json to_json(const MetricEvent& event) {
  return std::visit(
      [](const auto& e) -> json {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, RunStart>) {
          return {{"key", "run_start"}, {"t", e.time_ms / 1000.0}};
        } else if constexpr (std::is_same_v<E, RunStop>) {
          return {{"key", "run_stop"}, {"t", e.time_ms / 1000.0}, {"status", e.status}};
        } else if constexpr (std::is_same_v<E, EvalPoint>) {
          json j{{"key", e.metric}, {"t", e.time_ms / 1000.0}, {"value", e.value}};
          if (e.epoch) j["epoch"] = *e.epoch;
          return j;
        } else if constexpr (std::is_same_v<E, Throughput>) {
          return {
              {"key", "throughput"}, {"t", e.time_ms / 1000.0}, {"value", e.value}, {"unit", "samples/s"}};
        } else if constexpr (std::is_same_v<E, MllogNote>) {
          return {{"key", "mllog"}, {"what", e.what}};  // no "t": the scheduler stamps it on arrival
        } else {
          return {{"key", "time_to_train"}, {"value", e.seconds}, {"reason", e.reason}};
        }
      },
      event);
}

namespace {

bool has_seq(const json& report) { return report.is_object() && report.contains("seq") && report["seq"].is_number_integer(); }

}  // namespace

FinishedStore::FinishedStore(const fs::path& state_dir) : journal_(state_dir / "finished.journal") {
  using namespace std::chrono;
  next_seq_ = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  std::vector<std::string> unreadable;
  for (const auto& [key, report] : journal_.records()) {
    if (!has_seq(report)) {
      unreadable.push_back(key);
      continue;
    }
    const auto seq = report["seq"].get<std::int64_t>();
    next_seq_ = std::max(next_seq_, seq + 1);
    pending_.emplace(seq, report);
  }
  for (const auto& key : unreadable) journal_.drop(key);
  // Reports of an agent from before the journal: one file each. One that is not in the journal (a write
  // error) stays for the next start.
  take_over_files(state_dir / "finished", [this](const fs::path& file) {
    std::ifstream in(file);
    json report = file.extension() == ".json" ? json::parse(in, nullptr, false) : json();
    if (!has_seq(report)) return true;
    const auto seq = report["seq"].get<std::int64_t>();
    if (!journal_.put(std::to_string(seq), report)) return false;
    next_seq_ = std::max(next_seq_, seq + 1);
    pending_.emplace(seq, std::move(report));
    return true;
  });
}

json FinishedStore::add(json report) {
  const std::int64_t seq = next_seq_++;
  report["seq"] = seq;
  (void)journal_.put(std::to_string(seq), report);  // on failure the report still lives in memory until acked
  pending_.emplace(seq, report);
  return report;
}

void FinishedStore::ack(std::int64_t seq) {
  if (pending_.erase(seq) == 0) return;
  journal_.drop(std::to_string(seq));
}

std::vector<json> FinishedStore::pending() const {
  std::vector<json> out;
  for (const auto& [seq, report] : pending_) out.push_back(report);
  return out;
}

}  // namespace railyard::agent
