// Fuzz entry points: one function per input format Railyard reads from the outside. Each must accept any
// bytes without crashing, leaking or tripping a sanitizer; errors come back as values. The libFuzzer mains
// (fuzz_main.cpp, one executable per target) and the regression test (regress_test.cpp, which replays the
// saved inputs under fuzz/regressions/<target>/ in the normal test build) call the same functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace railyard::fuzz {

using Target = void (*)(std::string_view input);

void job_spec(std::string_view input);       // JSON job spec (API body, `railyard submit JOB.json`)
void sbatch(std::string_view input);         // #SBATCH script
void mllog(std::string_view input);          // worker stdout: MLLOG lines, one per line
void topology_json(std::string_view input);  // Railyard cluster JSON
void topology_conf(std::string_view input);  // Slurm topology.conf
void nvsmi(std::string_view input);          // `nvidia-smi topo -m` output
void hostlist(std::string_view input);       // dgx[001-004,010]
void http_request(std::string_view input);   // an HTTP request -> api::Router (http_target.cpp)
void agent_message(std::string_view input);  // agent protocol frames, both ends (agent_target.cpp)

struct NamedTarget {
  const char* name;
  Target fn;
};
inline constexpr NamedTarget kTargets[] = {
    {"job_spec", job_spec},
    {"sbatch", sbatch},
    {"mllog", mllog},
    {"topology_json", topology_json},
    {"topology_conf", topology_conf},
    {"nvsmi", nvsmi},
    {"hostlist", hostlist},
    {"http_request", http_request},
    {"agent_message", agent_message},
};

}  // namespace railyard::fuzz
