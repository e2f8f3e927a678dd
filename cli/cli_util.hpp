// Small pieces every command needs: exit codes, failing with a message, byte sizes, durations.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace CLI {
class Validator;
}

namespace railyard::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;  // a bug or an I/O failure
inline constexpr int kExitUsage = 2;     // bad input: arguments, files, names
inline constexpr int kExitNotFound = 3;  // a missing file, job or node; not allowed

int exit_code(ErrorCode code);

// Prints "railyard: <message>" on stderr and ends the running command with exit_code(error.code)
// (by throwing CLI::RuntimeError, which main() turns into the exit code).
[[noreturn]] void fail(const Error& error);
[[noreturn]] void fail_usage(const std::string& message);

// A check for a whole-number option: "--gpus: must be a whole number of at least 1, not 0". CLI11's
// PositiveNumber and Range print "Value 0 not in range 0.000000 to 1797693134862315708145...".
CLI::Validator at_least(long long min);

// Node names from host lists ("dgx[001-016,020]"); a bad list ends the command (exit 2) naming it.
std::vector<std::string> expand_nodes_or_fail(const std::vector<std::string>& exprs);
// Writes `text` to `path` with mode 0600 from its creation (a secret: a key, a token); fails the command
// when it cannot.
void write_private_file(const std::string& path, const std::string& text);

// "8", "64K", "1M", "1.5G", "2GiB", "512kb": binary multiples (K = 1024), as nccl-tests reads them.
Result<double> parse_byte_size(std::string_view text);
// "1 GiB", "64 KiB", "1000 B".
std::string format_bytes(double bytes);
// "2.91 ms", "840 us", "1.20 s".
std::string format_seconds(double seconds);

}  // namespace railyard::cli
