#include "scheduler/api/auth.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <cctype>
#include <charconv>

namespace railyard::api {
namespace {

std::string to_hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[p[i] >> 4]);
    out.push_back(kDigits[p[i] & 15]);
  }
  return out;
}

}  // namespace

Result<std::string> generate_token() {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
    return internal_error("RAND_bytes failed");
  return "ry_" + to_hex(bytes.data(), bytes.size());
}

std::string sha256_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_sha256(), nullptr);
  return to_hex(md.data(), len);
}

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
