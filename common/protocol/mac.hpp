// The agent protocol's cryptography (scheduler/PROTOCOL.md, "Handshake and authentication"): one definition
// shared by the scheduler and the agent, so both sides compute the same bytes.
//
// Keys are the text of the secret or node key file with trailing white space dropped; they are used as the
// HMAC key byte for byte (a node key is 64 hex characters, so its HMAC key is those 64 bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace railyard::protocol {

// Lower-case hex HMAC-SHA256(key, data) (OpenSSL).
std::string hmac_sha256_hex(std::string_view key, std::string_view data);
// Lower-case hex SHA-256(data) (OpenSSL EVP); also what the scheduler's store keeps of a bearer token.
std::string sha256_hex(std::string_view data);

// The cluster-secret MAC of a `register`: HMAC(secret, challenge + "\n" + agent + "\n" + node names joined
// by ",").
std::string register_mac(std::string_view secret, std::string_view challenge, std::string_view agent,
                         const std::vector<std::string>& nodes);

// The per-node MAC of one register.nodes[] entry: the same formula with the node's own key and its name
// alone, so a key proves only the node it was issued for.
std::string node_mac(std::string_view node_key, std::string_view challenge, std::string_view agent,
                     std::string_view node);

// RAILYARD_EXEC_TOKEN for an allocation: HMAC(key, "exec\n" + alloc), where key is the cluster secret or
// the node key of the allocation's first node (the node whose agent starts mpirun).
std::string exec_token(std::string_view key, std::string_view alloc);

// Constant-time equality of two MACs or tokens (the time does not tell how long a prefix matched).
bool same_mac(std::string_view a, std::string_view b);

// `bytes` random bytes from OpenSSL's CSPRNG as lower-case hex: challenges (32 bytes) and node keys (32
// bytes, 256 bits). Throws std::runtime_error when the generator fails (never returns a weak value).
std::string random_hex(size_t bytes);

inline constexpr size_t kNodeKeyBytes = 32;
inline constexpr size_t kChallengeBytes = 32;

// Whether `challenge` has the form random_hex(kChallengeBytes) makes: 64 lower-case hex digits. The agent
// answers no other `hello`, so a MAC it makes over a challenge can never be read as a session key's or an
// exec token's input (those start with "session\n" and "exec\n").
bool valid_challenge(std::string_view challenge);

// --- authenticated orders (scheduler/PROTOCOL.md "Handshake and authentication") ---------------------
//
// From `registered` on, every message the scheduler sends on a connection is sealed: "n" (1, 2, 3, ... per
// connection) is inserted after its opening '{' and `,"mac":"<64 hex>"` before its closing '}', where the
// MAC is HMAC-SHA256(session key, the text with "n" and without the mac suffix). The agent checks it over
// the exact bytes it received, so no JSON re-serialization has to agree between the two sides.

// A connection's session key: HMAC(key, "session\n" + challenge + "\n" + agent_challenge + "\n" + agent),
// key being the cluster secret, or the node key of the first node of `registered.nodes` (the key that
// node's register MAC was verified with). Both challenges are fresh per connection, so no sealed message of
// one connection verifies on another.
std::string session_key(std::string_view key, std::string_view challenge, std::string_view agent_challenge,
                        std::string_view agent);

// The scheduler's side of one connection. Not thread safe.
class OrderSealer {
 public:
  explicit OrderSealer(std::string session_key) : key_(std::move(session_key)) {}
  // `text`: one serialized JSON object (at least "{}"). Returns it sealed with the next counter.
  std::string seal(std::string text);
  int64_t sent() const { return sent_; }

 private:
  std::string key_;
  int64_t sent_ = 0;
};

// The agent's side of one connection. Not thread safe.
class OrderVerifier {
 public:
  explicit OrderVerifier(std::string session_key) : key_(std::move(session_key)) {}
  // Accepts `text` (a frame as received; `msg` its parse) when it ends with a MAC suffix that verifies and
  // its "n" is an integer above every n accepted before; otherwise an error saying which check failed
  // (never the key or the expected MAC). A refused message does not move the counter.
  Status verify(std::string_view text, const nlohmann::json& msg);
  int64_t last() const { return last_; }

 private:
  std::string key_;
  int64_t last_ = 0;
};

}  // namespace railyard::protocol
