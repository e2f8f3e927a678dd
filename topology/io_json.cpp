#include "topology/io_json.hpp"

#include <climits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/hostlist.hpp"
#include "topology/io_common.hpp"

namespace railyard::topology {
namespace {

using Json = nlohmann::json;

std::string show_value(const Json& j) {
  std::string text = j.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(j.type_name()) + " " + text;
}

// Reads the fields of one JSON object by name, keeping the first error. finish() also reports the fields
// nobody asked for, so a typo ("nodez") is an error instead of a setting silently ignored.
class FieldReader {
 public:
  FieldReader(const Json& object, std::string path) : object_(object), path_(std::move(path)) {}

  std::string where(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  bool has(const char* key) const { return object_.contains(key); }
  bool failed() const { return error_.has_value(); }
  void fail(std::string message) {
    if (!error_) error_ = invalid(std::move(message));
  }

  std::string string(const char* key, std::string fallback) {
    const Json* j = typed(key, &Json::is_string, "a string");
    return j ? j->get<std::string>() : fallback;
  }
  std::string required_string(const char* key) { return require(key) ? string(key, "") : ""; }

  int integer(const char* key, int fallback) {
    const Json* j = typed(key, &Json::is_number_integer, "an integer");
    if (!j) return fallback;
    double v = j->get<double>();
    if (v >= INT_MIN && v <= INT_MAX) return j->get<int>();
    fail(where(key) + ": " + j->dump() + " is out of range");
    return fallback;
  }
  int required_integer(const char* key) { return require(key) ? integer(key, 0) : 0; }

  double number(const char* key, double fallback) {
    const Json* j = typed(key, &Json::is_number, "a number");
    return j ? j->get<double>() : fallback;
  }
  double required_number(const char* key) { return require(key) ? number(key, 0) : 0; }

  bool boolean(const char* key, bool fallback) {
    const Json* j = typed(key, &Json::is_boolean, "true or false");
    return j ? j->get<bool>() : fallback;
  }

  // An array of strings.
  std::vector<std::string> strings(const char* key) {
    std::vector<std::string> out;
    const Json* j = typed(key, &Json::is_array, "an array of strings");
    for (size_t i = 0; j && i < j->size(); ++i) {
      if (!(*j)[i].is_string()) {
        type_error(key, "an array of strings", (*j)[i]);
        return {};
      }
      out.push_back((*j)[i].get<std::string>());
    }
    return out;
  }

  // A host list expression ("dgx[001-032]") or an array of names.
  std::vector<std::string> names(const char* key) {
    const Json* j = find(key);
    if (!j || j->is_array()) return strings(key);
    if (!j->is_string()) {
      type_error(key, "a host list or an array of names", *j);
      return {};
    }
    auto expanded = expand_hostlist(j->get<std::string>());
    if (expanded) return std::move(expanded).value();
    fail(where(key) + ": " + expanded.error().message);
    return {};
  }

  // An array (of anything); nullptr when absent or not an array.
  const Json* array(const char* key) { return typed(key, &Json::is_array, "an array"); }

  bool require(const char* key) {
    if (has(key)) return true;
    fail(where(key) + ": missing");
    return false;
  }

  Status finish() {
    for (const auto& [key, value] : object_.items())
      if (!seen_.count(key)) fail(where(key) + ": unknown field");
    if (error_) return *error_;
    return ok();
  }

 private:
  const Json* find(const char* key) {
    seen_.insert(key);
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }
  // The value under `key` when present and of the kind `is_kind` checks; records a type error otherwise.
  const Json* typed(const char* key, bool (Json::*is_kind)() const noexcept, const char* expected) {
    const Json* j = find(key);
    if (!j || (j->*is_kind)()) return j;
    type_error(key, expected, *j);
    return nullptr;
  }
  void type_error(const char* key, const char* expected, const Json& got) {
    fail(where(key) + ": expected " + expected + ", got " + show_value(got));
  }

  const Json& object_;
  std::string path_;
  std::set<std::string, std::less<>> seen_;
  std::optional<Error> error_;
};

std::string element(std::string_view array, size_t i) {
  return std::string(array) + "[" + std::to_string(i) + "]";
}

Error at(const std::string& where, const Error& e) { return {e.code, where + ": " + e.message}; }

Result<Json> parse_json(std::string_view text) {
  try {
    return Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true,
                       /*ignore_comments=*/true);
  } catch (const Json::parse_error& e) {
    auto lc = detail::line_column(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    size_t colon = what.find(": ", what.find("column"));
    std::string reason = colon == std::string::npos ? what : what.substr(colon + 2);
    return invalid("line " + std::to_string(lc.line) + ", column " + std::to_string(lc.column) +
                   ": malformed JSON: " + reason);
  } catch (const Json::exception& e) {
    return invalid(std::string("malformed JSON: ") + e.what());
  }
}

Result<NodeProfile> read_profile(const Json& j, const std::string& path) {
  if (!j.is_object()) return invalid(path + ": expected an object, got " + show_value(j));
  FieldReader f(j, path);
  NodeProfile p;
  p.name = f.required_string("name");
  p.gpu_type = f.string("gpu_type", "");
  p.gpu_memory_gb = f.integer("gpu_memory_gb", 0);
  p.mig_capable = f.boolean("mig_capable", false);
  p.gpus = f.required_integer("gpus");
  std::string fabric = f.string("fabric", "nvswitch");
  if (auto parsed = parse_fabric(fabric)) {
    p.fabric = *parsed;
  } else {
    f.fail(f.where("fabric") + ": unknown fabric \"" + fabric + "\" (expected nvswitch, cube-mesh or pcie)");
  }
  int default_domain = p.fabric == IntraFabric::kPcie       ? 1
                       : p.fabric == IntraFabric::kCubeMesh ? p.gpus / 2
                                                            : p.gpus;
  p.nvlink_domain_size = f.integer("nvlink_domain_size", default_domain);
  p.intra_gbytes_s = f.required_number("intra_gbytes_s");
  p.cross_gbytes_s = f.number("cross_gbytes_s", p.intra_gbytes_s);
  p.full_node_gbytes_s = f.number("full_node_gbytes_s", p.intra_gbytes_s);
  p.hcas = f.integer("hcas", 0);
  p.hca_gbits_s = f.number("hca_gbits_s", 0);
  p.intra_latency_us = f.number("intra_latency_us", 1.5);
  if (auto s = f.finish(); !s) return s.error();
  return p;
}

Status read_profiles(const Json& array, ClusterBuilder& builder, std::unordered_set<std::string>& names) {
  for (size_t i = 0; i < array.size(); ++i) {
    auto p = read_profile(array[i], element("profiles", i));
    if (!p) return p.error();
    names.insert(p->name);
    if (auto s = builder.add_profile(std::move(p).value()); !s) return at(element("profiles", i), s.error());
  }
  return ok();
}

Status read_nodes(const Json& array, ClusterBuilder& builder, const std::unordered_set<std::string>& custom,
                  const JsonReadOptions& options) {
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string path = element("nodes", i);
    if (!array[i].is_object()) return invalid(path + ": expected an object, got " + show_value(array[i]));
    FieldReader f(array[i], path);
    std::vector<std::string> names;
    if (f.has("name") == f.has("names")) f.fail(path + ": give either \"name\" or \"names\" (a host list)");
    if (f.has("names")) {
      names = f.names("names");
    } else {
      names.push_back(f.required_string("name"));
    }
    std::string profile = f.string("profile", options.default_profile);
    std::vector<std::string> features = f.strings("features");
    if (auto s = f.finish(); !s) return s;
    if (!custom.count(profile) && !find_builtin_profile(profile))
      return invalid(f.where("profile") + ": unknown profile \"" + profile +
                     "\" (not built in, and not defined under \"profiles\")");
    for (auto& name : names)
      if (auto s = builder.add_node(std::move(name), profile, features); !s) return at(path, s.error());
  }
  return ok();
}

struct SwitchEntry {
  std::string path;
  ClusterBuilder::SwitchSpec spec;
  std::vector<std::string> nodes;
  std::vector<std::string> children;
};

Result<SwitchEntry> read_switch(const Json& j, std::string path) {
  if (!j.is_object()) return invalid(path + ": expected an object, got " + show_value(j));
  FieldReader f(j, path);
  SwitchEntry e;
  e.spec.name = f.required_string("name");
  std::string level = f.required_string("level");
  if (!f.failed()) {
    auto parsed = parse_level(level);
    if (parsed) {
      e.spec.level = *parsed;
    } else {
      f.fail(f.where("level") + ": " + parsed.error().message);
    }
  }
  e.nodes = f.names("nodes");
  e.children = f.names("children");
  e.spec.switch_count = f.integer("switch_count", 1);
  e.spec.rail_optimized = f.boolean("rail_optimized", false);
  e.spec.oversubscription = f.number("oversubscription", 1.0);
  e.spec.block_gbytes_s = f.number("block_gbytes_s", 0.0);
  if (auto s = f.finish(); !s) return s.error();
  e.path = std::move(path);
  return e;
}

// Adds every switch first (children may be listed before they are defined), checks names and loops, then
// attaches nodes and children in the order given, which is the order the model keeps.
Status read_switches(const Json& array, ClusterBuilder& builder) {
  std::vector<SwitchEntry> entries;
  std::unordered_map<std::string, int> index;
  std::vector<std::string> names;
  for (size_t i = 0; i < array.size(); ++i) {
    auto e = read_switch(array[i], element("switches", i));
    if (!e) return e.error();
    if (auto s = builder.add_switch(e->spec); !s) return at(e->path, s.error());
    index.emplace(e->spec.name, static_cast<int>(i));
    names.push_back(e->spec.name);
    entries.push_back(std::move(e).value());
  }
  std::vector<std::vector<int>> children(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    for (const auto& child : entries[i].children) {
      auto it = index.find(child);
      if (it == index.end())
        return invalid(entries[i].path + ".children: switch \"" + entries[i].spec.name +
                       "\" names undefined switch \"" + child + "\"");
      children[i].push_back(it->second);
    }
  }
  if (auto loop = detail::find_loop(children); !loop.empty())
    return invalid(entries[loop.front()].path +
                   ".children: switches form a loop: " + detail::describe_loop(loop, names));
  for (const auto& e : entries) {
    for (const auto& n : e.nodes)
      if (auto s = builder.attach_node(e.spec.name, n); !s) return at(e.path + ".nodes", s.error());
    for (const auto& c : e.children)
      if (auto s = builder.attach_switch(e.spec.name, c); !s) return at(e.path + ".children", s.error());
  }
  return ok();
}

Result<Cluster> read_document(const Json& doc, const JsonReadOptions& options) {
  if (!doc.is_object()) return invalid("the top level must be an object, got " + show_value(doc));
  FieldReader top(doc, "");
  int version = top.integer("version", 1);
  if (!top.failed() && version != 1)
    top.fail("version: unsupported version " + std::to_string(version) + " (this Railyard reads version 1)");
  ClusterBuilder builder(top.string("name", "cluster"));
  const Json* profiles = top.array("profiles");
  const Json* nodes = top.require("nodes") ? top.array("nodes") : nullptr;
  const Json* switches = top.array("switches");
  if (auto s = top.finish(); !s) return s.error();
  std::unordered_set<std::string> custom;
  if (profiles)
    if (auto s = read_profiles(*profiles, builder, custom); !s) return s.error();
  if (auto s = read_nodes(*nodes, builder, custom, options); !s) return s.error();
  if (switches)
    if (auto s = read_switches(*switches, builder); !s) return s.error();
  return std::move(builder).build();
}

}  // namespace

Result<Cluster> read_cluster_json(std::string_view text, const JsonReadOptions& options) {
  try {
    auto doc = parse_json(text);
    if (!doc) return doc.error();
    return read_document(*doc, options);
  } catch (const std::exception& e) {  // a bug or out of memory; never let it escape a reader
    return internal_error(std::string("reading JSON cluster file: ") + e.what());
  }
}

Result<NodeProfile> profile_from_json(std::string_view text) {
  try {
    auto doc = parse_json(text);
    if (!doc) return doc.error();
    return read_profile(*doc, "profile");
  } catch (const std::exception& e) {
    return internal_error(std::string("reading a profile: ") + e.what());
  }
}

}  // namespace railyard::topology
