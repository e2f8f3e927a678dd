// The agent protocol's cryptography (scheduler/PROTOCOL.md, "Handshake and authentication"): one definition
// shared by the scheduler and the agent, so both sides compute the same bytes.
//
// Keys are the text of the secret or node key file with trailing white space dropped; they are used as the
// HMAC key byte for byte (a node key is 64 hex characters, so its HMAC key is those 64 bytes).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace railyard::protocol
