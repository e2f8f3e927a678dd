#include "scheduler/api/auth.hpp"

#include <cctype>
#include <charconv>

namespace railyard::api {

std::optional<std::string> bearer_token(std::string_view h) {
  constexpr std::string_view kScheme = "Bearer ";
  if (h.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(h[i])) !=
        std::tolower(static_cast<unsigned char>(kScheme[i])))
      return std::nullopt;
  h.remove_prefix(kScheme.size());
  while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
  while (!h.empty() && (h.back() == ' ' || h.back() == '\r')) h.remove_suffix(1);
  if (h.empty()) return std::nullopt;
  return std::string(h);
}

Result<std::optional<int64_t>> parse_lifetime(std::string_view text) {
  if (text == "never") return std::optional<int64_t>();
  const auto bad = [&] {
    return invalid("expires " + std::string(text) +
                   ": must be N followed by s, m, h, d or w (e.g. 30d), or never");
  };
  if (text.size() < 2) return bad();
  int64_t n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size() - 1, n);
  if (ec != std::errc() || p != text.data() + text.size() - 1 || n < 1) return bad();
  int64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    case 'w':
      unit = 7 * 86400;
      break;
    default:
      return bad();
  }
  constexpr int64_t kMax = int64_t{100} * 366 * 86400;
  if (n > kMax / unit) return invalid("expires " + std::string(text) + ": at most 100 years");
  return std::optional<int64_t>(n * unit);
}

}  // namespace railyard::api
