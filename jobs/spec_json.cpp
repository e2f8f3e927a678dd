#include "jobs/spec_json.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <exception>
#include <set>
#include <string>

#include "jobs/container.hpp"
#include "jobs/parse_util.hpp"
#include "jobs/time_limit.hpp"

namespace railyard::jobs {
namespace {

using json = nlohmann::json;

// Collects every problem so the user can fix them all at once.
struct Reader {
  std::vector<std::string> errors;
  void fail(std::string_view field, const std::string& msg) {
    errors.push_back(std::string(field) + ": " + msg);
  }
  // `field "value": msg`, as the validation messages write a bad value.
  void bad_value(std::string_view field, std::string_view value, const std::string& msg) {
    errors.push_back(std::string(field) + " " + in_quotes(value) + ": " + msg);
  }
  void expected(std::string_view field, std::string_view what, const json& got);
};

std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return "string " + in_quotes(v.get_ref<const std::string&>());
    case json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer " + v.dump();
    case json::value_t::number_float:
      return "number " + v.dump();
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::null:
      return "null";
    default:
      return std::string("a ") + v.type_name();
  }
}

void Reader::expected(std::string_view field, std::string_view what, const json& got) {
  fail(field, "expected " + std::string(what) + ", got " + describe(got));
}

std::optional<int64_t> read_int64(const json& v, std::string_view field, Reader& r) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    r.fail(field, v.dump() + " is out of range");
    return std::nullopt;
  }
  if (!v.is_number_integer()) {
    r.expected(field, "an integer", v);
    return std::nullopt;
  }
  return v.get<int64_t>();
}

void read_int(const json& v, std::string_view field, int& out, Reader& r) {
  auto x = read_int64(v, field, r);
  if (!x) return;
  if (*x < INT_MIN || *x > INT_MAX) return r.fail(field, std::to_string(*x) + " is out of range");
  out = static_cast<int>(*x);
}

void read_string(const json& v, std::string_view field, std::string& out, Reader& r) {
  if (!v.is_string()) return r.expected(field, "a string", v);
  out = v.get<std::string>();
}

void read_bool(const json& v, std::string_view field, bool& out, Reader& r) {
  if (!v.is_boolean()) return r.expected(field, "true or false", v);
  out = v.get<bool>();
}

template <typename E, size_t N>
void read_enum(const json& v, std::string_view field, const std::array<std::string_view, N>& names,
               std::optional<E> (*parse)(std::string_view), E& out, Reader& r) {
  std::string expected;
  for (size_t i = 0; i < N; ++i)
    expected += (i == 0 ? "\"" : i + 1 == N ? " or \"" : ", \"") + std::string(names[i]) + "\"";
  if (!v.is_string()) return r.expected(field, expected, v);
  const auto& s = v.get_ref<const std::string&>();
  auto e = parse(s);
  if (!e) return r.fail(field, "expected " + expected + ", got " + in_quotes(s) + did_you_mean(s, names));
  out = *e;
}

bool check_entries(const json& v, std::string_view field, Reader& r) {
  if (v.size() <= kMaxListEntries) return true;
  r.fail(field,
         std::to_string(v.size()) + " entries; at most " + std::to_string(kMaxListEntries) + " allowed");
  return false;
}

void read_string_list(const json& v, std::string_view field, std::vector<std::string>& out, Reader& r) {
  if (!v.is_array()) return r.expected(field, "an array of strings", v);
  if (!check_entries(v, field, r)) return;
  out.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      r.expected(std::string(field) + "[" + std::to_string(i) + "]", "a string", v[i]);
      continue;
    }
    out.push_back(v[i].get<std::string>());
  }
}

void read_command(const json& v, std::string_view /*field*/, JobSpec& s, Reader& r) {
  if (v.is_string()) {
    s.command = {"/bin/sh", "-c", v.get<std::string>()};
    return;
  }
  if (!v.is_array()) return r.expected("command", "an array of strings or a shell command string", v);
  read_string_list(v, "command", s.command, r);
}

void read_env(const json& v, std::string_view /*field*/, JobSpec& s, Reader& r) {
  if (!v.is_object()) return r.expected("env", "an object of strings", v);
  if (!check_entries(v, "env", r)) return;
  s.env.clear();
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      r.expected("env." + key, "a string", value);
      continue;
    }
    s.env[key] = value.get<std::string>();
  }
}

void read_time_limit(const json& v, std::string_view /*field*/, JobSpec& s, Reader& r) {
  if (v.is_string()) {
    auto t = parse_time_limit(v.get_ref<const std::string&>());
    if (!t) return r.bad_value("time_limit", v.get_ref<const std::string&>(), t.error().message);
    s.time_limit_s = *t;
    return;
  }
  if (!v.is_number_integer())
    return r.expected("time_limit", "seconds (an integer) or a string like \"2h\"", v);
  if (auto t = read_int64(v, "time_limit", r)) s.time_limit_s = *t;
}

void read_target(const json& v, std::string_view /*field*/, JobSpec& s, Reader& r) {
  if (!v.is_object()) return r.expected("target", "an object {\"metric\": ..., \"value\": ...}", v);
  Target t;
  for (const auto& [key, item] : v.items()) {
    if (key == "metric") {
      read_string(item, "target.metric", t.metric, r);
    } else if (key == "value") {
      if (!item.is_number()) {
        r.expected("target.value", "a number", item);
        continue;
      }
      t.value = item.get<double>();
    } else {
      static constexpr std::array<std::string_view, 2> kTargetFields = {"metric", "value"};
      r.fail("target", "unknown field " + in_quotes(key) + did_you_mean(key, kTargetFields));
    }
  }
  if (!v.contains("value")) r.fail("target.value", "missing");
  s.target = t;
}

void read_mounts(const json& v, ContainerSpec& c, Reader& r) {
  if (!v.is_array())
    return r.expected("container.mounts", "an array of strings like \"/lustre:/data:ro\"", v);
  if (v.size() > kMaxMounts)
    return r.fail("container.mounts",
                  std::to_string(v.size()) + " entries; at most " + std::to_string(kMaxMounts) + " allowed");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = "container.mounts[" + std::to_string(i) + "]";
    if (!v[i].is_string()) {
      r.expected(field, "a string like \"/lustre:/data:ro\"", v[i]);
      continue;
    }
    auto m = parse_mount(v[i].get_ref<const std::string&>());
    if (!m) {
      r.bad_value(field, v[i].get_ref<const std::string&>(), m.error().message);
      continue;
    }
    c.mounts.push_back(std::move(*m));
  }
}

// The whole container is checked as it is read (not left to validate.hpp): agents read it from the launch
// order with this function and run what it says.
void read_container(const json& v, std::string_view /*field*/, JobSpec& s, Reader& r) {
  if (!v.is_object()) return r.expected("container", "an object {\"image\": ..., \"mounts\": [...], ...}", v);
  static constexpr std::array<std::string_view, 5> kContainerFields = {"image", "mounts", "workdir",
                                                                       "writable", "name"};
  ContainerSpec c;
  const size_t errors_before = r.errors.size();
  for (const auto& [key, item] : v.items()) {
    if (key == "image") {
      if (!item.is_string()) {
        r.expected("container.image", "a string like \"nvcr.io/nvidia/pytorch:24.04-py3\"", item);
        continue;
      }
      auto image = parse_image(item.get_ref<const std::string&>());
      if (!image)
        r.bad_value("container.image", item.get_ref<const std::string&>(), image.error().message);
      else
        c.image = std::move(*image);
    } else if (key == "mounts") {
      read_mounts(item, c, r);
    } else if (key == "workdir") {
      read_string(item, "container.workdir", c.workdir, r);
    } else if (key == "writable") {
      read_bool(item, "container.writable", c.writable, r);
    } else if (key == "name") {
      read_string(item, "container.name", c.name, r);
    } else {
      r.fail("container", "unknown field " + in_quotes(key) + did_you_mean(key, kContainerFields));
    }
  }
  if (!v.contains("image"))
    r.fail("container.image", "missing (the image to run in, e.g. \"nvcr.io/nvidia/pytorch:24.04-py3\")");
  for (std::string& p : container_layout_problems(c)) r.errors.push_back(std::move(p));
  if (r.errors.size() == errors_before) s.container = std::move(c);
}

void read_afterok(const json& v, std::string_view /*field*/, JobSpec& s, Reader& r) {
  if (!v.is_array()) return r.expected("afterok", "an array of job ids", v);
  if (!check_entries(v, "afterok", r)) return;
  for (size_t i = 0; i < v.size(); ++i) {
    if (auto id = read_int64(v[i], "afterok[" + std::to_string(i) + "]", r)) s.afterok.push_back(*id);
  }
}

void read_after(const json& v, std::string_view /*field*/, JobSpec& s, Reader& r) {
  if (!v.is_array())
    return r.expected("after", "an array of strings like \"afterany:40\" or \"afterok:12_3\"", v);
  if (!check_entries(v, "after", r)) return;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = "after[" + std::to_string(i) + "]";
    if (!v[i].is_string()) {
      r.expected(field, "a string like \"afterany:40\"", v[i]);
      continue;
    }
    auto d = parse_one_dependency(v[i].get_ref<const std::string&>());
    if (!d) {
      r.bad_value(field, v[i].get_ref<const std::string&>(), d.error().message);
      continue;
    }
    s.after.push_back(*d);
  }
}

void read_dependency(const json& v, std::string_view /*field*/, JobSpec& s, Reader& r) {
  if (!v.is_string()) return r.expected("dependency", "a string like \"afterok:12:13\"", v);
  auto deps = parse_dependency(v.get_ref<const std::string&>());
  if (!deps) return r.bad_value("dependency", v.get_ref<const std::string&>(), deps.error().message);
  s.afterok.insert(s.afterok.end(), deps->afterok.begin(), deps->afterok.end());
  s.after.insert(s.after.end(), deps->after.begin(), deps->after.end());
}

void read_array(const json& v, std::string_view /*field*/, JobSpec& s, Reader& r) {
  if (!v.is_string()) return r.expected("array", "a string like \"0-99\" or \"1,3,5-9%4\"", v);
  auto a = parse_array_spec(v.get_ref<const std::string&>());
  if (!a) return r.errors.push_back(a.error().message);  // names the field itself: "array ...: why"
  s.array = std::move(*a);
}

void read_array_job(const json& v, std::string_view field, JobSpec& s, Reader& r) {
  if (auto id = read_int64(v, field, r)) s.array_job = *id;
}

constexpr std::array<std::string_view, 2> kKindNames = {"batch", "service"};
constexpr std::array<std::string_view, 3> kLayoutNames = {"auto", "pack", "spread"};
constexpr std::array<std::string_view, 3> kQosNames = {"high", "normal", "scavenger"};
constexpr std::array<std::string_view, 3> kLauncherNames = {"none", "env", "mpi"};

template <std::string JobSpec::*M>
void string_field(const json& v, std::string_view field, JobSpec& s, Reader& r) {
  read_string(v, field, s.*M, r);
}
template <int JobSpec::*M>
void int_field(const json& v, std::string_view field, JobSpec& s, Reader& r) {
  read_int(v, field, s.*M, r);
}
template <bool JobSpec::*M>
void bool_field(const json& v, std::string_view field, JobSpec& s, Reader& r) {
  read_bool(v, field, s.*M, r);
}
template <auto M, const auto& kNames, auto kParse>
void enum_field(const json& v, std::string_view field, JobSpec& s, Reader& r) {
  read_enum(v, field, kNames, kParse, s.*M, r);
}
void features_field(const json& v, std::string_view field, JobSpec& s, Reader& r) {
  read_string_list(v, field, s.features, r);
}

using FieldReader = void (*)(const json&, std::string_view field, JobSpec&, Reader&);
struct Field {
  std::string_view name;
  FieldReader read;
};

const std::array<Field, 30> kFields = {{
    {"name", string_field<&JobSpec::name>},
    {"user", string_field<&JobSpec::user>},
    {"project", string_field<&JobSpec::project>},
    {"kind", enum_field<&JobSpec::kind, kKindNames, parse_kind>},
    {"gpus", int_field<&JobSpec::gpus>},
    {"nodes", int_field<&JobSpec::nodes>},
    {"gpus_per_node", int_field<&JobSpec::gpus_per_node>},
    {"replicas", int_field<&JobSpec::replicas>},
    {"gpu_type", string_field<&JobSpec::gpu_type>},
    {"mig", string_field<&JobSpec::mig>},
    {"features", features_field},
    {"layout", enum_field<&JobSpec::layout, kLayoutNames, parse_layout>},
    {"exclusive", bool_field<&JobSpec::exclusive>},
    {"mem_mb", int_field<&JobSpec::mem_mb>},
    {"time_limit", read_time_limit},
    {"qos", enum_field<&JobSpec::qos, kQosNames, parse_qos>},
    {"priority", int_field<&JobSpec::priority>},
    {"launcher", enum_field<&JobSpec::launcher, kLauncherNames, parse_launcher>},
    {"command", read_command},
    {"env", read_env},
    {"workdir", string_field<&JobSpec::workdir>},
    {"container", read_container},
    {"requeue", bool_field<&JobSpec::requeue>},
    {"target", read_target},
    {"afterok", read_afterok},
    {"after", read_after},
    {"dependency", read_dependency},
    {"array", read_array},
    {"array_job", read_array_job},
    {"array_task", int_field<&JobSpec::array_task>},
}};

const std::array<std::string_view, 30> kFieldNames = [] {
  std::array<std::string_view, 30> names{};
  for (size_t i = 0; i < kFields.size(); ++i) names[i] = kFields[i].name;
  return names;
}();

// Depth of nesting, counting containers; stops counting past `limit` so it is cheap on hostile input.
int depth_of(const json& v, int limit) {
  if (!v.is_structured()) return 0;
  if (limit <= 0) return 1;
  int deepest = 0;
  for (const auto& child : v) deepest = std::max(deepest, depth_of(child, limit - 1));
  return deepest + 1;
}

void normalize(const json& j, JobSpec& s) {
  if (iequals(s.gpu_type, "any")) s.gpu_type.clear();
  s.gpu_type = to_upper(s.gpu_type);
  s.mig = to_lower(s.mig);
  if (!s.mig.empty() && !j.contains("gpus")) s.gpus = 1;
  // Duplicates dropped, first ones kept (sets: the lists may hold 10,000 entries each). afterok on a whole
  // job written in "after" joins `afterok`, where the same dependency given as "afterok" or "dependency" is.
  std::vector<JobId> unique;
  std::set<JobId> ids;
  for (JobId id : s.afterok)
    if (ids.insert(id).second) unique.push_back(id);
  std::vector<Dependency> rest;
  std::set<Dependency> seen;
  for (const Dependency& d : s.after) {
    if (d.type == Dependency::Type::kAfterOk && d.task < 0) {
      if (ids.insert(d.job).second) unique.push_back(d.job);
    } else if (seen.insert(d).second) {
      rest.push_back(d);
    }
  }
  s.afterok = std::move(unique);
  s.after = std::move(rest);
}

Result<JobSpec> read_spec(const json& j) {
  if (!j.is_object()) return invalid("job spec: expected a JSON object, got " + describe(j));
  if (depth_of(j, kMaxJsonDepth) > kMaxJsonDepth)
    return invalid("job spec: nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  Reader r;
  JobSpec spec;
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    auto it = std::find_if(kFields.begin(), kFields.end(), [&](const Field& f) { return f.name == key; });
    if (it == kFields.end()) {
      r.errors.push_back("unknown field " + in_quotes(key) + did_you_mean(key, kFieldNames));
      continue;
    }
    it->read(item.value(), it->name, spec, r);
  }
  if (!r.errors.empty()) return invalid(join(r.errors, "; "));
  normalize(j, spec);
  return spec;
}

}  // namespace

Result<JobSpec> parse_job_spec(const nlohmann::json& j) {
  try {
    return read_spec(j);
  } catch (const std::exception& e) {
    return internal_error(std::string("job spec: ") + e.what());
  }
}

Result<JobSpec> parse_job_spec_text(std::string_view text) {
  auto j = parse_json_text(text, kMaxSpecTextBytes, kMaxJsonDepth, "job spec");
  if (!j) return j.error();
  return parse_job_spec(*j);
}

nlohmann::json to_json(const JobSpec& s) {
  json j = {
      {"name", s.name},
      {"user", s.user},
      {"project", s.project},
      {"kind", to_string(s.kind)},
      {"gpus", s.gpus},
      {"nodes", s.nodes},
      {"gpus_per_node", s.gpus_per_node},
      {"replicas", s.replicas},
      {"gpu_type", s.gpu_type},
      {"mig", s.mig},
      {"features", s.features},
      {"layout", to_string(s.layout)},
      {"exclusive", s.exclusive},
      {"time_limit", s.time_limit_s},
      {"qos", to_string(s.qos)},
      {"priority", s.priority},
      {"launcher", to_string(s.launcher)},
      {"command", s.command},
      {"env", s.env},
      {"workdir", s.workdir},
      {"requeue", s.requeue},
      {"afterok", s.afterok},
  };
  if (s.mem_mb != 0) j["mem_mb"] = s.mem_mb;
  if (s.target) j["target"] = {{"metric", s.target->metric}, {"value", s.target->value}};
  if (s.container) {
    json mounts = json::array();
    for (const Mount& m : s.container->mounts) mounts.push_back(m.text());
    j["container"] = {{"image", s.container->image},
                      {"mounts", std::move(mounts)},
                      {"workdir", s.container->workdir},
                      {"writable", s.container->writable},
                      {"name", s.container->name}};
  }
  if (!s.after.empty()) {
    json after = json::array();
    for (const Dependency& d : s.after) after.push_back(d.text());
    j["after"] = std::move(after);
  }
  if (s.array) j["array"] = s.array->text();
  if (s.array_job != 0) {
    j["array_job"] = s.array_job;
    j["array_task"] = s.array_task;
  }
  return j;
}

std::span<const std::string_view> job_spec_fields() { return kFieldNames; }

}  // namespace railyard::jobs
