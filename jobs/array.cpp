#include "jobs/array.hpp"

#include <algorithm>
#include <utility>

#include "jobs/parse_util.hpp"

namespace railyard::jobs {
namespace {

Result<int> index_of(std::string_view s, std::string_view part) {
  auto v = parse_digits(s);
  if (!v)
    return invalid("array " + in_quotes(part) + ": " + in_quotes(s) + " is not a task index (0 or more)");
  if (*v > kMaxArrayIndex)
    return invalid("array " + in_quotes(part) + ": index " + std::string(s) + " is above " +
                   std::to_string(kMaxArrayIndex));
  return static_cast<int>(*v);
}

Result<ArrayRange> parse_range(std::string_view part) {
  ArrayRange r;
  std::string_view span = part;
  if (size_t colon = part.find(':'); colon != std::string_view::npos) {
    span = part.substr(0, colon);
    auto step = parse_digits(part.substr(colon + 1));
    if (!step || *step < 1 || *step > kMaxArrayIndex)
      return invalid("array " + in_quotes(part) + ": the step after ':' must be a whole number of 1 or more");
    r.step = static_cast<int>(*step);
  }
  const size_t dash = span.find('-');
  auto first = index_of(span.substr(0, dash), part);
  if (!first) return first.error();
  r.first = r.last = *first;
  if (dash != std::string_view::npos) {
    auto last = index_of(span.substr(dash + 1), part);
    if (!last) return last.error();
    if (*last < *first) return invalid("array " + in_quotes(part) + ": the range runs backwards");
    r.last = *last;
  } else if (r.step != 1) {
    return invalid("array " + in_quotes(part) + ": a step needs a range (\"0-98:2\")");
  }
  r.last = r.first + static_cast<int>((r.last - r.first) / r.step) * r.step;  // the last index it reaches
  return r;
}

}  // namespace

int64_t ArraySpec::size() const {
  int64_t n = 0;
  for (const auto& r : ranges) n += r.size();
  return n;
}

int ArraySpec::index_at(int64_t position) const {
  for (const auto& r : ranges) {
    if (position < r.size()) return r.first + static_cast<int>(position) * r.step;
    position -= r.size();
  }
  return -1;
}

std::optional<int64_t> ArraySpec::position_of(int index) const {
  int64_t base = 0;
  for (const auto& r : ranges) {
    if (index >= r.first && index <= r.last && (index - r.first) % r.step == 0)
      return base + (index - r.first) / r.step;
    base += r.size();
  }
  return std::nullopt;
}

std::string ArraySpec::text() const {
  std::string out;
  for (const auto& r : ranges) {
    if (!out.empty()) out += ',';
    out += std::to_string(r.first);
    if (r.last != r.first) out += '-' + std::to_string(r.last);
    if (r.step != 1) out += ':' + std::to_string(r.step);
  }
  if (max_running > 0) out += '%' + std::to_string(max_running);
  return out;
}

Result<ArraySpec> parse_array_spec(std::string_view text) {
  ArraySpec a;
  std::string_view list = trim(text);
  if (size_t pct = list.find('%'); pct != std::string_view::npos) {
    auto m = parse_digits(list.substr(pct + 1));
    if (!m || *m < 1 || *m > kMaxArrayTasks)
      return invalid("array " + in_quotes(text) + ": \"%M\" caps the tasks running at once; M must be 1 to " +
                     std::to_string(kMaxArrayTasks));
    a.max_running = static_cast<int>(*m);
    list = list.substr(0, pct);
  }
  if (list.empty()) return invalid("array: empty; give task indexes like \"0-99\" or \"1,3,5-9\"");
  int64_t total = 0;
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view part = list.substr(0, comma);
    if (part.empty()) return invalid("array " + in_quotes(text) + ": an empty part between commas");
    auto r = parse_range(part);
    if (!r) return r.error();
    total += r->size();
    if (total > kMaxArrayTasks)
      return invalid("array " + in_quotes(text) + ": more than " + std::to_string(kMaxArrayTasks) + " tasks");
    a.ranges.push_back(*r);
    if (comma == std::string_view::npos) break;
    list = list.substr(comma + 1);
  }
  // No index twice: each task is one job with its own index. One bit per index between the lowest and the
  // highest given (at most 1.25 MB), so a million tasks are checked in O(tasks), without a sort, and a small
  // array (specs are parsed again whenever a job is read back) costs a few bytes.
  int lo = kMaxArrayIndex, hi = 0;
  for (const auto& r : a.ranges) lo = std::min(lo, r.first), hi = std::max(hi, r.last);
  std::vector<bool> seen(static_cast<size_t>(hi - lo) + 1, false);
  for (const auto& r : a.ranges)
    for (int i = r.first; i <= r.last; i += r.step) {
      const auto bit = static_cast<size_t>(i - lo);
      if (seen[bit])
        return invalid("array " + in_quotes(text) + ": index " + std::to_string(i) + " is given twice");
      seen[bit] = true;
    }
  return a;
}

}  // namespace railyard::jobs
