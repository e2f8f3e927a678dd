// The mpi launcher end to end: a real 2-node x 2-rank mpirun whose orted launches go through
// railyard-agent-exec (each emulated node with its own vader directory).
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "agent/launch/proc.hpp"
#include "agent/tests/launch_harness.hpp"

namespace railyard::agent {
namespace {

using namespace std::chrono_literals;

class MpiLaunch : public testing::LaunchFixture {
 protected:
  LaunchRequest mpi_request(const std::string& alloc, std::vector<std::string> command) const {
    LaunchRequest req;
    req.job_id = 5;
    req.alloc_id = alloc;
    req.spec.launcher = jobs::Launcher::kMpi;
    req.spec.command = std::move(command);
    req.nodes = {{"node0", {0, 1}}, {"node1", {2, 3}}};
    return req;
  }
};

// Living `sleep <word>` processes (orted gives each rank its own process group, so MPI ranks are not in
// mpirun's group).
int sleeps_of(const std::string& word) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto cmdline = read_proc_file(std::stoi(name), "cmdline");  // nullopt once it exited
    auto st = read_proc_stat(std::stoi(name));
    n += cmdline && st && st->state != 'Z' && *cmdline == std::string("sleep") + '\0' + word + '\0';
  }
  return n;
}

TEST_F(MpiLaunch, TwoNodesTwoRanksAllreduce) {
  auto l = launcher();
  auto started = l.launch(mpi_request("mpi", {RAILYARD_MPI_ALLREDUCE}));
  ASSERT_TRUE(started) << started.error().message;
  EXPECT_EQ(testing::read_file(dir_.path() / "jobs" / "5" / "mpi" / "hostfile"),
            "node0 slots=2\nnode1 slots=2\n");
  auto sup = supervisor();
  sup.add(started->record);
  auto o = testing::run_until_finished(sup, 60s);
  ASSERT_TRUE(o.finished);
  const std::string out = testing::read_file(log("mpi", 0));
  EXPECT_EQ(o.finished->state, AllocState::kCompleted) << out << testing::read_file(log("mpi", 0, "err"));
  std::istringstream lines(out);
  int sums = 0, on_node0 = 0, on_node1 = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" sum 6 ") != std::string::npos) ++sums;
    on_node0 +=
        line.find(" on node0 ") != std::string::npos && line.find("/vader/node0") != std::string::npos;
    on_node1 +=
        line.find(" on node1 ") != std::string::npos && line.find("/vader/node1") != std::string::npos;
  }
  EXPECT_EQ(sums, 4) << out;
  EXPECT_EQ(on_node0, 2) << out;
  EXPECT_EQ(on_node1, 2) << out;
}

// Cancel reaches ranks outside mpirun's process group: SIGTERM makes mpirun tear its job down.
TEST_F(MpiLaunch, CancelStopsEveryRank) {
  const std::string marker = "31." + std::to_string(getpid());  // a sleep only this run of the test starts
  auto l = launcher();
  auto started = l.launch(mpi_request("mpi-cancel", {"sleep", marker}));
  ASSERT_TRUE(started) << started.error().message;
  auto sup = supervisor();
  sup.add(started->record);
  for (int i = 0; i < 300 && sleeps_of(marker) < 4; ++i) std::this_thread::sleep_for(20ms);
  ASSERT_EQ(sleeps_of(marker), 4);
  ASSERT_TRUE(sup.cancel("mpi-cancel"));
  auto o = testing::run_until_finished(sup, 30s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kCancelled);
  for (int i = 0; i < 100 && sleeps_of(marker) > 0; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(sleeps_of(marker), 0);
}

}  // namespace
}  // namespace railyard::agent
