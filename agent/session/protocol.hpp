// Pure pieces of the agent side of scheduler/PROTOCOL.md: MACs and tokens, the launch order -> LaunchRequest,
// MLLOG events -> JSON, and the durable store of alloc_finished reports awaiting the scheduler's ack.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/launch/request.hpp"
#include "agent/state/journal.hpp"
#include "agent/streams/metrics.hpp"
#include "common/result.hpp"

namespace railyard::agent {

inline constexpr int kProtocolVersion = 1;
inline constexpr size_t kMaxFrameBytes = 1 << 20;

// Lower-case hex HMAC-SHA256(key, data) (OpenSSL).
std::string hmac_sha256_hex(const std::string& key, const std::string& data);
// register.mac: HMAC(secret, challenge + '\n' + agent + '\n' + node names joined by ',').
std::string register_mac(const std::string& secret, const std::string& challenge, const std::string& agent,
                         const std::vector<std::string>& nodes);
// RAILYARD_EXEC_TOKEN: HMAC(secret, "exec\n" + alloc).
std::string exec_token(const std::string& secret, const std::string& alloc);

// A message skeleton: {"type": type, "v": 1}.
nlohmann::json message(const char* type);

// The fields of a `launch` order -> the request the Launcher takes. Errors name the field.
Result<LaunchRequest> parse_launch(const nlohmann::json& order);

// One MLLOG event as metrics.events carries it ({"key":"run_start","t":<unix s>}, ...).
nlohmann::json to_json(const MetricEvent& event);

// Job id of an allocation id "<job>.<attempt>"; 0 when it does not parse.
long long job_of_alloc(const std::string& alloc);

// alloc_finished reports kept until acknowledged, in the journal <state>/finished.journal (journal.hpp;
// older agents kept one file per report, <state>/finished/<seq>.json: those are read in and deleted).
// Sequence numbers start above every stored one and above the start time in microseconds, so they keep
// growing across agent restarts.
class FinishedStore {
 public:
  explicit FinishedStore(const std::filesystem::path& state_dir);
  // Assigns `seq`, stores the report, returns it with the seq set.
  nlohmann::json add(nlohmann::json report);
  void ack(std::int64_t seq);
  std::vector<nlohmann::json> pending() const;  // in seq order
  size_t size() const { return pending_.size(); }

 private:
  Journal journal_;
  std::int64_t next_seq_ = 0;
  std::map<std::int64_t, nlohmann::json> pending_;
};

}  // namespace railyard::agent
