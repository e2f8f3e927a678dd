// railyard-agent-exec <host> <command...>: the rsh agent mpirun uses instead of ssh
// (`--mca plm_rsh_agent railyard-agent-exec`). mpirun calls it once per remote host with orted's command.
//
// Today every emulated node lives on this machine, so the helper runs the command here, as ssh would run
// it on the remote host (the words joined by spaces, through /bin/sh -c), with the host's settings:
//   OMPI_MCA_btl_vader_backing_directory=<state>/vader/<host>  (one shared-memory dir per emulated node;
//                                                               without it ranks crash in the vader BTL)
//   RAILYARD_NODE=<host>, CUDA_VISIBLE_DEVICES from RAILYARD_ALLOC_GPUS ("node0:0,1;node1:2,3")
// <state> comes from RAILYARD_AGENT_STATE_DIR, which the launcher sets in mpirun's environment.
// Later it will hand the command to <host>'s agent over the scheduler protocol, and that agent will start
// orted under its own supervision (process group, logs, cgroup), as Kubernetes' MPI Operator does.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

// "node0:0,1;node1:2,3" -> "0,1" for node0; nullopt-like "" with found=false when the host is absent.
bool gpus_of(const std::string& placement, const std::string& host, std::string& gpus) {
  size_t pos = 0;
  while (pos <= placement.size()) {
    const size_t end = std::min(placement.find(';', pos), placement.size());
    const std::string item = placement.substr(pos, end - pos);
    const size_t colon = item.find(':');
    if (colon != std::string::npos && item.substr(0, colon) == host) {
      gpus = item.substr(colon + 1);
      return true;
    }
    pos = end + 1;
  }
  return false;
}

bool safe_host(const std::string& host) {
  return !host.empty() && host.find('/') == std::string::npos && host != "." && host != "..";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: railyard-agent-exec <host> <command...>\n");
    return 2;
  }
  const std::string host = argv[1];
  if (!safe_host(host)) {
    std::fprintf(stderr, "railyard-agent-exec: bad host name '%s'\n", host.c_str());
    return 2;
  }
  const char* state = std::getenv("RAILYARD_AGENT_STATE_DIR");
  const std::filesystem::path base = state != nullptr ? state : "/tmp/railyard-agent";
  const std::filesystem::path vader = base / "vader" / host;
  std::error_code ec;
  std::filesystem::create_directories(vader, ec);
  if (ec) {
    std::fprintf(stderr, "railyard-agent-exec: cannot create %s: %s\n", vader.c_str(), ec.message().c_str());
    return 1;
  }
  setenv("OMPI_MCA_btl_vader_backing_directory", vader.c_str(), 1);
  setenv("RAILYARD_NODE", host.c_str(), 1);
  std::string gpus;
  if (const char* placement = std::getenv("RAILYARD_ALLOC_GPUS"); placement && gpus_of(placement, host, gpus))
    setenv("CUDA_VISIBLE_DEVICES", gpus.c_str(), 1);
  std::string command;
  for (int i = 2; i < argc; ++i) command += (i > 2 ? " " : "") + std::string(argv[i]);
  execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
  std::perror("railyard-agent-exec: /bin/sh");
  return 127;
}
