// Strict reading of message fields: a missing required field or a value of the wrong JSON type throws a
// nlohmann::json exception (out_of_range 403 / type_error 302) whose text names the field, which both sides
// answer as a bad message. Integers must be JSON integers (a float is never truncated), booleans booleans.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace railyard::protocol::field {

using nlohmann::json;

[[noreturn]] inline void wrong(const json& j, const char* key, const char* want) {
  throw json::type_error::create(302, std::string("field \"") + key + "\" must be " + want, &j);
}

// One value as T: std::string, bool, int, int64_t, double, json (anything), std::vector of those, or a
// protocol struct with from_json (read strictly by its own from_json).
template <class T>
T as(const json& v, const char* key) {
  if constexpr (std::is_same_v<T, json>) {
    return v;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) wrong(v, key, "a string");
    return v.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) wrong(v, key, "a boolean");
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{1} << 62))
      wrong(v, key, "an integer");
    const int64_t x = v.get<int64_t>();
    if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        x > static_cast<int64_t>(std::numeric_limits<T>::max()))
      wrong(v, key, "an integer in range");
    return static_cast<T>(x);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) wrong(v, key, "a number");
    return v.get<T>();
  } else if constexpr (requires(T t) { t.push_back(std::declval<typename T::value_type>()); }) {
    if (!v.is_array()) wrong(v, key, "an array");
    T out;
    for (const auto& e : v) out.push_back(as<typename T::value_type>(e, key));
    return out;
  } else {
    if (!v.is_object()) wrong(v, key, "an object");
    return v.get<T>();
  }
}

template <class T>
T get(const json& j, const char* key) {
  if (!j.is_object()) wrong(j, key, "in an object");
  auto it = j.find(key);
  if (it == j.end()) throw json::out_of_range::create(403, std::string("missing field \"") + key + "\"", &j);
  return as<T>(*it, key);
}

// Absent or null: nullopt.
template <class T>
std::optional<T> opt(const json& j, const char* key) {
  if (!j.is_object()) wrong(j, key, "in an object");
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return as<T>(*it, key);
}

template <class T>
T get_or(const json& j, const char* key, T dflt) {
  auto v = opt<T>(j, key);
  return v ? std::move(*v) : std::move(dflt);
}

}  // namespace railyard::protocol::field
