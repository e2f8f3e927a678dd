#include "jobs/mllog.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/json_text.hpp"
#include "jobs/mllog_internal.hpp"

namespace railyard::jobs {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string_view base_name(std::string_view path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Reads a required field of a given JSON type, or says what is wrong with it.
template <typename Check>
std::optional<std::string> require(const nlohmann::json& object, const char* name, Check check,
                                   const char* want) {
  const auto it = object.find(name);
  if (it == object.end()) return std::string("missing field '") + name + "'";
  if (!check(*it)) return std::string("field '") + name + "' is not " + want;
  return std::nullopt;
}

Result<MllogEvent> event_from_json(const nlohmann::json& doc) {
  if (!doc.is_object()) return invalid("MLLOG payload is not a JSON object");
  const auto is_int = [](const nlohmann::json& j) { return j.is_number_integer(); };
  const auto is_num = [](const nlohmann::json& j) { return j.is_number(); };
  const auto is_str = [](const nlohmann::json& j) { return j.is_string(); };
  for (const auto& problem :
       {require(doc, "key", is_str, "a string"), require(doc, "event_type", is_str, "a string"),
        require(doc, "time_ms", is_num, "a number")}) {
    if (problem) return invalid("MLLOG: " + *problem);
  }
  MllogEvent event;
  const auto type = event_type_from_string(doc["event_type"].get_ref<const std::string&>());
  if (!type) return invalid("MLLOG: unknown event_type '" + doc["event_type"].get<std::string>() + "'");
  event.type = *type;
  event.key = doc["key"].get<std::string>();
  const auto& time = doc["time_ms"];
  if (is_int(time)) {
    event.time_ms = time.get<std::int64_t>();
  } else {
    const double ms = time.get<double>();  // within +-2^62: representable, and far beyond any real clock
    if (!std::isfinite(ms) || std::fabs(ms) > 4.6e18) return invalid("MLLOG: time_ms out of range");
    event.time_ms = static_cast<std::int64_t>(ms);
  }
  if (const auto ns = doc.find("namespace"); ns != doc.end() && ns->is_string())
    event.name_space = ns->get<std::string>();
  if (const auto v = doc.find("value"); v != doc.end()) event.value = *v;
  event.metadata = nlohmann::json::object();
  if (const auto m = doc.find("metadata"); m != doc.end()) {
    if (!m->is_object() && !m->is_null()) return invalid("MLLOG: field 'metadata' is not an object");
    if (m->is_object()) event.metadata = *m;
  }
  return event;
}

// mlperf_logging writes file and lineno first, then the caller's fields.
ordered_json ordered_metadata(const nlohmann::json& metadata) {
  ordered_json out = ordered_json::object();
  if (!metadata.is_object()) return out;
  for (const char* first : {"file", "lineno"}) {
    if (const auto it = metadata.find(first); it != metadata.end()) out[first] = *it;
  }
  for (const auto& [name, value] : metadata.items()) {
    if (name != "file" && name != "lineno") out[name] = value;
  }
  return out;
}

// json.dumps' default separators are ", " and ": "; nlohmann's compact dump has none.
std::string with_python_separators(const std::string& compact) {
  std::string out;
  out.reserve(compact.size() + compact.size() / 4);
  bool in_string = false;
  bool escaped = false;
  for (const char c : compact) {
    out.push_back(c);
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == ',' || c == ':') {
      out.push_back(' ');
    }
  }
  return out;
}

struct Token {
  size_t at = 0;
  size_t size = 0;
  MllogFormat format = MllogFormat::kV07;
};

// The first MLPerf token on the line: ":::MLLOG" (v0.7+), ":::MLL" then a space or the end (v0.6),
// ":::MLP" (v0.5 and the versions before it). Text before it is a launcher's prefix, or glued on.
std::optional<Token> find_token(std::string_view line) {
  for (size_t at = line.find(":::ML"); at != std::string_view::npos; at = line.find(":::ML", at + 1)) {
    const auto rest = line.substr(at);
    if (rest.starts_with(detail::kV07Token)) return Token{at, detail::kV07Token.size(), MllogFormat::kV07};
    if (rest.starts_with(detail::kV05Token)) return Token{at, detail::kV05Token.size(), MllogFormat::kV05};
    if (rest.starts_with(detail::kV06Token) &&
        (rest.size() == detail::kV06Token.size() || rest[detail::kV06Token.size()] == ' ' ||
         rest[detail::kV06Token.size()] == '\t'))
      return Token{at, detail::kV06Token.size(), MllogFormat::kV06};
  }
  return std::nullopt;
}

Result<MllogEvent> parse_v07(std::string_view rest) {
  if (rest.empty() || rest.front() != ' ') return invalid("MLLOG prefix without a JSON payload");
  const std::string_view payload = rest.substr(1);
  // Bounded: a job's output reaches the agent, and the event copies "metadata" (a copy recurses per level).
  if (json_text_depth(payload) > kMaxJsonDepth)
    return invalid("MLLOG payload nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  const auto doc = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalid("MLLOG payload is not valid JSON");
  return event_from_json(doc);
}

}  // namespace

std::string_view to_string(MllogEventType type) {
  switch (type) {
    case MllogEventType::kPointInTime:
      return "POINT_IN_TIME";
    case MllogEventType::kIntervalStart:
      return "INTERVAL_START";
    case MllogEventType::kIntervalEnd:
      return "INTERVAL_END";
  }
  return "POINT_IN_TIME";
}

std::string_view to_string(MllogFormat format) {
  switch (format) {
    case MllogFormat::kV05:
      return "v0.5";
    case MllogFormat::kV06:
      return "v0.6";
    case MllogFormat::kV07:
      return "v0.7+";
  }
  return "v0.7+";
}

std::optional<MllogEventType> event_type_from_string(std::string_view text) {
  for (auto type :
       {MllogEventType::kPointInTime, MllogEventType::kIntervalStart, MllogEventType::kIntervalEnd}) {
    if (to_string(type) == text) return type;
  }
  return std::nullopt;
}

std::optional<double> MllogEvent::metadata_number(std::string_view name) const {
  if (!metadata.is_object()) return std::nullopt;
  const auto it = metadata.find(name);
  if (it == metadata.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::optional<std::string> MllogEvent::metadata_string(std::string_view name) const {
  if (!metadata.is_object()) return std::nullopt;
  const auto it = metadata.find(name);
  if (it == metadata.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::string format_mllog_line(const MllogEvent& event) {
  ordered_json doc;
  doc["namespace"] = event.name_space;
  doc["time_ms"] = event.time_ms;
  doc["event_type"] = to_string(event.type);
  doc["key"] = event.key;
  doc["value"] = event.value;
  doc["metadata"] = ordered_metadata(event.metadata);
  const auto compact = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return std::string(kMllogPrefix) + with_python_separators(compact);
}

Result<std::optional<MllogEvent>> parse_mllog(std::string_view line) {
  const auto token = find_token(line);
  if (!token) return std::optional<MllogEvent>{};
  std::string_view rest = line.substr(token->at + token->size);
  while (!rest.empty() && (rest.back() == '\r' || rest.back() == '\n' || rest.back() == ' ' || rest.back() == '\t'))
    rest.remove_suffix(1);
  Result<MllogEvent> event = token->format == MllogFormat::kV05   ? detail::parse_v05(rest)
                             : token->format == MllogFormat::kV06 ? detail::parse_v06(rest)
                                                                  : parse_v07(rest);
  if (!event) return event.error();
  return std::optional<MllogEvent>(std::move(event).value());
}

std::optional<MllogEvent> parse_mllog_line(std::string_view line) {
  auto parsed = parse_mllog(line);
  if (!parsed) return std::nullopt;
  return std::move(parsed).value();
}

std::vector<MllogEvent> parse_mllog_text(std::string_view text) {
  std::vector<MllogEvent> events;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    const auto line = text.substr(0, eol);
    if (auto event = parse_mllog_line(line)) events.push_back(std::move(*event));
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 1);
  }
  return events;
}

std::vector<std::pair<int, std::string>> malformed_mllog_lines(std::string_view text) {
  std::vector<std::pair<int, std::string>> out;
  for (int number = 1; !text.empty(); ++number) {
    const auto eol = text.find('\n');
    if (auto parsed = parse_mllog(text.substr(0, eol)); !parsed) out.emplace_back(number, parsed.error().message);
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 1);
  }
  return out;
}

std::optional<double> time_to_train_s(const std::vector<MllogEvent>& events) {
  MllogRun run;
  for (const auto& e : events) run.add(e);
  return run.time_to_train_s();
}

MllogWriter::MllogWriter(std::ostream& out, Clock clock) : out_(out), clock_(std::move(clock)) {}

std::int64_t MllogWriter::system_clock_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

void MllogWriter::point(std::string_view key, nlohmann::json value, nlohmann::json metadata,
                        SourceLocation where) {
  emit(clock_(), MllogEventType::kPointInTime, key, std::move(value), std::move(metadata), where);
}

void MllogWriter::start(std::string_view key, nlohmann::json value, nlohmann::json metadata,
                        SourceLocation where) {
  emit(clock_(), MllogEventType::kIntervalStart, key, std::move(value), std::move(metadata), where);
}

void MllogWriter::end(std::string_view key, nlohmann::json value, nlohmann::json metadata,
                      SourceLocation where) {
  emit(clock_(), MllogEventType::kIntervalEnd, key, std::move(value), std::move(metadata), where);
}

void MllogWriter::at(std::int64_t time_ms, MllogEventType type, std::string_view key, nlohmann::json value,
                     nlohmann::json metadata, SourceLocation where) {
  emit(time_ms, type, key, std::move(value), std::move(metadata), where);
}

void MllogWriter::emit(std::int64_t time_ms, MllogEventType type, std::string_view key, nlohmann::json value,
                       nlohmann::json metadata, const SourceLocation& where) {
  MllogEvent event;
  event.time_ms = time_ms;
  event.type = type;
  event.key = std::string(key);
  event.value = std::move(value);
  // file and lineno first, as mlperf_logging writes them; caller fields follow.
  nlohmann::json meta = nlohmann::json::object();
  meta["file"] = std::string(base_name(where.file));
  meta["lineno"] = where.line;
  if (metadata.is_object()) meta.update(metadata);
  event.metadata = std::move(meta);
  const std::string line = format_mllog_line(event) + "\n";
  const std::lock_guard lock(mutex_);
  out_ << line << std::flush;
}

}  // namespace railyard::jobs
