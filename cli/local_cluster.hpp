// Pieces of the local cluster (`railyard up` / `down`, local_cluster.cpp) that other commands use too.
#pragma once

#include <string>
#include <vector>

namespace railyard::cli {

// $XDG_STATE_HOME/railyard, else $HOME/.local/state/railyard, else ./railyard-state.
std::string default_state_dir();

// Where Railyard's programs are looked for, in order: $RAILYARD_BIN_DIR, the folder of this executable and
// its build-tree siblings (../scheduler, ../agent), then each folder of $PATH.
std::vector<std::string> program_search_dirs();
// The first executable `name` in program_search_dirs(), or "".
std::string find_program(const std::string& name);
// The dashboard's built files for the scheduler's --web-root: $RAILYARD_WEB_ROOT, an installed
// <prefix>/share/railyard/web, or web/dist of the source tree this build came from; "" when none is built.
std::string find_web_root();

// Process bookkeeping of `up`/`down` in a pid file of lines "PID<TAB>ROLE<TAB>CMDLINE".
namespace local {
// Starts argv in the background (own session, output appended to `log`) and records it at once.
int start_process(const std::string& pid_file, const std::string& role, const std::vector<std::string>& argv,
                  const std::string& log);
// Stops every recorded process whose /proc/PID/cmdline still matches (agents first, then the scheduler;
// SIGTERM, SIGKILL after grace_s), removes the pid file, and returns how many were signalled.
int stop_recorded(const std::string& pid_file, double grace_s, bool verbose);
bool any_recorded_alive(const std::string& pid_file);
// True while a child started by this process runs (reaps it once it has exited).
bool alive(int pid);
}  // namespace local

}  // namespace railyard::cli
