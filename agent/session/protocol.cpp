#include "agent/session/protocol.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <fstream>
#include <limits>
#include <type_traits>

#include "jobs/spec_json.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;
using nlohmann::json;

std::string hmac_sha256_hex(const std::string& key, const std::string& data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

std::string register_mac(const std::string& secret, const std::string& challenge, const std::string& agent,
                         const std::vector<std::string>& nodes) {
  std::string joined;
  for (size_t i = 0; i < nodes.size(); ++i) joined += (i ? "," : "") + nodes[i];
  return hmac_sha256_hex(secret, challenge + "\n" + agent + "\n" + joined);
}

std::string exec_token(const std::string& secret, const std::string& alloc) {
  return hmac_sha256_hex(secret, "exec\n" + alloc);
}

json message(const char* type) { return json{{"type", type}, {"v", kProtocolVersion}}; }

long long job_of_alloc(const std::string& alloc) {
  try {
    size_t used = 0;
    const long long job = std::stoll(alloc, &used);
    return used > 0 && (used == alloc.size() || alloc[used] == '.') ? job : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

namespace {

// An integer in [lo, hi]; anything else throws like a wrong JSON type. (get<int>() of a float out of
// range is undefined behaviour, and an int64 would be silently narrowed.)
long long integer(const json& v, const char* what, long long lo, long long hi) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<unsigned long long>() > 1ULL << 62) ||
      v.get<long long>() < lo || v.get<long long>() > hi)
    throw json::type_error::create(302, std::string(what) + ": must be an integer in range", &v);
  return v.get<long long>();
}

}  // namespace

Result<LaunchRequest> parse_launch(const json& o) {
  constexpr long long kIntMax = std::numeric_limits<int>::max();
  LaunchRequest r;
  try {
    r.alloc_id = o.at("alloc").get<std::string>();
    r.job_id = integer(o.at("job"), "job", 0, std::numeric_limits<long long>::max());
    r.node_rank = static_cast<int>(integer(o.at("node_rank"), "node_rank", 0, kIntMax));
    for (const auto& n : o.at("nodes")) {
      NodeSlots slots{n.at("name").get<std::string>(), {}};
      for (const auto& g : n.at("gpus"))
        slots.gpus.push_back(static_cast<int>(integer(g, "gpus", 0, kIntMax)));
      r.nodes.push_back(std::move(slots));
    }
    auto spec = jobs::parse_job_spec(o.at("spec"));
    if (!spec) return invalid("launch.spec: " + spec.error().message);
    r.spec = std::move(*spec);
    if (o.contains("master_addr")) r.master_addr = o["master_addr"].get<std::string>();
    if (o.contains("master_port"))
      r.master_port = static_cast<int>(integer(o["master_port"], "master_port", 0, 65535));
    if (o.contains("time_limit_s"))
      r.time_limit = std::chrono::seconds(integer(o["time_limit_s"], "time_limit_s", 0, int64_t{1} << 40));
  } catch (const json::exception& e) {
    return invalid(std::string("launch: ") + e.what());
  }
  if (r.node_rank < 0 || r.node_rank >= static_cast<int>(r.nodes.size()))
    return invalid("launch: node_rank outside nodes");
  if (o.value("node", "") != r.local().name) return invalid("launch: node is not nodes[node_rank]");
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
