// JobSpec <-> JSON. The schema, with defaults and an example, is in jobs/README.md ("Job spec JSON").
//
// Reading is strict so typos surface at submit time, not as a silently ignored field: unknown fields
// (with a "did you mean" suggestion), wrong types, duplicate keys and out-of-range integers are errors that
// name the field. Every problem is reported at once, joined with "; ". Reading checks shape and syntax only;
// jobs/validate.hpp checks meaning (sizes, limits, the cluster). The exception is "container", checked
// whole as it is read (jobs/container.hpp), since agents read it with parse_job_spec and run what it says.
// No exception leaves these functions.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string_view>

#include "common/json_text.hpp"
#include "common/result.hpp"
#include "jobs/spec.hpp"

namespace railyard::jobs {

using railyard::kMaxJsonDepth;                        // nesting levels; the spec itself needs 3
inline constexpr size_t kMaxListEntries = 10'000;     // per list: command, env, features, afterok, after
inline constexpr size_t kMaxSpecTextBytes = 1 << 20;  // parse_job_spec_text input

// Reads a spec from a parsed JSON object. Normalizes: gpu_type upper-cased ("any" becomes ""), mig
// lower-cased, "dependency" split into afterok and after, afterok entries of "after" moved to afterok
// (duplicates dropped), gpus defaults to 1 when mig is given, the container's image and mounts as
// jobs/container.hpp reads them.
Result<JobSpec> parse_job_spec(const nlohmann::json& j);

// Parses JSON text (at most kMaxSpecTextBytes, kMaxJsonDepth levels, no duplicate keys), then as above.
Result<JobSpec> parse_job_spec_text(std::string_view text);

// The strict JSON reader every submit path uses (a single spec, a batch's body): at most `max_bytes` and
// `max_depth` levels, and no object may repeat a key; the error names where the repeat is
// (`jobs[3]: duplicate key "gpus" ...`). `what` names the text in size and depth errors ("job spec").
Result<nlohmann::json> parse_json_text(std::string_view text, size_t max_bytes, int max_depth,
                                       std::string_view what);

// Every field, defaults included; time_limit in seconds; target and container only when set. parse_job_spec reads it back
// to an equal spec.
nlohmann::json to_json(const JobSpec& spec);

// The top-level field names parse_job_spec accepts.
std::span<const std::string_view> job_spec_fields();

using railyard::json_text_depth;  // common/json_text.hpp

}  // namespace railyard::jobs
