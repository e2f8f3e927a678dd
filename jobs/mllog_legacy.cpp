// The MLPerf log formats before v0.7, read as the compliance checker's rulesets read them
// (mlperf_logging/compliance_checker/mlp_parser: the v0.5 parser and ruleset_060.py), by hand rather
// than with std::regex: a job's output reaches the agent, and these run on every line of it.
//
//   v0.5  :::MLPv0.5.0 <benchmark> <seconds> (<file>:<line>) <key>[: <JSON value>]
//   v0.6  :::MLL <seconds> <key>: <JSON {"value": ..., "metadata": {...}}>
#include <cctype>
#include <string>

#include "common/json_text.hpp"
#include "jobs/mllog_internal.hpp"

namespace railyard::jobs::detail {
namespace {

// A cursor over the text after the token; each take_* consumes on success only.
struct Cursor {
  std::string_view rest;

  bool take(char c) {
    if (rest.empty() || rest.front() != c) return false;
    rest.remove_prefix(1);
    return true;
  }
  template <typename Pred>
  std::string_view take_while(Pred pred) {
    size_t n = 0;
    while (n < rest.size() && pred(static_cast<unsigned char>(rest[n]))) ++n;
    const auto out = rest.substr(0, n);
    rest.remove_prefix(n);
    return out;
  }
};

bool is_key_char(unsigned char c) { return std::isalnum(c) || c == '_'; }
bool is_time_char(unsigned char c) { return std::isdigit(c) || c == '.'; }
bool is_space(unsigned char c) { return c == ' ' || c == '\t'; }

Result<nlohmann::json> json_value(std::string_view text, const char* version) {
  auto doc = parse_json_bounded(text);
  if (!doc) return invalid(std::string("MLPerf ") + version + " value is not valid JSON");
  return doc;
}

Result<std::int64_t> time_of(std::string_view text, const char* version) {
  const auto ms = seconds_to_ms(text);
  if (!ms) return invalid(std::string("MLPerf ") + version + " time '" + std::string(text.substr(0, 32)) +
                          "' is not seconds since the epoch");
  return *ms;
}

// v0.5 values in v0.7's shape (see MllogEvent).
void normalize_v05(MllogEvent& e) {
  if (e.key == mllog_key::kEvalAccuracy && e.value.is_object() && e.value.contains("value")) {
    if (const auto epoch = e.value.find("epoch"); epoch != e.value.end()) e.metadata["epoch_num"] = *epoch;
    nlohmann::json v = e.value["value"];
    e.value = std::move(v);
  } else if (e.key == mllog_key::kRunStop && e.value.is_object()) {
    if (const auto ok = e.value.find("success"); ok != e.value.end() && ok->is_boolean())
      e.metadata["status"] = ok->get<bool>() ? kStatusSuccess : kStatusAborted;
  }
}

}  // namespace

std::optional<std::int64_t> seconds_to_ms(std::string_view text) {
  const auto dot = text.find('.');
  const auto whole = text.substr(0, dot);
  const auto frac = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  const auto digits = [](std::string_view s) {
    for (const char c : s)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
  };
  // 15 digits of seconds stay far inside int64 milliseconds; "." alone or "1.2.3" is not a number.
  if (whole.size() > 15 || !digits(whole) || !digits(frac) || (whole.empty() && frac.empty())) return std::nullopt;
  std::int64_t ms = 0;
  for (const char c : whole) ms = ms * 10 + (c - '0');
  for (size_t i = 0; i < 3; ++i) ms = ms * 10 + (i < frac.size() ? frac[i] - '0' : 0);
  if (frac.size() > 3 && frac[3] >= '5') ++ms;
  return ms;
}

MllogEventType implied_type(std::string_view key) {
  if (key.ends_with("_start")) return MllogEventType::kIntervalStart;
  if (key.ends_with("_stop")) return MllogEventType::kIntervalEnd;
  return MllogEventType::kPointInTime;
}

Result<MllogEvent> parse_v06(std::string_view rest) {
  Cursor c{rest};
  if (!c.take(' ')) return invalid("MLPerf v0.6 line: a space must follow :::MLL");
  auto time = time_of(c.take_while(is_time_char), "v0.6");
  if (!time) return time.error();
  if (!c.take(' ')) return invalid("MLPerf v0.6 line: no space after the time");
  MllogEvent e;
  e.format = MllogFormat::kV06;
  e.time_ms = *time;
  e.key = std::string(c.take_while(is_key_char));
  if (e.key.empty()) return invalid("MLPerf v0.6 line: no key after the time");
  c.take(' ');
  if (!c.take(':') || c.take_while(is_space).empty() || c.rest.empty())
    return invalid("MLPerf v0.6 line: key '" + e.key + "' is not followed by ': ' and a JSON value");
  auto doc = json_value(c.rest, "v0.6");
  if (!doc) return doc.error();
  e.type = implied_type(e.key);
  e.metadata = nlohmann::json::object();
  if (doc->is_object() && (doc->contains("value") || doc->contains("metadata"))) {
    if (const auto v = doc->find("value"); v != doc->end()) e.value = *v;
    if (const auto m = doc->find("metadata"); m != doc->end() && !m->is_null()) {
      if (!m->is_object()) return invalid("MLPerf v0.6 line: 'metadata' is not an object");
      e.metadata = *m;
    }
  } else {
    e.value = std::move(doc).value();
  }
  return e;
}

Result<MllogEvent> parse_v05(std::string_view rest) {
  Cursor c{rest};
  const bool versioned = c.take('v');
  const auto version = c.take_while(is_time_char);
  if (!versioned || version.empty()) return invalid("MLPerf :::MLP line without a version (v0.5.0)");
  if (!version.starts_with("0.5."))
    return invalid("MLPerf log format :::MLPv" + std::string(version.substr(0, 16)) +
                   " is not one Railyard reads (v0.5 :::MLPv0.5.0, v0.6 :::MLL, v0.7+ :::MLLOG)");
  MllogEvent e;
  e.format = MllogFormat::kV05;
  e.metadata = nlohmann::json::object();
  const auto benchmark = c.take(' ') ? c.take_while(is_key_char) : std::string_view();
  if (benchmark.empty()) return invalid("MLPerf v0.5 line: no benchmark name after the version");
  e.metadata["benchmark"] = std::string(benchmark);
  if (!c.take(' ')) return invalid("MLPerf v0.5 line: no time after the benchmark");
  auto time = time_of(c.take_while(is_time_char), "v0.5");
  if (!time) return time.error();
  e.time_ms = *time;
  const auto file = c.take(' ') && c.take('(') ? c.take_while([](unsigned char ch) { return ch != ':' && ch != ' ' && ch != ')'; })
                                               : std::string_view();
  const auto line = c.take(':') ? c.take_while([](unsigned char ch) { return std::isdigit(ch) != 0; }) : std::string_view();
  if (file.empty() || line.empty() || line.size() > 9 || !c.take(')'))
    return invalid("MLPerf v0.5 line: no (file:line) after the time");
  e.metadata["file"] = std::string(file);
  e.metadata["lineno"] = std::stoi(std::string(line));
  e.key = c.take(' ') ? std::string(c.take_while(is_key_char)) : std::string();
  if (e.key.empty()) return invalid("MLPerf v0.5 line: no key after (file:line)");
  e.type = implied_type(e.key);
  c.take(' ');
  if (c.take(':')) {
    if (c.take_while(is_space).empty() || c.rest.empty())
      return invalid("MLPerf v0.5 line: key '" + e.key + "' has a ':' but no value");
    auto doc = json_value(c.rest, "v0.5");
    if (!doc) return doc.error();
    e.value = std::move(doc).value();
  } else if (!c.rest.empty()) {
    return invalid("MLPerf v0.5 line: text after key '" + e.key + "' that is not ': value'");
  }
  normalize_v05(e);
  return e;
}

}  // namespace railyard::jobs::detail
