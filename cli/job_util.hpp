// Helpers shared by the job and node commands (job_cmds.cpp, job_submit.cpp, job_streams.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/api.hpp"

namespace railyard::cli {

// "12" → 12; anything else fails the command with exit 2.
long parse_job_id(const std::string& text);
// COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL (a FAILED/NODE_FAIL/PREEMPTED job with
// spec.requeue set is not final: it comes back as PENDING).
bool job_is_final(const nlohmann::json& job);
// The exit code `submit --wait` ends with: the job's exit code, 1 for a failure without one, 0 when done.
int job_exit_status(const nlohmann::json& job);
// Every job matching the query (pages through next_after).
std::vector<nlohmann::json> list_jobs(Api& api, const std::string& query);
// Sleeps `seconds` (polling loops).
void sleep_for_seconds(double seconds);

// Job commands: submit (job_submit.cpp); queue, show, cancel, hold, release, history (job_cmds.cpp);
// logs, watch (job_streams.cpp).
void add_submit_command(CLI::App& app);
void add_job_read_commands(CLI::App& app);
void add_stream_commands(CLI::App& app);

}  // namespace railyard::cli
