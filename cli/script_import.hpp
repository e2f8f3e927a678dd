// A Slurm batch script as a job spec for the scheduler's API: shared by `railyard submit SCRIPT`
// (job_submit.cpp) and `railyard sbatch` (slurm_sbatch.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "jobs/sbatch.hpp"

namespace railyard::cli {

// What a file given to `submit` is, decided by its content (not its name): a JSON job spec (first
// non-blank byte '{'), a batch script (jobs::why_not_a_batch_script), or neither, with why.
struct FileKind {
  enum class Kind { kJson, kScript, kNeither } kind = Kind::kNeither;
  std::string why_not;  // for kNeither
};
FileKind classify_job_file(const std::string& text, const std::string& path);

struct ScriptJob {
  nlohmann::json spec;                  // without "user": the token's
  jobs::SbatchImport::Effects effects;  // --hold, --wait, --parsable, --test-only, --quiet
};

// Imports `text` with sbatch's command-line options `command_line` (they override the script's directives)
// and prints each warning on stderr as "railyard: LABEL: ..." unless --quiet is among them. The name
// defaults to `name` (the script file's), the working folder to the current one; `name` and `script_args`
// become the script's $0 and $1... Fails the command (exit 2) on an error in the script or the options.
ScriptJob script_job(const std::string& label, const std::string& name, const std::string& text,
                     const std::vector<std::string>& command_line,
                     const std::vector<std::string>& script_args);

// The file's bytes; fails the command (exit 3) when it cannot be read.
std::string read_file_or_fail(const std::string& path);

}  // namespace railyard::cli
