// Bearer tokens: random 256-bit secrets shown once at creation, stored and compared only as SHA-256 hex; who a
// token stands for, with an expiry and a revocation; a cache of the tokens seen, and their last use written
// now and then. Tokens are never logged; only their owner's name is.
//
// Runs on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/protocol/mac.hpp"
#include "scheduler/daemon/caller.hpp"
#include "scheduler/daemon/commit_pipeline.hpp"

namespace railyard::daemon {

// "ry_" followed by 64 hex digits from OpenSSL's RAND_bytes (protocol::random_hex).
Result<std::string> generate_token();
// What the store keeps of a token: its lower-case hex SHA-256.
using protocol::sha256_hex;

// What a bearer token stands for: the caller, or why it is refused (unknown, expired, revoked), which is
// the message of a 401.
struct Authenticated {
  std::optional<Caller> caller;
  std::string refusal;
};

// Tokens made without an expiry last this long (`token create --expires never` for none).
inline constexpr int64_t kDefaultTokenLifetimeS = 90 * 86400;
// A token's last use is written when it moved by at least this much since the last write, so a busy token
// costs one deferred row now and then, not a write per request.
inline constexpr int64_t kTokenUseResolutionS = 60;

class Tokens {
 public:
  using Clock = std::function<int64_t()>;  // seconds since the epoch
  // `write`: commits a batch synced (with its audit row), as the service writes every change.
  Tokens(CommitPipeline& pipeline, Clock clock, std::function<Status(WriteBatch&)> write)
      : pipeline_(pipeline), clock_(std::move(clock)), write_(std::move(write)) {}

  // The caller a bearer token stands for, or the refusal of an unknown, expired or revoked one. Tokens are
  // cached by hash after their first use; a revocation through revoke() reaches the cache at once.
  Result<Authenticated> authenticate(const std::string& token);
  // Admin only: a new token for `user` (the secret, shown once; the store keeps its hash) expiring at
  // `expires` (unix seconds; nullopt: never), written with `audit`.
  Result<std::pair<std::string, store::TokenRecord>> create(const std::string& user, store::Role role,
                                                            std::optional<int64_t> expires, const Caller& who,
                                                            const store::AuditRecord* audit = nullptr);
  // Admin only: every token, its last use as this process saw it.
  Result<std::vector<store::TokenRecord>> list(const Caller& who);
  // Admin only: revokes the token whose id (store::kTokenIdLength characters of its hash) is `id`;
  // kNotFound when none. Revoking a revoked token changes nothing.
  Status revoke(const std::string& id, const Caller& who, const store::AuditRecord* audit = nullptr);

 private:
  CommitPipeline& pipeline_;
  Clock clock_;
  std::function<Status(WriteBatch&)> write_;
  std::unordered_map<std::string, store::TokenRecord> cache_;  // by hash; last_used as last seen
  std::unordered_map<std::string, int64_t> use_written_;       // by hash: the last use written
};

}  // namespace railyard::daemon
