// Every sbatch(1) option (Slurm 23.x/24.x man page): its arity, and either its mapping (a handler in
// sbatch_directives.cpp) or why Railyard ignores it. Ignoring is always a warning naming the option and the
// line. jobs/README.md's import table lists the same; sbatch_test checks that it names every option here.
#include <array>

#include "jobs/sbatch_internal.hpp"

namespace railyard::jobs::sbatch_detail {
namespace {

constexpr Arity R = Arity::kRequired;
constexpr Arity N = Arity::kNone;
constexpr Arity E = Arity::kEqualsOnly;

constexpr std::string_view kCpus = "CPUs are not scheduled: a job gets its GPUs' share of each node's CPUs";
constexpr std::string_view kTasks = "the script's own srun/mpirun lays out its tasks";
constexpr std::string_view kNodeList = "placement chooses the nodes (drain a node to keep jobs off it)";
constexpr std::string_view kLogs = "Railyard keeps per-rank logs (railyard logs JOB)";
constexpr std::string_view kNoSuch = "Railyard has no such feature";

constexpr std::array kDirectives = std::to_array<Directive>({
    // Mapped onto the JobSpec.
    {"account", 'A', R, on_account, ""},
    {"array", 'a', R, on_array, ""},
    {"chdir", 'D', R, on_chdir, ""},
    {"constraint", 'C', R, on_constraint, ""},
    {"dependency", 'd', R, on_dependency, ""},
    {"exclusive", 0, E, on_exclusive, ""},
    {"gpus", 'G', R, on_gpus, ""},
    {"gpus-per-node", 0, R, on_gpus_per_node, ""},
    {"gres", 0, R, on_gres, ""},
    {"job-name", 'J', R, on_job_name, ""},
    {"mem", 0, R, on_mem, ""},
    {"nice", 0, E, on_nice, ""},
    {"nodes", 'N', R, on_nodes, ""},
    {"no-requeue", 0, N, on_no_requeue, ""},
    {"ntasks", 'n', R, on_ntasks, ""},
    {"ntasks-per-node", 0, R, on_ntasks, ""},
    {"partition", 'p', R, on_partition, ""},
    {"priority", 0, R, on_priority, ""},
    {"qos", 'q', R, on_qos, ""},
    {"requeue", 0, N, on_requeue, ""},
    {"spread-job", 0, N, on_spread_job, ""},
    {"time", 't', R, on_time, ""},
    {"wait-all-nodes", 0, R, on_honoured, ""},
    // pyxis' (the SPANK plugin most GPU clusters run containers with).
    {"container-image", 0, R, on_container_image, ""},
    {"container-mounts", 0, R, on_container_mounts, ""},
    {"container-workdir", 0, R, on_container_workdir, ""},
    {"container-name", 0, R, on_container_name, ""},
    {"container-writable", 0, N, on_container_writable, ""},
    {"container-readonly", 0, N, on_container_readonly, ""},
    {"no-container-mount-home", 0, N, on_honoured, ""},
    {"no-container-remap-root", 0, N, on_honoured, ""},
    // For the submitting command.
    {"hold", 'H', N, on_hold, ""},
    {"wait", 'W', N, on_wait, ""},
    {"parsable", 0, N, on_parsable, ""},
    {"test-only", 0, N, on_test_only, ""},
    {"quiet", 'Q', N, on_quiet, ""},
    {"wrap", 0, R, on_command_line_only, ""},
    {"help", 'h', N, on_command_line_only, ""},
    {"usage", 0, N, on_command_line_only, ""},
    {"version", 'V', N, on_command_line_only, ""},
    {"verbose", 'v', N, on_command_line_only, ""},
    // Ignored, with the reason.
    {"acctg-freq", 0, R, nullptr, "no accounting sampling"},
    {"batch", 0, R, nullptr, kCpus},
    {"bb", 0, R, nullptr, "no burst buffers"},
    {"bbf", 0, R, nullptr, "no burst buffers"},
    {"begin", 'b', R, nullptr, "no deferred start: the job may start at once"},
    {"cluster-constraint", 0, R, nullptr, "one cluster"},
    {"clusters", 'M', R, nullptr, "one cluster"},
    {"comment", 0, R, nullptr, "jobs carry no comment"},
    {"container", 0, R, nullptr, "no OCI bundles: give the image with --container-image (pyxis')"},
    {"container-id", 0, R, nullptr, "no OCI bundles: give the image with --container-image (pyxis')"},
    {"container-mount-home", 0, N, nullptr,
     "the home directory is not mounted: list it in --container-mounts"},
    {"container-remap-root", 0, N, nullptr, "a container's processes run as the job's user, never as root"},
    {"container-save", 0, R, nullptr, "containers are not saved as images"},
    {"contiguous", 0, N, nullptr, "placement already keeps a job's nodes close in the topology"},
    {"core-spec", 'S', R, nullptr, kCpus},
    {"cores-per-socket", 0, R, nullptr, kCpus},
    {"cpu-freq", 0, R, nullptr, kCpus},
    {"cpus-per-gpu", 0, R, nullptr, kCpus},
    {"cpus-per-task", 'c', R, nullptr, kCpus},
    {"deadline", 0, R, nullptr, "no deadlines"},
    {"delay-boot", 0, R, nullptr, "nodes are not rebooted for jobs"},
    {"distribution", 'm', R, nullptr, kTasks},
    {"exclude", 'x', R, nullptr, kNodeList},
    {"export", 0, R, nullptr,
     "the job gets the agent's environment and Railyard's variables, not the caller's"},
    {"export-file", 0, R, nullptr, "the job gets the agent's environment and Railyard's variables"},
    {"error", 'e', R, nullptr, kLogs},
    {"extra", 0, R, nullptr, kNoSuch},
    {"extra-node-info", 'B', R, nullptr, kCpus},
    {"get-user-env", 0, E, nullptr, "the job gets the agent's environment and Railyard's variables"},
    {"gid", 0, R, nullptr, "a job runs as the user who submits it"},
    {"gpu-bind", 0, R, nullptr, kTasks},
    {"gpu-freq", 0, R, nullptr, "GPU clocks are not set per job"},
    {"gpus-per-socket", 0, R, nullptr, kTasks},
    {"gpus-per-task", 0, R, nullptr, kTasks},
    {"gres-flags", 0, R, nullptr, kTasks},
    {"hint", 0, R, nullptr, kCpus},
    {"ignore-pbs", 0, N, nullptr, "PBS directives are never read"},
    {"input", 'i', R, nullptr, "standard input is /dev/null"},
    {"kill-on-invalid-dep", 0, R, nullptr,
     "a dependency that can never be met leaves the job pending with its reason"},
    {"licenses", 'L', R, nullptr, "no licenses"},
    {"mail-type", 0, R, nullptr, "Railyard sends no mail (railyard watch follows a job)"},
    {"mail-user", 0, R, nullptr, "Railyard sends no mail (railyard watch follows a job)"},
    {"mcs-label", 0, R, nullptr, kNoSuch},
    {"mem-bind", 0, R, nullptr, kCpus},
    {"mem-per-cpu", 0, R, nullptr, "memory is per node: use --mem"},
    {"mem-per-gpu", 0, R, nullptr, "memory is per node: use --mem"},
    {"mincpus", 0, R, nullptr, kCpus},
    {"network", 0, R, nullptr, kNoSuch},
    {"no-kill", 'k', E, nullptr, "a node failure ends the job (add --requeue to run it again)"},
    {"nodefile", 'F', R, nullptr, kNodeList},
    {"nodelist", 'w', R, nullptr, kNodeList},
    {"ntasks-per-core", 0, R, nullptr, kCpus},
    {"ntasks-per-gpu", 0, R, nullptr, kTasks},
    {"ntasks-per-socket", 0, R, nullptr, kCpus},
    {"open-mode", 0, R, nullptr, kLogs},
    {"output", 'o', R, nullptr, kLogs},
    {"overcommit", 'O', N, nullptr, "GPUs are never shared"},
    {"oversubscribe", 's', N, nullptr, "GPUs are never shared"},
    {"power", 0, R, nullptr, kNoSuch},
    {"prefer", 0, R, nullptr, "no soft constraints: use --constraint"},
    {"profile", 0, R, nullptr, "no profiling plugins (the dashboard shows GPU telemetry)"},
    {"propagate", 0, E, nullptr, "resource limits are the node's"},
    {"reboot", 0, N, nullptr, "nodes are not rebooted for jobs"},
    {"reservation", 0, R, nullptr, "no reservations"},
    {"signal", 0, R, nullptr, "no early signal: at its time limit a job gets SIGTERM, then SIGKILL"},
    {"sockets-per-node", 0, R, nullptr, kCpus},
    {"switches", 0, R, nullptr, "placement already minimises the switches a job spans"},
    {"thread-spec", 0, R, nullptr, kCpus},
    {"threads-per-core", 0, R, nullptr, kCpus},
    {"time-min", 0, R, nullptr, "the whole --time is reserved"},
    {"tmp", 0, R, nullptr, "no local disk requests"},
    {"tres-bind", 0, R, nullptr, kTasks},
    {"tres-per-task", 0, R, nullptr, kTasks},
    {"uid", 0, R, nullptr, "a job runs as the user who submits it"},
    {"use-min-nodes", 0, N, nullptr, "node counts are exact"},
    {"wckey", 0, R, nullptr, kNoSuch},
});

}  // namespace

const Directive* find_directive(std::string_view name, bool is_short) {
  for (const Directive& d : kDirectives) {
    if (is_short ? (name.size() == 1 && d.short_name == name[0]) : d.long_name == name) return &d;
  }
  return nullptr;
}

}  // namespace railyard::jobs::sbatch_detail

namespace railyard::jobs {

std::vector<SbatchOptionDoc> sbatch_option_docs() {
  std::vector<SbatchOptionDoc> out;
  for (const auto& d : sbatch_detail::kDirectives)
    out.push_back({d.long_name, d.short_name, d.apply != nullptr, d.ignored_because});
  return out;
}

}  // namespace railyard::jobs
