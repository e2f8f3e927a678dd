// #SBATCH import: turns a Slurm batch script into a JobSpec so users can bring their scripts unchanged.
// The directive mapping table is in jobs/README.md ("#SBATCH import").
//
// Like sbatch, directives are read from "#SBATCH" lines (at the start of the line) before the first command;
// blank lines and comments may come between them. The whole script becomes the command
// (["/bin/bash", "-c", script]), run once on the job's first node with launcher "none".
// Anything Railyard does not do the same way is a warning naming the line, never silence; a malformed value
// is an error naming the line. All errors are reported at once, joined with "; ".
// The spec still needs `user` (and usually `name`) from the caller, then jobs/validate.hpp.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "jobs/spec.hpp"

namespace railyard::jobs {

inline constexpr size_t kMaxScriptBytes = 256 * 1024;

struct SbatchImport {
  JobSpec spec;
  std::vector<std::string> warnings;  // "line 7: #SBATCH --mail-type=END ignored: not supported"
};

Result<SbatchImport> parse_sbatch_script(std::string_view script);

}  // namespace railyard::jobs
