// sbatch's own command line (`sbatch [options] [script [args...]]`) and telling a batch script by content.
#include <algorithm>

#include "jobs/parse_util.hpp"
#include "jobs/sbatch.hpp"
#include "jobs/sbatch_internal.hpp"

namespace railyard::jobs {
namespace {

using sbatch_detail::Arity;
using sbatch_detail::find_directive;

bool is_option(const std::string& w) { return w.size() >= 2 && w[0] == '-' && w != "--"; }

// How many words the option at args[i] uses (1 or 2); 0 when its value is missing.
size_t option_words(std::span<const std::string> args, size_t i) {
  const std::string& w = args[i];
  const bool is_short = !w.starts_with("--");
  const std::string name = is_short ? w.substr(1, 1) : w.substr(2, w.find('=') - 2);
  const bool inline_value = is_short ? w.size() > 2 : w.find('=') != std::string::npos;
  const auto* d = find_directive(name, is_short);
  // An option sbatch does not have takes no value here: guessing would swallow the script's name.
  if (!d || d->arity != Arity::kRequired || inline_value) return 1;
  return i + 1 < args.size() ? 2 : 0;
}

}  // namespace

Result<SbatchInvocation> split_sbatch_args(std::span<const std::string> args) {
  SbatchInvocation inv;
  size_t i = 0;
  while (i < args.size() && is_option(args[i])) {
    const size_t used = option_words(args, i);
    if (used == 0) return invalid(args[i] + ": needs a value");
    const std::string& w = args[i];
    if (w == "--wrap" || w.starts_with("--wrap=")) {
      inv.wrap = used == 2 ? args[i + 1] : w.substr(7);
    } else {
      inv.options.insert(inv.options.end(), args.begin() + static_cast<long>(i),
                         args.begin() + static_cast<long>(i + used));
    }
    i += used;
  }
  if (i < args.size() && args[i] == "--") ++i;  // the end of the options, as getopt reads it
  if (i < args.size() && args[i] == ":")
    return invalid(
        "\":\": heterogeneous jobs (several components) are not supported; submit each on its own");
  if (inv.wrap && i < args.size())
    return invalid("--wrap and a script " + in_quotes(args[i]) + ": give one or the other");
  if (i < args.size()) inv.script = args[i++];
  inv.script_args.assign(args.begin() + static_cast<long>(i), args.end());
  return inv;
}

std::string why_not_a_batch_script(std::string_view text) {
  if (!text.starts_with("#!")) return "its first line is not a \"#!\" line";
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = std::min(text.find('\n', start), text.size());
    const std::string_view line = text.substr(start, nl - start);
    start = nl + 1;
    if (line.starts_with("#SBATCH") && (line.size() == 7 || line[7] == ' ' || line[7] == '\t')) return "";
    const std::string_view t = trim(line);
    if (!t.empty() && t[0] != '#') break;  // sbatch stops reading directives at the first command
  }
  return "it has no #SBATCH line before its first command";
}

}  // namespace railyard::jobs
