// Parsers of the MLPerf log formats before v0.7, shared by mllog.cpp (which finds the token on a line) and
// mllog_legacy.cpp (which reads what follows it). Not part of the public API.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "jobs/mllog.hpp"

namespace railyard::jobs::detail {

inline constexpr std::string_view kV05Token = ":::MLP";   // followed by the version, "v0.5.0"
inline constexpr std::string_view kV06Token = ":::MLL";   // followed by a space
inline constexpr std::string_view kV07Token = ":::MLLOG";

// "1558666200.971" or "1541720285.254530191" (digits, an optional '.' and digits: Python's float() of the
// rulesets' [\d.]+) as milliseconds, rounded to the nearest; nullopt for anything else or out of range.
std::optional<std::int64_t> seconds_to_ms(std::string_view text);

// The event type a pre-v0.7 key implies: "_start" -> INTERVAL_START, "_stop" -> INTERVAL_END.
MllogEventType implied_type(std::string_view key);

// `rest` is what follows ":::MLP" / ":::MLL" on the line, trailing CR/LF removed.
Result<MllogEvent> parse_v05(std::string_view rest);
Result<MllogEvent> parse_v06(std::string_view rest);

}  // namespace railyard::jobs::detail
