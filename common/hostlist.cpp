#include "common/hostlist.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace railyard {
namespace {

// Splits on commas that are not inside brackets.
Result<std::vector<std::string_view>> split_top_level(std::string_view expr) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < expr.size(); ++i) {
    char c = expr[i];
    if (c == '[') {
      if (++depth > 1) return invalid("nested '[' in host list \"" + std::string(expr) + "\"");
    } else if (c == ']') {
      if (--depth < 0) return invalid("unbalanced ']' in host list \"" + std::string(expr) + "\"");
    } else if (c == ',' && depth == 0) {
      parts.push_back(expr.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) return invalid("unbalanced '[' in host list \"" + std::string(expr) + "\"");
  parts.push_back(expr.substr(start));
  return parts;
}

// Bounds of ranges have at most kMaxDigits digits (leading zeros included): a count of names then fits a
// long, and zero padding cannot make names long.
constexpr size_t kMaxDigits = 18;

std::string quoted(std::string_view s) {
  constexpr size_t kShown = 80;
  std::string out(1, '"');  // (appended, not `"\"" + ...`: GCC 12 warns falsely on that, -Wrestrict)
  out.append(s.substr(0, kShown));
  out += s.size() > kShown ? "...\"" : "\"";
  return out;
}

Result<long> parse_number(std::string_view s, std::string_view whole) {
  long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || s.size() > kMaxDigits || ec != std::errc() || p != s.data() + s.size() || v < 0)
    return invalid("bad number " + quoted(s) + " in host list " + quoted(whole) + " (at most " +
                   std::to_string(kMaxDigits) + " digits)");
  return v;
}

std::string pad(long v, size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// Characters of `text` outside brackets: the least a name made from it holds besides the bracket values.
size_t literal_size(std::string_view text) {
  size_t n = 0;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    else if (c == ']') --depth;
    else if (depth == 0) ++n;
  }
  return n;
}

// Expands one term such as "dgx[001-004,9]suffix" or "row[0,1]_rack[2-3]" into `out`. Several bracket
// groups give their cross product in Slurm's order: the first group varies slowest (row0_rack2, row0_rack3,
// row1_rack2, ...). Each value of a group makes at least one name, so the limit is checked before a group
// is walked, and a name's length before any name with that prefix is made.
Status expand_term(std::string_view term, std::string_view whole, size_t limit, std::vector<std::string>& out) {
  if (term.empty()) return invalid("empty name in host list \"" + std::string(whole) + "\"");
  size_t open = term.find('[');
  if (open == std::string_view::npos) {
    if (term.size() > kMaxHostNameLength)
      return invalid("name " + quoted(term) + " in host list is longer than " +
                     std::to_string(kMaxHostNameLength) + " characters");
    if (out.size() + 1 > limit)
      return invalid("host list \"" + std::string(whole).substr(0, 80) + "\" names more than " + std::to_string(limit) + " hosts");
    out.emplace_back(term);
    return ok();
  }
  size_t close = term.find(']', open);
  std::string_view prefix = term.substr(0, open);
  std::string_view rest = term.substr(close + 1);
  std::string_view body = term.substr(open + 1, close - open - 1);
  if (body.empty()) return invalid("empty brackets in host list \"" + std::string(whole) + "\"");
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    std::string_view range = body.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    size_t dash = range.find('-');
    std::string_view lo_s = range.substr(0, dash);
    std::string_view hi_s = dash == std::string_view::npos ? lo_s : range.substr(dash + 1);
    auto lo = parse_number(lo_s, whole);
    if (!lo) return lo.error();
    auto hi = parse_number(hi_s, whole);
    if (!hi) return hi.error();
    if (*hi < *lo) return invalid("reversed range \"" + std::string(range) + "\" in host list \"" + std::string(whole) + "\"");
    // Checked before expanding: a range repeats the text around it in every name.
    if (prefix.size() + literal_size(rest) + std::max(lo_s.size(), hi_s.size()) > kMaxHostNameLength)
      return invalid("names of " + quoted(term) + " in host list are longer than " +
                     std::to_string(kMaxHostNameLength) + " characters");
    if (out.size() + static_cast<size_t>(*hi - *lo + 1) > limit)
      return invalid("host list \"" + std::string(whole).substr(0, 80) + "\" names more than " + std::to_string(limit) + " hosts");
    for (long v = *lo; v <= *hi; ++v) {
      const std::string name = std::string(prefix) + pad(v, lo_s.size()) + std::string(rest);
      if (auto s = expand_term(name, whole, limit, out); !s) return s;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return ok();
}

// Splits "dgx017" into ("dgx", "017"); a name without a trailing number has an empty digit part.
std::pair<std::string_view, std::string_view> split_digits(std::string_view name) {
  size_t i = name.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
  return {name.substr(0, i), name.substr(i)};
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(std::string_view expr, size_t limit) {
  std::vector<std::string> out;
  if (expr.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return invalid("empty host list: name at least one host (\"dgx[01-04]\", \"n1,n2\")");
  auto parts = split_top_level(expr);
  if (!parts) return parts.error();
  for (auto term : *parts) {
    while (!term.empty() && std::isspace(static_cast<unsigned char>(term.front()))) term.remove_prefix(1);
    while (!term.empty() && std::isspace(static_cast<unsigned char>(term.back()))) term.remove_suffix(1);
    if (auto s = expand_term(term, expr, limit, out); !s) return s.error();
  }
  return out;
}

// Whether two numbers can share a range: the same width ("009", "010"), or both unpadded ("9", "10"), which
// a range of the narrower expands back to (padding is the lower bound's width).
bool same_width(std::string_view a, std::string_view b) {
  const auto unpadded = [](std::string_view d) { return d.size() == 1 || d.front() != '0'; };
  return a.size() == b.size() || (unpadded(a) && unpadded(b));
}

// The end of the run of consecutive numbers starting at names[i] (prefix and digits of names[i] given).
size_t run_end(const std::vector<std::string>& names, size_t i, std::string_view prefix, std::string_view digits) {
  const long first = std::stol(std::string(digits));
  size_t j = i + 1;
  while (j < names.size()) {
    auto [p2, d2] = split_digits(names[j]);
    if (p2 != prefix || d2.empty() || d2.size() >= 18 || !same_width(digits, d2)) break;
    if (std::stol(std::string(d2)) != first + static_cast<long>(j - i)) break;
    ++j;
  }
  return j;
}

std::string compress_hostlist(const std::vector<std::string>& names) {
  std::string out;
  size_t i = 0;
  while (i < names.size()) {
    auto [prefix, digits] = split_digits(names[i]);
    const bool numbered = !digits.empty() && digits.size() < 18;
    size_t j = numbered ? run_end(names, i, prefix, digits) : i + 1;
    if (j - i == 1 && (!numbered || j >= names.size() || split_digits(names[j]).first != prefix)) {
      if (!out.empty()) out += ',';
      out += names[i];
      i = j;
      continue;
    }
    // This run and the further runs with the same prefix and a compatible width share one bracket group;
    // each run is written at its own lower bound's width.
    std::string group;
    const std::string first_digits(digits);  // (clang 14 cannot capture structured bindings)
    auto add_run = [&](std::string_view lo_digits, size_t count) {
      if (!group.empty()) group += ',';
      group += lo_digits;
      if (count > 1) group += "-" + pad(std::stol(std::string(lo_digits)) + static_cast<long>(count) - 1, lo_digits.size());
    };
    add_run(digits, j - i);
    i = j;
    while (i < names.size()) {
      auto [p2, d2] = split_digits(names[i]);
      if (p2 != prefix || d2.empty() || d2.size() >= 18 || !same_width(first_digits, d2)) break;
      const size_t k = run_end(names, i, p2, d2);
      add_run(d2, k - i);
      i = k;
    }
    if (!out.empty()) out += ',';
    out += std::string(prefix) + "[" + group + "]";
  }
  return out;
}

}  // namespace railyard
