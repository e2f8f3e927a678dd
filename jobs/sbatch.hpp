// #SBATCH import: turns a Slurm batch script into a JobSpec so users can bring their scripts unchanged.
// The option table (every sbatch option, with its mapping or its warning) is in jobs/README.md
// ("#SBATCH import").
//
// Like sbatch, directives are read from "#SBATCH" lines (at the start of the line) before the first command;
// blank lines and comments may come between them. Options given on sbatch's command line override the
// script's directive of the same option; the rest of the script still counts. The whole script becomes the
// command (["/bin/bash", "-c", script]; callers append $0 and the script's arguments), run once on the
// job's first node with launcher "none". A script that asks for no GPU count takes whole nodes (all their
// GPUs), as an --exclusive job does on a GPU cluster; the scheduler fills in the count from the nodes
// (jobs/validate.hpp, resolve_whole_nodes).
// Anything Railyard does not do the same way is a warning naming the line, never silence; a malformed value
// is an error naming the line. All errors are reported at once, joined with "; ".
// The spec still needs `user` (and usually `name`) from the caller, then jobs/validate.hpp.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
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
  // Options that act on the submitting command rather than the job (from the script or the command line).
  struct Effects {
    bool hold = false;       // -H, --hold: submit held
    bool wait = false;       // -W, --wait: wait for the job's end, exit with its code
    bool parsable = false;   // --parsable: print the id alone
    bool test_only = false;  // --test-only: check, submit nothing
    bool quiet = false;      // -Q, --quiet: no warnings
  } effects;
};

// `command_line`: sbatch options given on the command line, as words (["-N", "2", "--exclusive"]); their
// messages say "command line" instead of a line number.
Result<SbatchImport> parse_sbatch_script(std::string_view script, std::span<const std::string> command_line = {});

// `sbatch [options] [script [args...]]` split as sbatch does: options (with their values) up to the first
// word that is not one, then the script's path and its arguments. `--wrap=CMD` stands for a script
// ("#!/bin/sh\nCMD"); then every word after the options is an error. Errors: an option without its value,
// a heterogeneous job (":"), a script and --wrap both.
struct SbatchInvocation {
  std::vector<std::string> options;      // for parse_sbatch_script's command_line
  std::optional<std::string> script;     // its path; none: read standard input (or --wrap)
  std::optional<std::string> wrap;       // --wrap's command
  std::vector<std::string> script_args;  // $1, $2, ...
};
Result<SbatchInvocation> split_sbatch_args(std::span<const std::string> args);

// Whether a file's text is a batch script, by content: a "#!" first line and at least one #SBATCH
// directive before the first command. "" when it is one, else why not ("no #! line", ...).
std::string why_not_a_batch_script(std::string_view text);

// Every sbatch(1) option Railyard knows of, for documentation and tests: "--nodes, -N".
struct SbatchOptionDoc {
  std::string_view long_name;
  char short_name;
  bool mapped;                       // false: ignored with a warning
  std::string_view ignored_because;  // when not mapped
};
std::vector<SbatchOptionDoc> sbatch_option_docs();

}  // namespace railyard::jobs
