// Slurm-style host lists: "dgx[001-004,010],login1" <-> {"dgx001", ..., "dgx010", "login1"}.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace railyard {

inline constexpr size_t kMaxHostNameLength = 255;

// Expands a host list expression. Ranges keep the zero padding of their lower bound. Every bound is
// checked before a name is made, so the result is at most `limit` names of at most kMaxHostNameLength.
// Errors: unbalanced brackets, reversed ranges, non-numeric bounds or bounds over 18 digits, a name longer
// than kMaxHostNameLength, more than `limit` names.
Result<std::vector<std::string>> expand_hostlist(std::string_view expr, size_t limit = 1'000'000);

// Compresses names into the shortest expression that expands back to the same list in the same order
// (runs of consecutive numbers with equal width and prefix become ranges).
std::string compress_hostlist(const std::vector<std::string>& names);

}  // namespace railyard
