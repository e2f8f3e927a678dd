// Bounded reading of JSON text from the network. nlohmann's parser itself is iterative, but a document it
// builds from deeply nested input is not harmless: copying, comparing or dumping it recurses once per level
// (a 1 MiB frame of '[' overflows the stack), and each level costs ~100 bytes of heap. So every text that
// comes from a peer is measured first and refused above a small depth, before a tree is built.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "common/result.hpp"

namespace railyard {

// Deep enough for every message and body the scheduler reads (a job spec needs 3 levels, an agent's
// register with its inventory fewer than 10).
inline constexpr int kMaxJsonDepth = 32;

// Nesting depth of JSON text, counted over brackets outside strings in one linear pass with no allocation.
int json_text_depth(std::string_view text);

// Parses `text` unless it is nested deeper than `max_depth`. Errors (kInvalidArgument) say which:
// "nested deeper than N levels" or "invalid JSON: <the parser's reason, at most 200 bytes>". Throws nothing.
Result<nlohmann::json> parse_json_bounded(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace railyard
