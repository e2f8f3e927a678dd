// Shared by `railyard squeue` and `railyard scancel` (slurm_queue.cpp): Slurm-style option parsing with a
// warning for each option Railyard does not do, Slurm's job state names, and selecting jobs the way both
// commands filter them (-u, -j, -t, -n, -p, -A, -q, --me).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/api.hpp"

namespace railyard::cli {

struct SlurmFlag {
  std::string_view long_name;
  char short_name;  // 0: none
  bool takes_value;
  std::string_view ignored_because;  // non-empty: accepted, and ignored with this warning
};

struct SlurmArgs {
  std::map<std::string, std::vector<std::string>, std::less<>> values;  // by long name; "" for a flag
  std::vector<std::string> positional;
  bool has(std::string_view name) const { return values.find(name) != values.end(); }
  // Every value given for `name`, comma lists split: -u a,b -u c → a, b, c.
  std::vector<std::string> list(std::string_view name) const;
};

// Parses like getopt_long: --name=value, --name value, -x value, -xvalue, flags. An option not in `flags`
// is a warning naming it ("railyard: squeue: --start ignored: ...") and takes no value; a missing value
// fails with exit 2.
SlurmArgs parse_slurm_args(std::string_view command, const std::vector<std::string>& args,
                           std::span<const SlurmFlag> flags);

// Slurm's long and short state names for a Railyard state: RUNNING → RUNNING/R, HELD → PENDING/PD,
// STARTING → CONFIGURING/CF.
std::string slurm_state(const std::string& railyard_state);
std::string slurm_state_code(const std::string& railyard_state);

// Railyard states for squeue/scancel -t (short or long, any case, comma-separated; "all"). A state Railyard
// has no equivalent for matches nothing, with a warning.
std::vector<std::string> railyard_states(std::string_view command, const std::vector<std::string>& slurm);

// The jobs the filters select: explicit ids (-j or positional: 12, or 12_3 for task 3 of array 12) or,
// without ids, every job in the states (default: pending, held, starting, running); then -u/--me, -n, -p
// (a feature), -A (project), -q. Sorted by id.
std::vector<nlohmann::json> select_jobs(std::string_view command, Api& api, const SlurmArgs& a,
                                        const std::vector<std::string>& ids);

}  // namespace railyard::cli
