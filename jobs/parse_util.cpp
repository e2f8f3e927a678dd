#include "jobs/parse_util.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>

namespace railyard::jobs {

std::optional<int64_t> parse_digits(std::string_view s) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates) {
  if (word.size() > 64) return "";  // long garbage: no useful suggestion, and keeps this cheap
  std::string_view best;
  size_t best_distance = 3;
  for (std::string_view c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_distance && d < word.size()) {
      best = c;
      best_distance = d;
    }
  }
  if (best.empty()) return "";
  return " (did you mean \"" + std::string(best) + "\"?)";
}

std::string in_quotes(std::string_view s) {
  constexpr size_t kMaxShown = 64;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMaxShown) out += "...";
  return out + "\"";
}

std::string to_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && to_lower(a) == to_lower(b);
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

std::string join(std::span<const std::string> parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMinForLen[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLen[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

namespace {

Status append_afterok_ids(std::string_view ids, std::vector<JobId>& out) {
  if (ids.empty()) return invalid("afterok needs at least one job id, e.g. \"afterok:12\"");
  size_t start = 0;
  while (start <= ids.size()) {
    size_t colon = std::min(ids.find(':', start), ids.size());
    std::string_view id = ids.substr(start, colon - start);
    auto v = parse_digits(id);
    if (!v || *v <= 0) return invalid("job id " + in_quotes(id) + " is not a positive integer");
    if (std::find(out.begin(), out.end(), *v) == out.end()) out.push_back(*v);
    start = colon + 1;
  }
  return ok();
}

}  // namespace

Result<std::vector<JobId>> parse_dependency(std::string_view s) {
  if (s.find('?') != std::string_view::npos)
    return invalid("\"?\" (any of) is not supported: every dependency must hold");
  std::vector<JobId> ids;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = std::min(s.find(',', start), s.size());
    std::string_view item = trim(s.substr(start, comma - start));
    size_t colon = item.find(':');
    std::string_view type = item.substr(0, colon);
    if (type != "afterok")
      return invalid("only afterok is supported, got " + in_quotes(type) + " (write \"afterok:ID[:ID...]\")");
    Status st = append_afterok_ids(colon == std::string_view::npos ? "" : item.substr(colon + 1), ids);
    if (!st) return st.error();
    start = comma + 1;
  }
  return ids;
}

}  // namespace railyard::jobs
