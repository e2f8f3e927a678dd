// Result<T>: a value or an Error, with std::expected-like names (C++20 has no std::expected).
// Errors cross module APIs as values; exceptions stay inside start-up code and Asio glue.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace railyard {

// Error kinds the shells map to exit codes / HTTP statuses.
enum class ErrorCode {
  kInvalidArgument,  // bad input from a user or a file (exit 2, HTTP 400)
  kNotFound,         // unknown job/node/file (exit 3, HTTP 404)
  kPermission,       // not allowed (exit 3, HTTP 403)
  kConflict,         // state forbids it (HTTP 409)
  kUnavailable,      // try again later (HTTP 503)
  kInternal,         // a bug or an I/O failure (exit 1, HTTP 500)
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

inline Error invalid(std::string message) { return {ErrorCode::kInvalidArgument, std::move(message)}; }
inline Error not_found(std::string message) { return {ErrorCode::kNotFound, std::move(message)}; }
inline Error internal_error(std::string message) { return {ErrorCode::kInternal, std::move(message)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}       // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}   // NOLINT(google-explicit-constructor)

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
struct Ok {};
using Status = Result<Ok>;
inline Status ok() { return Ok{}; }

}  // namespace railyard
