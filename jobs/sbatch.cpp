// Script scanning, directive tokenizing and precedence; what each option means is in sbatch_directives.cpp.
#include "jobs/sbatch.hpp"

#include <algorithm>
#include <cctype>

#include "jobs/parse_util.hpp"
#include "jobs/sbatch_internal.hpp"

namespace railyard::jobs {
namespace sbatch_detail {

std::string where(int line) { return line > 0 ? "line " + std::to_string(line) : "command line"; }

void ImportState::error(const Option& o, const std::string& msg) {
  errors.push_back(where(o.line) + ": " + o.spelled + ": " + msg);
}
void ImportState::warn(const Option& o, const std::string& msg) {
  out.warnings.push_back(where(o.line) + ": " + o.spelled + ": " + msg);
}
void ImportState::warn_line(int line, const std::string& msg) { out.warnings.push_back(where(line) + ": " + msg); }

namespace {
bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::optional<Arity> arity_of(const Option& o) {
  const Directive* d = find_directive(o.name, o.is_short);
  return d ? std::optional<Arity>(d->arity) : std::nullopt;
}
}  // namespace

std::optional<std::vector<std::string>> split_words(std::string_view s) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    if (i >= s.size() || s[i] == '#') break;
    std::string word;
    char quote = 0;
    for (; i < s.size() && (quote || !is_space(s[i])); ++i) {
      char c = s[i];
      if (quote && c == quote)
        quote = 0;
      else if (!quote && (c == '"' || c == '\''))
        quote = c;
      else if (c == '\\' && quote != '\'' && i + 1 < s.size())
        word += s[++i];
      else
        word += c;
    }
    if (quote) return std::nullopt;
    words.push_back(std::move(word));
  }
  return words;
}

Option take_option(const std::vector<std::string>& words, size_t& i, int line) {
  Option o;
  o.line = line;
  const std::string& w = words[i++];
  o.is_short = !w.starts_with("--");
  std::string_view body = std::string_view(w).substr(o.is_short ? 1 : 2);
  if (o.is_short) {
    o.name = std::string(body.substr(0, 1));
    if (body.size() > 1) o.value = std::string(body.substr(1));
  } else {
    size_t eq = body.find('=');
    o.name = std::string(body.substr(0, eq));
    if (eq != std::string_view::npos) o.value = std::string(body.substr(eq + 1));
  }
  o.spelled = w;
  if (o.value) return o;
  auto arity = arity_of(o);
  bool next_is_value = i < words.size() && !words[i].starts_with("-");
  if ((arity == Arity::kRequired && i < words.size()) || (!arity && next_is_value)) {
    o.value = words[i++];
    o.spelled += " " + *o.value;
  }
  return o;
}

}  // namespace sbatch_detail

namespace {

using sbatch_detail::Arity;
using sbatch_detail::ImportState;
using sbatch_detail::Option;
using sbatch_detail::split_words;

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

bool is_directive(std::string_view line) {
  return line.starts_with("#SBATCH") && (line.size() == 7 || is_space(line[7]));
}

// Applies the options in `words`; an option the command line overrides is skipped (sbatch's precedence).
void apply_words(const std::vector<std::string>& words, int line_no, ImportState& st) {
  size_t i = 0;
  while (i < words.size()) {
    const std::string& w = words[i];
    if (w.size() < 2 || w[0] != '-' || w == "--") {
      st.warn_line(line_no, "#SBATCH argument " + in_quotes(w) + " ignored: not an option");
      ++i;
      continue;
    }
    Option o = sbatch_detail::take_option(words, i, line_no);
    const sbatch_detail::Directive* d = sbatch_detail::find_directive(o.name, o.is_short);
    if (d && d->arity == Arity::kRequired && !o.value) {
      st.error(o, "needs a value");
      continue;
    }
    if (d && line_no > 0 &&
        std::find(st.overridden.begin(), st.overridden.end(), d->long_name) != st.overridden.end())
      continue;
    sbatch_detail::apply_option(o, st);
  }
}

void parse_directive(std::string_view line, int line_no, ImportState& st) {
  auto words = split_words(line.substr(7));
  if (!words) {
    st.errors.push_back("line " + std::to_string(line_no) + ": unterminated quote in #SBATCH line");
    return;
  }
  if (words->empty()) st.warn_line(line_no, "#SBATCH without an option ignored");
  apply_words(*words, line_no, st);
}

// The long names of the options the command line gives, so that the script's are skipped.
void note_overrides(const std::vector<std::string>& words, ImportState& st) {
  for (size_t i = 0; i < words.size();) {
    if (!words[i].starts_with("-")) {
      ++i;
      continue;
    }
    Option o = sbatch_detail::take_option(words, i, 0);
    if (const auto* d = sbatch_detail::find_directive(o.name, o.is_short))
      st.overridden.emplace_back(d->long_name);
  }
}

// Slurm runs the script once on the first node; these lines assume more than Railyard gives them.
void scan_command_line(std::string_view line, int line_no, ImportState& st,
                       std::vector<std::string>& warned) {
  std::string_view t = trim(line);
  if (t.empty() || t[0] == '#') return;
  auto once = [&](const std::string& key, const std::string& msg) {
    if (std::find(warned.begin(), warned.end(), key) != warned.end()) return;
    warned.push_back(key);
    st.warn_line(line_no, msg);
  };
  auto words = split_words(t).value_or(std::vector<std::string>{});
  for (const std::string& w : words) {
    std::string_view prog =
        std::string_view(w).substr(w.rfind('/') == std::string::npos ? 0 : w.rfind('/') + 1);
    if (prog == "srun" || prog == "mpirun" || prog == "mpiexec")
      once(std::string(prog),
           std::string(prog) + ": Railyard runs this script once, on the job's first node; " +
               std::string(prog) + " lines are yours to make work there (or submit a JSON " +
               "spec with launcher \"env\" or \"mpi\")");
  }
  if (t.find("SLURM_") != std::string_view::npos)
    once("SLURM_",
         "SLURM_* variables: Railyard does not set them (it sets RANK, WORLD_SIZE, MASTER_ADDR, ...)");
}

void check_shebang(std::string_view first_line, ImportState& st) {
  if (!first_line.starts_with("#!")) return;
  auto words = split_words(first_line.substr(2)).value_or(std::vector<std::string>{});
  size_t k = !words.empty() && words[0].ends_with("/env") ? 1 : 0;
  if (k >= words.size()) return;
  std::string_view prog = words[k];
  prog = prog.substr(prog.rfind('/') == std::string_view::npos ? 0 : prog.rfind('/') + 1);
  if (prog != "bash" && prog != "sh")
    st.warn_line(1, "interpreter " + in_quotes(prog) + ": Railyard runs the script with /bin/bash");
}

std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < s.size()) {
    size_t nl = std::min(s.find('\n', start), s.size());
    std::string_view line = s.substr(start, nl - start);
    if (line.ends_with('\r')) line.remove_suffix(1);
    lines.push_back(line);
    start = nl + 1;
  }
  return lines;
}

void scan_script(std::string_view script, ImportState& st) {
  std::vector<std::string_view> lines = split_lines(script);
  if (!lines.empty()) check_shebang(lines[0], st);
  bool in_header = true;  // until the first command, as sbatch reads directives
  std::vector<std::string> warned;
  for (size_t i = 0; i < lines.size(); ++i) {
    const int line_no = static_cast<int>(i + 1);
    std::string_view line = lines[i], t = trim(lines[i]);
    if (is_directive(line)) {
      if (in_header)
        parse_directive(line, line_no, st);
      else
        st.warn_line(line_no,
                     "#SBATCH after the first command ignored (sbatch stops reading directives there)");
    } else if (in_header && !t.empty() && t[0] != '#') {
      in_header = false;
    } else if (in_header && is_directive(t)) {
      st.warn_line(line_no, "indented #SBATCH ignored (sbatch reads directives only at the start of a line)");
    }
    if (!in_header) scan_command_line(line, line_no, st, warned);
  }
}

}  // namespace

Result<SbatchImport> parse_sbatch_script(std::string_view script, std::span<const std::string> command_line) {
  if (script.size() > kMaxScriptBytes)
    return invalid("script: " + std::to_string(script.size()) + " bytes; at most " +
                   std::to_string(kMaxScriptBytes) + " allowed");
  if (script.find('\0') != std::string_view::npos)
    return invalid("script: contains a NUL byte (a binary file?)");
  if (!is_valid_utf8(script)) return invalid("script: not valid UTF-8");
  ImportState st;
  const std::vector<std::string> cli(command_line.begin(), command_line.end());
  note_overrides(cli, st);
  scan_script(script, st);
  apply_words(cli, 0, st);  // last: the command line wins where both give an option
  if (!st.errors.empty()) return invalid(join(st.errors, "; "));
  sbatch_detail::finish_import(script, st);
  if (!st.errors.empty()) return invalid(join(st.errors, "; "));
  return std::move(st.out);
}

}  // namespace railyard::jobs
