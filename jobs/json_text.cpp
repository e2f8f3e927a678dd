// The strict JSON text reader of every submit path (parse_json_text, spec_json.hpp): size and depth bounded
// before parsing, and no object may repeat a key.
#include <exception>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/parse_util.hpp"
#include "jobs/spec_json.hpp"

namespace railyard::jobs {
namespace {

using json = nlohmann::json;

// Strips nlohmann's "[json.exception.parse_error.101] " prefix.
std::string json_error_text(const char* what) {
  std::string_view s = what;
  size_t close = s.find("] ");
  return std::string(close == std::string_view::npos ? s : s.substr(close + 2));
}

// The DOM builder, plus a check that no object repeats a key, which remembers where the first repeat is:
// the path of the object holding it (`jobs[3]`, `env`; "" at the top). (nlohmann's callback parser does the
// same check in quadratic time on long arrays of objects; SAX stays linear.)
class DuplicateKeyParser : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  explicit DuplicateKeyParser(json& out) : json_sax_dom_parser(out, true) {}
  bool start_object(std::size_t n) {
    element();
    frames_.emplace_back();
    frames_.back().object = true;
    return json_sax_dom_parser::start_object(n);
  }
  bool end_object() {
    if (!frames_.empty()) frames_.pop_back();
    return json_sax_dom_parser::end_object();
  }
  bool start_array(std::size_t n) {
    element();
    frames_.emplace_back();
    return json_sax_dom_parser::start_array(n);
  }
  bool end_array() {
    if (!frames_.empty()) frames_.pop_back();
    return json_sax_dom_parser::end_array();
  }
  bool key(json::string_t& k) {
    if (!frames_.empty()) {
      Frame& f = frames_.back();
      if (!f.keys.insert(k).second && duplicate_.empty()) {
        duplicate_ = k;
        where_ = path();
      }
      f.key = k;
    }
    return json_sax_dom_parser::key(k);
  }
  bool null() { return element(), json_sax_dom_parser::null(); }
  bool boolean(bool v) { return element(), json_sax_dom_parser::boolean(v); }
  bool number_integer(json::number_integer_t v) { return element(), json_sax_dom_parser::number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) {
    return element(), json_sax_dom_parser::number_unsigned(v);
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return element(), json_sax_dom_parser::number_float(v, s);
  }
  bool string(json::string_t& v) { return element(), json_sax_dom_parser::string(v); }
  const std::string& duplicate() const { return duplicate_; }
  const std::string& where() const { return where_; }

 private:
  struct Frame {
    bool object = false;
    std::set<std::string> keys;  // objects: the keys so far
    std::string key;             // objects: the current key
    size_t count = 0;            // arrays: elements so far
  };
  // A value starts: in an array it is the next element.
  void element() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().count;
  }
  // The path of the innermost frame (the object where a key repeats).
  std::string path() const {
    std::string out;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.object) {
        out += (out.empty() ? "" : ".") + f.key;
      } else {
        out += "[" + std::to_string(f.count - 1) + "]";
      }
    }
    return out;
  }
  std::vector<Frame> frames_;
  std::string duplicate_, where_;
};

}  // namespace

Result<json> parse_json_text(std::string_view text, size_t max_bytes, int max_depth, std::string_view what) {
  if (text.size() > max_bytes)
    return invalid(std::string(what) + ": " + std::to_string(text.size()) + " bytes; at most " +
                   std::to_string(max_bytes) + " allowed");
  if (json_text_depth(text) > max_depth)
    return invalid(std::string(what) + ": nested deeper than " + std::to_string(max_depth) + " levels");
  json j;
  DuplicateKeyParser sax(j);
  try {
    json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const json::exception& e) {
    return invalid("invalid JSON: " + json_error_text(e.what()));
  } catch (const std::exception& e) {
    return internal_error(std::string(what) + ": " + e.what());
  }
  if (!sax.duplicate().empty())
    return invalid((sax.where().empty() ? "" : sax.where() + ": ") + "duplicate key " +
                   in_quotes(sax.duplicate()) + " (each field may appear once)");
  return j;
}

}  // namespace railyard::jobs
