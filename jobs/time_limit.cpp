#include "jobs/time_limit.hpp"

#include <cstdio>
#include <vector>

#include "jobs/parse_util.hpp"

namespace railyard::jobs {
namespace {

constexpr std::string_view kSlurmForms = "expected MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS";

Error too_long() { return invalid("longer than the 3650-day maximum"); }

// Splits "a:b:c" into numbers; nullopt on an empty or non-numeric field.
std::optional<std::vector<int64_t>> colon_fields(std::string_view s) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t colon = std::min(s.find(':', start), s.size());
    auto v = parse_digits(s.substr(start, colon - start));
    if (!v || out.size() == 3) return std::nullopt;
    out.push_back(*v);
    start = colon + 1;
  }
  return out;
}

Result<int64_t> parse_units(std::string_view s) {
  constexpr std::string_view kUnits = "dhms";
  constexpr int64_t kUnitSeconds[] = {86400, 3600, 60, 1};
  int64_t total = 0;
  size_t next_unit = 0;  // units must come in order d, h, m, s, each at most once
  size_t i = 0;
  while (i < s.size()) {
    size_t digits_end = i;
    while (digits_end < s.size() && s[digits_end] >= '0' && s[digits_end] <= '9') ++digits_end;
    auto v = parse_digits(s.substr(i, digits_end - i));
    size_t unit = digits_end < s.size() ? kUnits.find(s[digits_end], next_unit) : std::string_view::npos;
    if (!v || unit == std::string_view::npos)
      return invalid("expected a number with a unit, e.g. \"90m\", \"2h\", \"1h30m\", \"1d\"");
    if (*v > kMaxTimeLimitS) return too_long();
    total += *v * kUnitSeconds[unit];
    if (total > kMaxTimeLimitS) return too_long();
    next_unit = unit + 1;
    i = digits_end + 1;
  }
  return total;
}

}  // namespace

Result<int64_t> parse_slurm_time(std::string_view s) {
  if (iequals(s, "unlimited") || iequals(s, "infinite")) return int64_t{0};
  int64_t days = 0;
  size_t dash = s.find('-');
  if (dash != std::string_view::npos) {
    auto d = parse_digits(s.substr(0, dash));
    if (!d) return invalid(std::string(kSlurmForms));
    days = *d;
    s = s.substr(dash + 1);
  }
  auto f = colon_fields(s);
  if (!f) return invalid(std::string(kSlurmForms));
  const std::vector<int64_t>& v = *f;
  int64_t h = 0, m = 0, sec = 0;
  if (dash != std::string_view::npos) {  // D-HH, D-HH:MM, D-HH:MM:SS
    h = v[0];
    m = v.size() > 1 ? v[1] : 0;
    sec = v.size() > 2 ? v[2] : 0;
    if (h >= 24) return invalid("hours after \"D-\" must be below 24");
  } else if (v.size() == 1) {  // MM
    m = v[0];
  } else if (v.size() == 2) {  // MM:SS
    m = v[0];
    sec = v[1];
  } else {  // HH:MM:SS
    h = v[0];
    m = v[1];
    sec = v[2];
  }
  bool leading_minutes = dash == std::string_view::npos && v.size() <= 2;
  if ((!leading_minutes && m >= 60) || (v.size() > 1 && sec >= 60))
    return invalid("minutes and seconds after the first field must be below 60");
  if (days > kMaxTimeLimitS / 86400 || h > kMaxTimeLimitS / 3600 || m > kMaxTimeLimitS / 60)
    return too_long();
  int64_t total = days * 86400 + h * 3600 + m * 60 + sec;
  if (total > kMaxTimeLimitS) return too_long();
  return total;
}

Result<int64_t> parse_time_limit(std::string_view s) {
  if (parse_digits(s))
    return invalid("a bare number is ambiguous: write a JSON number for seconds, or \"" + std::string(s) +
                   "m\" for minutes");
  if (!s.empty() && s.back() >= 'a' && s.back() <= 'z' && !iequals(s, "unlimited") && !iequals(s, "infinite"))
    return parse_units(s);
  auto r = parse_slurm_time(s);
  if (!r && r.error().message == kSlurmForms)
    return invalid("expected HH:MM:SS, MM:SS, D-HH:MM:SS or a unit form such as \"90m\", \"2h\"");
  return r;
}

std::string format_time_limit(int64_t seconds) {
  if (seconds == 0) return "unlimited";
  if (seconds < 0) return std::to_string(seconds) + "s";
  int64_t d = seconds / 86400, h = seconds / 3600 % 24, m = seconds / 60 % 60, s = seconds % 60;
  char buf[48];
  if (d > 0)
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", static_cast<long long>(d),
                  static_cast<long long>(h), static_cast<long long>(m), static_cast<long long>(s));
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(h),
                  static_cast<long long>(m), static_cast<long long>(s));
  return buf;
}

}  // namespace railyard::jobs
