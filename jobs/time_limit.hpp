// Time limits as users write them. Inside Railyard a limit is whole seconds; 0 means "no limit".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace railyard::jobs {

// Ten years: anything longer is a typo, and the cap keeps every sum far from overflow.
inline constexpr int64_t kMaxTimeLimitS = 3650LL * 86400;

// Slurm's --time forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, and UNLIMITED / INFINITE (0).
// The leading field is unbounded ("90:00" is 90 minutes); later minutes and seconds are < 60, and hours
// after "D-" are < 24. Errors say which forms exist.
Result<int64_t> parse_slurm_time(std::string_view s);

// The JSON string forms: the colon forms of parse_slurm_time ("HH:MM:SS", "MM:SS", "D-HH:MM:SS", ...),
// "unlimited", and unit forms "45s", "90m", "2h", "1d", "1h30m". A bare number string ("90") is refused:
// seconds or minutes? (A JSON number means seconds.)
Result<int64_t> parse_time_limit(std::string_view s);

// "HH:MM:SS", or "D-HH:MM:SS" from one day on; 0 -> "unlimited". Accepted back by both parsers.
std::string format_time_limit(int64_t seconds);

}  // namespace railyard::jobs
