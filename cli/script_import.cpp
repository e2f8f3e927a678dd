#include "cli/script_import.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/cli_util.hpp"
#include "jobs/spec_json.hpp"

namespace railyard::cli {

namespace fs = std::filesystem;

std::string read_file_or_fail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(not_found("cannot read " + path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

FileKind classify_job_file(const std::string& text, const std::string& path) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return {FileKind::Kind::kJson, ""};
  std::string why = jobs::why_not_a_batch_script(text);
  if (why.empty()) return {FileKind::Kind::kScript, ""};
  // Names that only ever hold batch scripts keep being read as ones (their warnings say what is missing).
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".sh" || ext == ".sbatch" || ext == ".slurm" || ext == ".sub")
    return {FileKind::Kind::kScript, ""};
  return {FileKind::Kind::kNeither, std::move(why)};
}

ScriptJob script_job(const std::string& label, const std::string& name, const std::string& text,
                     const std::vector<std::string>& command_line,
                     const std::vector<std::string>& script_args) {
  auto imported = jobs::parse_sbatch_script(text, command_line);
  if (!imported) fail(invalid(label + ": " + imported.error().message));
  if (!imported->effects.quiet)
    for (const auto& w : imported->warnings) std::cerr << "railyard: " << label << ": " << w << "\n";
  jobs::JobSpec& spec = imported->spec;
  if (spec.name.empty()) spec.name = name;
  spec.command.push_back(name);  // $0, as bash -c takes it
  spec.command.insert(spec.command.end(), script_args.begin(), script_args.end());
  nlohmann::json j = jobs::to_json(spec);
  j.erase("user");  // the token's user
  if (j.value("workdir", "").empty()) j["workdir"] = fs::current_path().string();
  return {std::move(j), imported->effects};
}

}  // namespace railyard::cli
