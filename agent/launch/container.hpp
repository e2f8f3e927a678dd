// Running a job's processes in its OCI image (issue 45) through an engine the node already has: podman first
// (Debian 12's 4.3), behind ContainerRuntime so enroot or apptainer can be added where a site runs them.
//
// The agent never runs job code through the engine as anyone but the job's user: the engine's client runs as
// root (rootful podman) with a clean environment of its own, and the container's process as the job's uid and
// gids (--user, --group-add), with no capabilities and no_new_privs. What the job sees:
//   network, IPC and PID namespaces of the host (NCCL, InfiniBand, MASTER_ADDR, /dev/shm and Open MPI's
//     shared memory work as for host jobs, and a signal reaches the rank as on the host, as under enroot);
//   the image's root file system, read-only unless writable (podman's tmpfs on /tmp, /run, /var/tmp);
//   the allocation directory and the job's mounts at their paths, each source checked readable by the user;
//   its GPUs only: CDI devices (nvidia.com/gpu=N) where the node has a CDI spec for them, else the device
//     nodes /dev/nvidiaN of its GPUs, the control devices and the driver's libraries mounted read-only;
//   its environment from an env file the agent writes (root's, 0600): the values never reach a command line
//     or the engine's own environment (a job's CONTAINERS_CONF must not configure root's podman).
// Its processes live in a child group of the allocation's cgroup (--cgroup-parent): the allocation's memory,
// CPU, pids and device limits hold for them. Containers carry the labels railyard.alloc/node/job/rank, so
// an agent removes an allocation's containers when it ends and reaps those of allocations it no longer has.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/launch/process.hpp"
#include "common/result.hpp"
#include "jobs/spec.hpp"

namespace railyard::agent {

struct ContainerOptions {
  std::string engine = "podman";  // the engine's command (PATH lookup)
  // podman --runtime: "" = podman's configured one, and runc when that one cannot start a container here.
  std::string oci_runtime;
  std::filesystem::path state_dir;       // the agent's: env files and the probe's empty root file system
  std::filesystem::path dev = "/dev";    // where /dev/nvidia* are looked for
  std::vector<std::filesystem::path> cdi_dirs = {"/etc/cdi", "/var/run/cdi"};
  // Directories searched for the NVIDIA driver's user-space libraries (mounted when there is no CDI spec).
  std::vector<std::filesystem::path> driver_lib_dirs = {"/usr/lib/x86_64-linux-gnu", "/usr/lib64"};
  // KEY=VALUE added to the engine client's environment, as the operator configures it (HTTPS_PROXY,
  // CONTAINERS_REGISTRIES_CONF): never anything of a job's.
  std::vector<std::string> engine_env;
  // How long a blocking engine command (the start-up probe, listing containers) may take before it is
  // killed and taken as a failure.
  std::chrono::milliseconds command_timeout{60'000};
};

// One process of a job, in a container.
struct ContainerProcess {
  std::string image;
  std::vector<std::string> command;
  std::string env_file;  // written by the caller (write_env_file)
  std::optional<Credentials> user;  // nullopt: the agent's own user (a non-root agent)
  std::string workdir;              // inside; "" = the image's
  std::vector<jobs::Mount> mounts;  // sources already checked (checked_mounts)
  bool writable = false;
  std::string cgroup_parent;        // a path inside each hierarchy ("/railyard/12-12.1-n1"); "" = the engine's
  std::vector<int> gpus;            // the node's local GPU indices given to the job
  std::string name;                 // a container name unique on the node
  std::map<std::string, std::string> labels;
};

// An image as the engine's cache lists it (railyard node images).
struct CachedImage {
  std::string id;
  std::vector<std::string> names;
  long long size_bytes = 0;
  long long created_unix = 0;
};

class ContainerRuntime {
 public:
  virtual ~ContainerRuntime() = default;
  // "podman 4.3.1 (runc)": for the agent's start-up line and its register.
  virtual std::string describe() const = 0;
  // The command that runs `p` in the foreground: its stdout, stderr and exit code are the container's, and
  // a SIGTERM sent to it reaches the container's process.
  virtual std::vector<std::string> run_argv(const ContainerProcess& p) const = 0;
  // Commands the agent runs as child processes it polls, so none of them holds its event loop.
  virtual std::vector<std::string> exists_argv(const std::string& image) const = 0;  // exit 0: cached
  virtual std::vector<std::string> pull_argv(const std::string& image) const = 0;    // prints the image id last
  // Stops (SIGKILL) and removes every container that has all these labels.
  virtual std::vector<std::string> remove_argv(const std::map<std::string, std::string>& labels) const = 0;
  // The environment the engine's client runs with (never the job's).
  virtual std::vector<std::string> engine_env() const = 0;
  // The cache's listing, and its output read.
  virtual std::vector<std::string> images_argv() const = 0;
  virtual Result<std::vector<CachedImage>> parse_images(const std::string& output) const = 0;

  // Blocking; for the agent's start (a second at most).
  // Label `key`'s value of every container (running or not) whose label `filter_key` is `filter_value`.
  virtual Result<std::vector<std::string>> container_labels(const std::string& filter_key,
                                                            const std::string& filter_value,
                                                            const std::string& key) const = 0;
};

// Finds a working engine: the command exists, and starting a container with it reaches the exec of the
// container's process (checked with an empty root file system and a command that does not exist, so no
// image is needed). The error says why not, for the agent's start-up line.
Result<std::unique_ptr<ContainerRuntime>> detect_container_runtime(const ContainerOptions& options);
// Podman as configured, without the probe (tests of the command lines).
std::unique_ptr<ContainerRuntime> make_podman(const ContainerOptions& options, std::string runtime,
                                              std::string version);

// The text of a podman env file for `env` (KEY=VALUE entries): one line each. A name that is not
// [A-Za-z_][A-Za-z0-9_]* or a value with a newline cannot be written as a line the engine reads back
// exactly, and is refused with its name.
Result<std::string> env_file_text(const std::vector<std::string>& env);

// The device nodes a container with the node's GPUs `gpus` gets (no CDI): /dev/nvidia<N> of those GPUs that
// exist under `dev`, then nvidiactl, nvidia-uvm, nvidia-uvm-tools and nvidia-modeset where present.
std::vector<std::string> gpu_device_nodes(const std::filesystem::path& dev, const std::vector<int>& gpus);

// Each mount's source made canonical (links resolved) by a process running as `user`, which must be able
// to read it (and, for a directory, enter it): a job cannot mount what its user could not read on the node.
// The message names the first source refused. nullopt user: the agent's own. A check that takes longer than
// `limit` (a path on a hung file server) is killed and refuses the mount.
Result<std::vector<jobs::Mount>> checked_mounts(const std::vector<jobs::Mount>& mounts,
                                                const std::optional<Credentials>& user,
                                                std::chrono::milliseconds limit = std::chrono::seconds(10));

// Where an image job's processes start: the container's workdir, else the job's workdir when one of its
// mounts makes it visible in the container, else /tmp (the container's own scratch). Never a path of the
// node that the image may not have: an mpi job's ranks on every node start there (mpirun's --wdir).
std::string container_workdir(const jobs::JobSpec& spec);

// The label naming the agent's state directory of the node a container belongs to: what an agent removes
// and reaps is its own, even where several agents (or several local clusters) share one machine's engine.
inline constexpr const char* kNodeDirLabel = "railyard.node-dir";

// "railyard-<alloc>-<node>-<what>-<hash of node_dir>", with every character podman does not take in a name
// as '_': unique on the machine for one process of one allocation of one agent's node.
std::string container_name(const std::string& alloc, const std::string& node, const std::string& what,
                           const std::string& node_dir);

// A registry reference is what the engine caches under its name; an archive ("docker-archive:PATH",
// "oci-archive:PATH") is loaded from a file on the node, which the job's user must be able to read.
// (jobs::archive_path() names the file.)
bool is_archive_image(const std::string& image);

}  // namespace railyard::agent
