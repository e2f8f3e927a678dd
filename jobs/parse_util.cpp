#include "jobs/parse_util.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <set>

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

// "12" or "12_3" (task 3 of array 12) after a dependency type.
Result<Dependency> parse_target(Dependency::Type type, std::string_view text) {
  Dependency d;
  d.type = type;
  if (text.find('+') != std::string_view::npos)
    return invalid(in_quotes(text) + ": \"+MINUTES\" (a delay after the job) is not supported");
  const size_t us = text.find('_');
  std::string_view job = text.substr(0, us);
  auto id = parse_digits(job);
  if (!id || *id <= 0) return invalid("job id " + in_quotes(job) + " is not a positive integer");
  d.job = *id;
  if (us == std::string_view::npos) return d;
  if (type == Dependency::Type::kAfterCorr)
    return invalid("aftercorr takes a whole array (aftercorr:" + std::to_string(d.job) + "), not one task (" +
                   in_quotes(text) + ")");
  std::string_view task = text.substr(us + 1);
  auto index = parse_digits(task);
  if (!index || *index > kMaxArrayIndex)
    return invalid("task index " + in_quotes(task) + " in " + in_quotes(text) +
                   " is not an integer from 0 to " + std::to_string(kMaxArrayIndex));
  d.task = static_cast<int>(*index);
  return d;
}

Result<Dependency::Type> parse_type(std::string_view type) {
  if (auto t = parse_dependency_type(type)) return *t;
  return invalid("dependency type " + in_quotes(type) +
                 " is not supported (afterok, afterany, afternotok and aftercorr are)");
}

}  // namespace

Result<Dependencies> parse_dependency(std::string_view s) {
  if (s.find('?') != std::string_view::npos)
    return invalid("\"?\" (any of) is not supported: every dependency must hold");
  Dependencies out;
  std::set<Dependency> seen;  // duplicates dropped in linear-log time: the text may hold many
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = std::min(s.find(',', start), s.size());
    std::string_view item = trim(s.substr(start, comma - start));
    start = comma + 1;
    size_t colon = item.find(':');
    auto type = parse_type(item.substr(0, colon));
    if (!type) return type.error();
    if (colon == std::string_view::npos || colon + 1 == item.size())
      return invalid(std::string(to_string(*type)) + " needs at least one job id, e.g. \"" +
                     std::string(to_string(*type)) + ":12\"");
    std::string_view ids = item.substr(colon + 1);
    size_t from = 0;
    while (from <= ids.size()) {
      size_t next = std::min(ids.find(':', from), ids.size());
      auto d = parse_target(*type, ids.substr(from, next - from));
      if (!d) return d.error();
      from = next + 1;
      if (!seen.insert(*d).second) continue;
      if (seen.size() > kMaxDependencies)
        return invalid("more than " + std::to_string(kMaxDependencies) + " dependencies");
      if (d->type == Dependency::Type::kAfterOk && d->task < 0) {
        out.afterok.push_back(d->job);
      } else {
        out.after.push_back(*d);
      }
    }
  }
  return out;
}

Result<Dependency> parse_one_dependency(std::string_view s) {
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos)
    return invalid(in_quotes(s) + ": expected TYPE:JOB, e.g. \"afterany:40\" or \"afterok:12_3\"");
  auto type = parse_type(s.substr(0, colon));
  if (!type) return type.error();
  return parse_target(*type, s.substr(colon + 1));
}

}  // namespace railyard::jobs
