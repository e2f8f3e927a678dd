// Internals of the #SBATCH importer shared by sbatch.cpp (script scanning, tokens), sbatch_directives.cpp
// (what each mapped option means), sbatch_container.cpp (pyxis' --container-* options), sbatch_options.cpp
// (every sbatch option: arity, mapping or why it is ignored) and sbatch_cmdline.cpp (sbatch's own command
// line). Not for use outside jobs/.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/sbatch.hpp"

namespace railyard::jobs::sbatch_detail {

// One option of a directive line or of the command line, as written.
struct Option {
  std::string name;                  // without dashes: "nodes", "N"
  bool is_short = false;             // "-N" rather than "--nodes"
  std::optional<std::string> value;  // "=2", " 2" or "-N2"; nullopt when none was given
  std::string spelled;               // "--nodes=2", "-N 2": what messages quote
  int line = 0;                      // 0: the command line
};

// "line 7" or "command line": where an option was written, for messages.
std::string where(int line);

struct ImportState {
  SbatchImport out;
  std::vector<std::string> errors;
  bool saw_time = false;
  int gpu_type_line = -1;                  // where spec.gpu_type came from, for conflicts; -1: nowhere
  std::vector<std::string> overridden;     // long names the command line gives: the script's are skipped

  void error(const Option& o, const std::string& msg);
  void warn(const Option& o, const std::string& msg);
  void warn_line(int line, const std::string& msg);
};

enum class Arity {
  kNone,        // --requeue
  kRequired,    // --nodes=2, --nodes 2, -N 2, -N2
  kEqualsOnly,  // --exclusive or --exclusive=user: a value only after "="
};

using Handler = void (*)(const Option&, ImportState&);

// One sbatch(1) option. `apply` null: Railyard has no equivalent and the option is ignored with a warning
// that gives `ignored_because`.
struct Directive {
  std::string_view long_name;
  char short_name;  // 0 when none
  Arity arity;
  Handler apply;
  std::string_view ignored_because;
};

// The option named `name` ("nodes" or "N"); nullptr when sbatch has none such.
const Directive* find_directive(std::string_view name, bool is_short);

// Handlers of the mapped options (sbatch_directives.cpp).
void on_nodes(const Option& o, ImportState& st);
void on_ntasks(const Option& o, ImportState& st);
void on_gpus_per_node(const Option& o, ImportState& st);
void on_gpus(const Option& o, ImportState& st);
void on_gres(const Option& o, ImportState& st);
void on_time(const Option& o, ImportState& st);
void on_job_name(const Option& o, ImportState& st);
void on_partition(const Option& o, ImportState& st);
void on_constraint(const Option& o, ImportState& st);
void on_qos(const Option& o, ImportState& st);
void on_dependency(const Option& o, ImportState& st);
void on_array(const Option& o, ImportState& st);
void on_account(const Option& o, ImportState& st);
void on_chdir(const Option& o, ImportState& st);
void on_exclusive(const Option& o, ImportState& st);
void on_requeue(const Option& o, ImportState& st);
void on_no_requeue(const Option& o, ImportState& st);
void on_mem(const Option& o, ImportState& st);
void on_nice(const Option& o, ImportState& st);
void on_priority(const Option& o, ImportState& st);
void on_spread_job(const Option& o, ImportState& st);
void on_honoured(const Option& o, ImportState& st);
// pyxis' container options (sbatch_container.cpp).
void on_container_image(const Option& o, ImportState& st);
void on_container_mounts(const Option& o, ImportState& st);
void on_container_workdir(const Option& o, ImportState& st);
void on_container_name(const Option& o, ImportState& st);
void on_container_writable(const Option& o, ImportState& st);
void on_container_readonly(const Option& o, ImportState& st);
// After every directive: container options without an image, two mounts at one target, too many mounts.
void finish_container(ImportState& st);
// Options for the submitting command (SbatchImport::Effects).
void on_hold(const Option& o, ImportState& st);
void on_wait(const Option& o, ImportState& st);
void on_parsable(const Option& o, ImportState& st);
void on_test_only(const Option& o, ImportState& st);
void on_quiet(const Option& o, ImportState& st);
void on_command_line_only(const Option& o, ImportState& st);

// Applies one option to the import; unknown options become a warning.
void apply_option(const Option& option, ImportState& st);

// After every directive: the container's checks (finish_container), Slurm's defaults (one node), whole
// nodes when no GPU count was asked for, the command, and warnings for what is missing.
void finish_import(std::string_view script, ImportState& st);

// Shell-like words: whitespace separates, quotes group, a backslash escapes outside single quotes, an
// unquoted word starting with '#' begins a comment. nullopt on an unterminated quote.
std::optional<std::vector<std::string>> split_words(std::string_view s);

// Builds the option starting at words[i]; advances i past the words it used.
Option take_option(const std::vector<std::string>& words, size_t& i, int line);

}  // namespace railyard::jobs::sbatch_detail
