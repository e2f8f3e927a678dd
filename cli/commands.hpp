// Command groups of the `railyard` executable. Each group lives in its own file and registers its
// subcommands on the app; main.cpp only calls the add_*_commands functions.
//
// Contract for commands: print results on stdout, messages on stderr prefixed "railyard: ", and report a
// failure by calling fail() (cli_util.hpp), which ends the command with the exit code of the error kind.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace railyard::cli {

// railyard topo generate|show|cost|convert|table (topo_cmd.cpp, topo_report.cpp).
void add_topo_commands(CLI::App& app);
// railyard sim (sim_cmd.cpp).
void add_sim_commands(CLI::App& app);
// railyard submit, queue, show, cancel, hold, release, history, logs, watch: job_util.hpp (job_*.cpp).
// railyard nodes, drain, resume, node remove, token create (node_cmds.cpp).
void add_node_commands(CLI::App& app);
void add_image_commands(CLI::App& app);       // image prefetch
void add_node_images_command(CLI::App& node);  // node images (under `node`)
// railyard quota list|set|lift, fairshare (quota_cmds.cpp).
void add_quota_commands(CLI::App& app);
// railyard sbatch, squeue, scancel: Slurm's commands and options (slurm_sbatch.cpp, slurm_queue.cpp).
void add_slurm_commands(CLI::App& app);
// railyard up, down (up_cmd.cpp, local_cluster.cpp).
void add_local_cluster_commands(CLI::App& app);
// `railyard topo show --url URL`: the live cluster with occupancy (topo_live.cpp).
void show_live_topology(const std::string& url, bool json);

}  // namespace railyard::cli
