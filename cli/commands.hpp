// Command groups of the `railyard` executable. Each group lives in its own file and registers its
// subcommands on the app; main.cpp only calls the add_*_commands functions.
//
// Contract for commands: print results on stdout, messages on stderr prefixed "railyard: ", and report a
// failure by calling fail() (cli_util.hpp), which ends the command with the exit code of the error kind.
#pragma once

namespace CLI {
class App;
}

namespace railyard::cli {

// railyard topo generate|show|cost|convert|table (topo_cmd.cpp, topo_report.cpp).
void add_topo_commands(CLI::App& app);
// railyard sim (sim_cmd.cpp).
void add_sim_commands(CLI::App& app);

}  // namespace railyard::cli
