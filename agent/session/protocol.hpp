// Pure pieces of the agent side of scheduler/PROTOCOL.md: the launch order -> LaunchRequest, MLLOG events ->
// JSON, and the durable store of alloc_finished reports awaiting the scheduler's ack. The messages and MACs
// themselves are common/protocol's, shared with the scheduler.
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
#include "common/protocol/mac.hpp"
#include "common/protocol/messages.hpp"
#include "common/result.hpp"

namespace railyard::agent {

using protocol::exec_token;
using protocol::hmac_sha256_hex;
using protocol::job_of_alloc;
using protocol::kMaxFrameBytes;
using protocol::register_mac;

// The fields of a `launch` order -> the request the Launcher takes. Errors name the field.
Result<LaunchRequest> parse_launch(const nlohmann::json& order);
Result<LaunchRequest> to_launch_request(const protocol::Launch& order);

// One MLLOG event as metrics.events carries it ({"key":"run_start","t":<unix s>}, ...).
nlohmann::json to_json(const MetricEvent& event);

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
