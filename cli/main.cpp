// The `railyard` command. Each command group registers itself (commands.hpp); this file only wires them
// and turns errors into exit codes: 0 success, 2 bad input or usage, 3 not found, 1 internal.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Railyard: a topology-aware GPU cluster scheduler", "railyard"};
  app.require_subcommand(1);
  railyard::cli::add_topo_commands(app);
  railyard::cli::add_sim_commands(app);
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
