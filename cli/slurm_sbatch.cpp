// `railyard sbatch [sbatch options] [SCRIPT [args...]]`: Slurm's submit command with its option names and
// precedence (jobs/sbatch.hpp), answering as sbatch does so that tools that parse it keep working.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <iterator>

#include "cli/cli_util.hpp"
#include "cli/job_util.hpp"
#include "cli/script_import.hpp"
#include "jobs/spec_json.hpp"

namespace railyard::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

struct Script {
  std::string label, name, text;
};

// The script sbatch would run: --wrap's command, the file named, or standard input.
Script read_script(const jobs::SbatchInvocation& inv) {
  if (inv.wrap) return {"--wrap", "wrap", "#!/bin/sh\n" + *inv.wrap + "\n"};
  if (!inv.script) {
    std::string text(std::istreambuf_iterator<char>(std::cin), {});
    return {"standard input", "sbatch", std::move(text)};
  }
  const std::string& path = *inv.script;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) fail(not_found("sbatch: " + path + ": no such file"));
  Script s{path, fs::path(path).filename().string(), read_file_or_fail(path)};
  // sbatch itself refuses a script without an interpreter line; the directives may be on the command line.
  if (!s.text.starts_with("#!"))
    fail_usage("sbatch: " + path +
               ": not a batch script: its first line must be \"#!\" and an interpreter, "
               "e.g. #!/bin/bash");
  return s;
}

// Waits for the job's end (sbatch --wait) and ends with its exit code.
void wait_for(Api& api, long id) {
  for (;;) {
    const Json job = api.get("/jobs/" + std::to_string(id));
    if (job_is_final(job)) {
      const int code = job_exit_status(job);
      if (code != 0) throw CLI::RuntimeError(code);
      return;
    }
    sleep_for_seconds(1.0);
  }
}

void run_sbatch(const std::vector<std::string>& args) {
  auto inv = jobs::split_sbatch_args(args);
  if (!inv) fail_usage("sbatch: " + inv.error().message);
  const Script script = read_script(*inv);
  ScriptJob job = script_job(script.label, script.name, script.text, inv->options, inv->script_args);
  if (auto parsed = jobs::parse_job_spec(job.spec); !parsed) fail(invalid(parsed.error().message));
  if (job.effects.test_only) {
    std::cerr << "railyard: sbatch: --test-only: the script and its options are valid; nothing was submitted"
              << std::endl;
    return;
  }
  Api api(ServerOptions{});
  const long id = api.post("/jobs", job.spec).value("id", 0L);
  // The API takes no held submit: the hold follows at once, and loses to a job that started first.
  if (job.effects.hold)
    if (auto held = api.call("POST", "/jobs/" + std::to_string(id) + "/hold"); !held)
      std::cerr << "railyard: sbatch: --hold: job " << id << " was not held: " << held.error().message
                << std::endl;
  if (job.effects.parsable)
    std::cout << id << std::endl;
  else
    std::cout << "Submitted batch job " << id << std::endl;
  if (job.effects.wait) wait_for(api, id);
}

}  // namespace

void add_sbatch_command(CLI::App& app);

void add_squeue_scancel_commands(CLI::App& app);  // slurm_queue.cpp

void add_slurm_commands(CLI::App& app) {
  add_sbatch_command(app);
  add_squeue_scancel_commands(app);
}

void add_sbatch_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "sbatch", "Submit a Slurm batch script with sbatch's options; prints \"Submitted batch job N\"");
  // Every argument is sbatch's: the options, the script, its arguments; CLI11 only answers --help.
  cmd->prefix_command();
  cmd->allow_extras();
  cmd->footer(R"(Usage: railyard sbatch [sbatch options] [SCRIPT [ARGS...]]   (no SCRIPT: read standard input)

sbatch's options and precedence: options on the command line override the script's #SBATCH directive of
the same option; the rest of the script still counts. A script that asks for no GPUs takes whole nodes.
What Railyard cannot do the same way is a warning on stderr naming the option and the line (the table of
every option: jobs/README.md). The scheduler is found as for every command (RAILYARD_URL, RAILYARD_TOKEN,
~/.config/railyard/config).

Examples:
  railyard sbatch -N 2 --ntasks-per-node=8 run.sub
  railyard sbatch --parsable -G 8 -t 2:00:00 train.sh --epochs 3
  railyard sbatch --wrap "nvidia-smi -L" -G 1
  railyard sbatch --wait job.sh && echo ok

Exit codes: 0 submitted (with --wait: the job's exit code), 1 failure or scheduler unreachable,
2 bad options or script, 3 no such script or not allowed.)");
  cmd->callback([cmd] { run_sbatch(cmd->remaining()); });
}

}  // namespace railyard::cli
