#include "cli/cli_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>

#include "common/hostlist.hpp"

namespace railyard::cli {

int exit_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return kExitUsage;
    case ErrorCode::kNotFound:
    case ErrorCode::kPermission:
      return kExitNotFound;
    default:
      return kExitInternal;
  }
}

void fail(const Error& error) {
  std::cerr << "railyard: " << error.message << std::endl;
  throw CLI::RuntimeError(exit_code(error.code));
}

void fail_usage(const std::string& message) { fail(invalid(message)); }

CLI::Validator at_least(long long min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        constexpr long long kMax = std::numeric_limits<int>::max();  // the options it checks are ints
        long long v = 0;
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, v);
        const bool huge = ec == std::errc::result_out_of_range && text[0] != '-';
        if (ptr == end && (huge || (ec == std::errc{} && v > kMax)))
          return text + " is too large (at most " + std::to_string(kMax) + ")";
        if (ec != std::errc{} || ptr != end || v < min)
          return "must be a whole number of at least " + std::to_string(min) + ", not " + text;
        return {};
      },
      ">=" + std::to_string(min));
}

Result<double> parse_byte_size(std::string_view text) {
  auto bad = [&] { return invalid("bad size \"" + std::string(text) + "\" (examples: 8, 64K, 1M, 1G)"); };
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || !std::isfinite(value) || value <= 0) return bad();
  std::string unit(end, text.data() + text.size());
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() == 3 && unit.substr(1) == "IB") unit.resize(1);
  if (unit.size() == 2 && unit[1] == 'B') unit.resize(1);
  static constexpr std::string_view kUnits = "KMGT";
  if (unit.empty() || unit == "B") return value;
  size_t power = kUnits.find(unit);
  if (unit.size() != 1 || power == std::string_view::npos) return bad();
  return value * std::pow(1024.0, static_cast<double>(power + 1));
}

std::vector<std::string> expand_nodes_or_fail(const std::vector<std::string>& exprs) {
  std::vector<std::string> out;
  for (const auto& e : exprs) {
    auto names = expand_hostlist(e, 100'000);
    if (!names) fail(invalid("bad node list \"" + e + "\": " + names.error().message));
    out.insert(out.end(), names->begin(), names->end());
  }
  return out;
}

std::string format_bytes(double bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && bytes >= 1024 && std::fmod(bytes, 1024) == 0) {
    bytes /= 1024;
    ++unit;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g %s", bytes, kNames[unit]);
  return buf;
}

std::string format_seconds(double seconds) {
  char buf[64];
  if (seconds == 0) return "0";
  if (seconds < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.3g us", seconds * 1e6);
  } else if (seconds < 1) {
    std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g s", seconds);
  }
  return buf;
}

void write_private_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                       ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ::close(fd);
  if (!written) fail(internal_error("cannot write " + path));
}

}  // namespace railyard::cli
