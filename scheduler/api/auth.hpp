// The bearer token of a request and the lifetime of a new one, as the API and the CLI spell them. Making and
// hashing tokens is the daemon's (daemon/tokens.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace railyard::api {

// The token of an "Authorization: Bearer <token>" header; nullopt when the header is absent or malformed.
std::optional<std::string> bearer_token(std::string_view authorization);
// A token's lifetime as `token create --expires` takes it: N followed by s, m, h, d or w ("30d"), in
// seconds; "never": nullopt. At most 100 years.
Result<std::optional<int64_t>> parse_lifetime(std::string_view text);

}  // namespace railyard::api
