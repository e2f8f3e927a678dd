// Internals of the `railyard topo` command group, shared by topo_cmd.cpp (generate, convert) and
// topo_report.cpp (show, cost, table).
#pragma once

#include <string>

#include "topology/cluster.hpp"

namespace CLI {
class App;
}

namespace railyard::cli {

// Loads a cluster file in either format or fails the command (exit 2 for bad content, 3 when missing).
topology::Cluster load_or_fail(const std::string& path, const std::string& default_profile);
// Builds a preset SuperPOD or fails the command.
topology::Cluster superpod_or_fail(const std::string& preset, int sus);

void add_show_command(CLI::App& topo);
void add_cost_command(CLI::App& topo);
void add_table_command(CLI::App& topo);

}  // namespace railyard::cli
