// The `railyard` command. Each command group registers itself (commands.hpp); this file only wires them
// and turns errors into exit codes: 0 success, 1 failure (internal, I/O, scheduler unreachable),
// 2 bad input or usage, 3 not found or not allowed.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/job_util.hpp"

namespace {

// The command groups, in the order `railyard --help` lists them.
constexpr void (*kCommandGroups[])(CLI::App&) = {
    railyard::cli::add_submit_command,         railyard::cli::add_job_read_commands,
    railyard::cli::add_stream_commands,        railyard::cli::add_node_commands,
    railyard::cli::add_quota_commands,         railyard::cli::add_local_cluster_commands,
    railyard::cli::add_topo_commands,          railyard::cli::add_sim_commands,
    railyard::cli::add_slurm_commands,
};

// Registers only the groups a call needs: those up to the one holding the command that the first argument
// names, none for --version: building every command's options is a large part of a short call's CPU,
// and scripts run one `railyard submit` per job. CLI11 hands every argument after the command's name
// to that command, so the groups left out take no part in parsing it. Any other call (--help, no command,
// a name no group has) registers them all, so help and error messages list every command.
void add_commands(CLI::App& app, const std::string& first) {
  if (first == "--version") return;
  const auto names_first = [&first](const CLI::App* sub) { return sub->check_name(first); };
  for (const auto add : kCommandGroups) {
    add(app);
    if (!first.empty() && first[0] != '-' && !app.get_subcommands(names_first).empty()) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Railyard: a topology-aware GPU cluster scheduler", "railyard"};
  app.require_subcommand(1);
  app.footer(R"(Server commands find the scheduler by --url/--token, else RAILYARD_URL/RAILYARD_TOKEN, else
~/.config/railyard/config (lines `url = ...`, `token = ...`; $XDG_CONFIG_HOME is respected), else
http://127.0.0.1:8600. `railyard up` starts a local cluster and writes that file.

Exit codes: 0 ok; 1 failure (scheduler unreachable, job failed, internal error); 2 usage or bad input;
3 not found or not allowed. `submit --wait` exits with the job's own exit code.

Examples:
  railyard up --nodes 4 --profile dgx-h100
  railyard submit --gpus 8 --launcher env -- railyard-train --target-accuracy 0.95
  railyard queue; railyard logs 1 -f; railyard show 1; railyard down
Run `railyard COMMAND --help` for each command's options and examples.)");
  app.set_version_flag("--version", "railyard " PROJECT_VERSION);
  add_commands(app, argc > 1 ? argv[1] : "");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // RuntimeError carries a command's own exit code (the command printed its message); the rest are
    // usage errors (CLI11 prints them) or --help (exit 0).
    int code = app.exit(e);
    return code == 0 || e.get_name() == "RuntimeError" ? code : railyard::cli::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "railyard: internal error: " << e.what() << std::endl;
    return railyard::cli::kExitInternal;
  }
  return railyard::cli::kExitOk;
}
