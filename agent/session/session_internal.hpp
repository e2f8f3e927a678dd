// What a Session keeps per node and per allocation; shared by session.cpp and session_orders.cpp only.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/discovery/inventory.hpp"
#include "agent/launch/launcher.hpp"
#include "agent/launch/supervisor.hpp"
#include "agent/session/session.hpp"
#include "agent/streams/metrics.hpp"
#include "agent/streams/tailer.hpp"

namespace railyard::agent {

struct Session::Alloc {
  long long job = 0;
  std::string user;
  std::vector<int> gpus;             // this node's GPUs of the allocation
  std::vector<pid_t> pgids;          // for telemetry
  std::optional<FileTailer> tailer;  // rank 0's stdout, where rank 0 runs here
  std::optional<MllogTracker> tracker;
  nlohmann::json events = nlohmann::json::array();
  int malformed_sent = 0;
  Clock::time_point next_metrics{};
  Clock::time_point next_telemetry{};
  int signal = 0;
  std::string message;  // why it ended: the first failing rank, or the kill order
  int execs = 0;
  // An image job's launch order (its image resolved to the cached reference): exec orders run in the same
  // image. Unset for host jobs, and for image jobs adopted after a restart (their exec orders are refused).
  std::optional<LaunchRequest> image;
  bool containers = false;  // has (or had) containers on this node: removed when it ends
  bool engine_interrupted = false;  // an engine client was killed: its container outlived it
};

// An engine command the agent waits for without blocking (a pull, a removal): output collected from a pipe.
struct Session::EngineTask {
  pid_t pid = 0;
  Fd out;  // stdout and stderr together, non-blocking
  std::string output;
  std::function<void(int, const std::string&)> done;  // exit status (-1: killed), the output
  std::function<void(const std::string&)> progress;    // the output so far, when more came; may be empty
};

// One image being brought into this node's cache, and the orders waiting for it.
struct Session::ImagePull {
  std::vector<std::pair<std::string, nlohmann::json>> waiting;  // (alloc, launch or exec order), in arrival order
  Clock::time_point started{};
  Clock::time_point next_progress{};  // when the waiting launches are next told how far it is
  int layers = 0;                     // layers the engine has started copying
};

struct Session::Node {
  std::string name;
  std::filesystem::path dir;  // <state>/nodes/<name>
  Inventory inventory;
  std::shared_ptr<AllocStore> allocs_store;  // <dir>/allocs.journal, shared by launcher and supervisor
  std::unique_ptr<Launcher> launcher;
  std::unique_ptr<Supervisor> supervisor;
  std::unique_ptr<HealthChecker> health;
  std::map<std::string, Alloc> allocs;
};

}  // namespace railyard::agent
