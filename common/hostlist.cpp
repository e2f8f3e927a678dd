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

// Expands one term such as "dgx[001-004,9]suffix" (at most one bracket group).
Status expand_term(std::string_view term, std::string_view whole, size_t limit, std::vector<std::string>& out) {
  if (term.empty()) return invalid("empty name in host list \"" + std::string(whole) + "\"");
  if (term.find('[') == std::string_view::npos && term.size() > kMaxHostNameLength)
    return invalid("name " + quoted(term) + " in host list is longer than " +
                   std::to_string(kMaxHostNameLength) + " characters");
  size_t open = term.find('[');
  if (open == std::string_view::npos) {
    out.emplace_back(term);
    return ok();
  }
  size_t close = term.find(']', open);
  if (term.find('[', open + 1) != std::string_view::npos)
    return invalid("only one bracket group per name is supported in \"" + std::string(whole) + "\"");
  std::string_view prefix = term.substr(0, open);
  std::string_view suffix = term.substr(close + 1);
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
    if (prefix.size() + suffix.size() + std::max(lo_s.size(), hi_s.size()) > kMaxHostNameLength)
      return invalid("names of " + quoted(term) + " in host list are longer than " +
                     std::to_string(kMaxHostNameLength) + " characters");
    if (out.size() + static_cast<size_t>(*hi - *lo + 1) > limit)
      return invalid("host list \"" + std::string(whole).substr(0, 80) + "\" names more than " + std::to_string(limit) + " hosts");
    for (long v = *lo; v <= *hi; ++v) out.push_back(std::string(prefix) + pad(v, lo_s.size()) + std::string(suffix));
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
  auto parts = split_top_level(expr);
  if (!parts) return parts.error();
  for (auto term : *parts) {
    while (!term.empty() && std::isspace(static_cast<unsigned char>(term.front()))) term.remove_prefix(1);
    while (!term.empty() && std::isspace(static_cast<unsigned char>(term.back()))) term.remove_suffix(1);
    if (auto s = expand_term(term, expr, limit, out); !s) return s.error();
  }
  return out;
}

std::string compress_hostlist(const std::vector<std::string>& names) {
  std::string out;
  size_t i = 0;
  while (i < names.size()) {
    auto [prefix, digits] = split_digits(names[i]);
    size_t j = i + 1;
    long first = 0;
    if (!digits.empty() && digits.size() < 18) {
      first = std::stol(std::string(digits));
      while (j < names.size()) {
        auto [p2, d2] = split_digits(names[j]);
        if (p2 != prefix || d2.size() != digits.size() || d2.size() >= 18) break;
        if (std::stol(std::string(d2)) != first + static_cast<long>(j - i)) break;
        ++j;
      }
    }
    // Gather further runs with the same prefix and width into one bracket group.
    std::string group;
    const size_t width = digits.size();  // (clang 14 cannot capture structured bindings)
    auto add_run = [&](long lo, long hi) {
      if (!group.empty()) group += ',';
      group += pad(lo, width);
      if (hi > lo) group += "-" + pad(hi, width);
    };
    if (j - i == 1 && (digits.empty() || digits.size() >= 18 || j >= names.size() || split_digits(names[j]).first != prefix)) {
      if (!out.empty()) out += ',';
      out += names[i];
      i = j;
      continue;
    }
    add_run(first, first + static_cast<long>(j - i) - 1);
    i = j;
    while (i < names.size()) {
      auto [p2, d2] = split_digits(names[i]);
      if (p2 != prefix || d2.size() != digits.size() || d2.empty() || d2.size() >= 18) break;
      long lo = std::stol(std::string(d2));
      size_t k = i + 1;
      while (k < names.size()) {
        auto [p3, d3] = split_digits(names[k]);
        if (p3 != prefix || d3.size() != digits.size() || d3.size() >= 18) break;
        if (std::stol(std::string(d3)) != lo + static_cast<long>(k - i)) break;
        ++k;
      }
      add_run(lo, lo + static_cast<long>(k - i) - 1);
      i = k;
    }
    if (!out.empty()) out += ',';
    out += std::string(prefix) + "[" + group + "]";
  }
  return out;
}

}  // namespace railyard
