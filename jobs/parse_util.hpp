// Small text helpers shared by the JSON reader and the #SBATCH importer: numbers, "did you mean",
// Slurm dependency lists, quoting user values in error messages.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "jobs/spec.hpp"

namespace railyard::jobs {

// Digits only (no sign, no spaces), fitting in int64; nullopt otherwise.
std::optional<int64_t> parse_digits(std::string_view s);

// Levenshtein distance, ASCII case-insensitive.
size_t edit_distance(std::string_view a, std::string_view b);

// " (did you mean \"gpus\"?)" when one candidate is within 2 edits (and closer than the word's length),
// else "". Ties go to the earlier candidate.
std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates);

// A user value for an error message: in double quotes, control characters escaped, cut after 64 bytes.
std::string in_quotes(std::string_view s);

std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
bool iequals(std::string_view a, std::string_view b);
std::string_view trim(std::string_view s);
std::string join(std::span<const std::string> parts, std::string_view sep);

// True when the bytes are well-formed UTF-8 (no overlongs, no surrogates).
bool is_valid_utf8(std::string_view s);

// Slurm's dependency syntax: comma-separated items, all of which must hold, each TYPE:JOB[:JOB...] where
// TYPE is afterok, afterany, afternotok or aftercorr and JOB is a job id or ARRAY_INDEX (one task of an
// array; not with aftercorr): "afterok:12:13", "afterany:40,afterok:12_3", "aftercorr:50".
// afterok on whole jobs goes to `afterok`, the rest to `after`; duplicates are dropped.
// Errors: other types ("after", "singleton", ...), "?" (any of), "+MINUTES", ids that are not positive
// integers, task indexes above kMaxArrayIndex, an empty list, more than kMaxDependencies different ones.
inline constexpr size_t kMaxDependencies = 10'000;  // in one dependency text (as kMaxListEntries per list)
struct Dependencies {
  std::vector<JobId> afterok;
  std::vector<Dependency> after;
};
Result<Dependencies> parse_dependency(std::string_view s);
// One dependency on one job or task, as Dependency::text() writes it ("afterany:40", "afterok:12_3"); also
// "afterok:12". The JSON "after" list holds these.
Result<Dependency> parse_one_dependency(std::string_view s);

}  // namespace railyard::jobs
