#include "common/json_text.hpp"

#include <algorithm>
#include <string>

namespace railyard {
namespace {

constexpr size_t kMaxReasonBytes = 200;

}  // namespace

int json_text_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

Result<nlohmann::json> parse_json_bounded(std::string_view text, int max_depth) {
  if (json_text_depth(text) > max_depth)
    return invalid("nested deeper than " + std::to_string(max_depth) + " levels");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // Without nlohmann's "[json.exception.parse_error.101] " prefix, and short: the reason quotes the token
    // read last, which may be most of the text.
    std::string_view what = e.what();
    if (const size_t close = what.find("] "); close != std::string_view::npos) what.remove_prefix(close + 2);
    return invalid("invalid JSON: " + std::string(what.substr(0, kMaxReasonBytes)));
  }
}

}  // namespace railyard
