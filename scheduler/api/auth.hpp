// Bearer tokens: random 256-bit secrets shown once at creation, stored and compared only as SHA-256 hex.
// Tokens are never logged; only their owner's name is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace railyard::api {

// "ry_" followed by 64 hex digits from OpenSSL's RAND_bytes.
Result<std::string> generate_token();
// Lower-case hex SHA-256 (OpenSSL EVP).
std::string sha256_hex(std::string_view data);
// The token of an "Authorization: Bearer <token>" header; nullopt when the header is absent or malformed.
std::optional<std::string> bearer_token(std::string_view authorization);
// A token's lifetime as `token create --expires` takes it: N followed by s, m, h, d or w ("30d"), in
// seconds; "never": nullopt. At most 100 years.
Result<std::optional<int64_t>> parse_lifetime(std::string_view text);

}  // namespace railyard::api
