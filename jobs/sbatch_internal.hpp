// Internals of the #SBATCH importer shared by sbatch.cpp (script scanning, tokens) and
// sbatch_directives.cpp (what each directive means). Not for use outside jobs/.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/sbatch.hpp"

namespace railyard::jobs::sbatch_detail {

// One option of a directive line, as written.
struct Option {
  std::string name;                  // without dashes: "nodes", "N"
  bool is_short = false;             // "-N" rather than "--nodes"
  std::optional<std::string> value;  // "=2", " 2" or "-N2"; nullopt when none was given
  std::string spelled;               // "--nodes=2", "-N 2": what messages quote
  int line = 0;
};

struct ImportState {
  SbatchImport out;
  std::vector<std::string> errors;
  bool saw_time = false;
  int gpu_type_line = 0;  // where spec.gpu_type came from, for conflicts

  void error(const Option& o, const std::string& msg);
  void warn(const Option& o, const std::string& msg);
  void warn_line(int line, const std::string& msg);
};

enum class Arity {
  kNone,        // --requeue
  kRequired,    // --nodes=2, --nodes 2, -N 2, -N2
  kEqualsOnly,  // --exclusive or --exclusive=user: a value only after "="
};

// Arity of a directive Railyard knows; nullopt for an unknown one.
std::optional<Arity> option_arity(std::string_view name, bool is_short);

// Applies one option to the import; unknown options become a warning.
void apply_option(const Option& option, ImportState& st);

// After every directive: Slurm's defaults (one node), the command, and warnings for what is missing.
void finish_import(std::string_view script, ImportState& st);

}  // namespace railyard::jobs::sbatch_detail
