// Isolation on the node with real processes and the real kernel: each allocation's cgroup enforces its
// memory limit (a job past it is OOM-killed and ends OUT_OF_MEMORY, one under it completes), the limit is in
// force while the job runs and the group is gone afterwards; the allocation directory is the job user's
// alone; a job running as its user cannot signal the agent. Tests that need a writable cgroup hierarchy
// skip, naming why, where there is none (not root, read-only /sys/fs/cgroup).
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/launch/cgroup.hpp"
#include "agent/tests/launch_harness.hpp"

namespace railyard::agent {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testing::read_file;

class Isolation : public testing::LaunchFixture {
 protected:
  // Skips unless a group with a memory limit can be made here (detected and tried, then removed).
  void need_cgroups() {
    auto d = detect_cgroup_driver(CgroupSetup{});
    if (!d) GTEST_SKIP() << "no usable cgroup hierarchy: " << d.error().message;
    ResourceLimits limits;
    limits.memory_bytes = 64LL << 20;
    auto probe = (*d)->create("probe-" + std::to_string(getpid()), limits, GpuAccess{});
    if (!probe)
      GTEST_SKIP() << "cannot create a cgroup with (" << (*d)->describe() << "): " << probe.error().message;
    remove_cgroup(*probe);
  }
  static LaunchRequest with_memory(LaunchRequest r, long long bytes) {
    r.limits.memory_bytes = bytes;
    return r;
  }
};

// Holds about `mib` MiB in the shell's own memory (a command substitution keeps its output), then exits 0.
std::string hog(int mib) {
  return "a=$(head -c " + std::to_string(mib) + "M /dev/zero | tr '\\0' x); echo held ${#a}";
}

bool all_gone(const std::vector<std::string>& dirs) {
  for (const auto& d : dirs)
    if (fs::exists(d)) return false;
  return true;
}

TEST_F(Isolation, JobPastItsMemoryLimitEndsOutOfMemory) {
  need_cgroups();
  auto l = launcher();
  auto started = l.launch(with_memory(request("oom", 1, hog(256)), 32LL << 20));
  ASSERT_TRUE(started) << started.error().message;
  ASSERT_FALSE(started->record.cgroups.empty());
  auto sup = supervisor();
  sup.add(started->record);
  auto o = testing::run_until_finished(sup, 30s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kOutOfMemory);
  EXPECT_EQ(to_string(o.finished->state), "out_of_memory");
  ASSERT_EQ(o.all<RankExited>().size(), 1u);
  EXPECT_EQ(o.all<RankExited>()[0].signal, SIGKILL);  // the kernel's OOM kill
  EXPECT_EQ(read_file(log("oom", 0)), "");
  EXPECT_TRUE(all_gone(started->record.cgroups));
}

TEST_F(Isolation, JobUnderItsMemoryLimitCompletes) {
  need_cgroups();
  auto run = launch_and_run(with_memory(request("fits", 1, hog(8)), 128LL << 20), 30s);
  ASSERT_TRUE(run.error.empty()) << run.error;
  const auto& o = run.outcome;
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kCompleted);
  EXPECT_EQ(read_file(log("fits", 0)), "held " + std::to_string(8 << 20) + "\n");
  EXPECT_TRUE(all_gone(run.record.cgroups));
}

TEST_F(Isolation, LimitIsInForceWhileTheJobRunsAndTheGroupGoesAfterwards) {
  need_cgroups();
  auto l = launcher();
  auto started = l.launch(
      with_memory(request("live", 2, "setsid sleep 31 & cat /proc/self/cgroup; exec sleep 30"), 96LL << 20));
  ASSERT_TRUE(started) << started.error().message;
  const auto& groups = started->record.cgroups;
  ASSERT_FALSE(groups.empty());
  EXPECT_EQ(cgroup_memory_limit(groups), 96LL << 20);
  // Each rank is a member: its own /proc/<pid>/cgroup names the allocation's group.
  const std::string name = "/railyard/5-live";
  for (const auto& r : started->record.ranks) {
    std::ifstream in("/proc/" + std::to_string(r.pid) + "/cgroup");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(name), std::string::npos) << "rank " << r.rank << ": " << text;
  }
  auto sup = supervisor();
  sup.add(started->record);
  ASSERT_TRUE(sup.cancel("live"));
  auto o = testing::run_until_finished(sup, 10s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kCancelled);
  // Each rank also left a process outside its process group (setsid): the group still held it, so it was
  // killed through the group, which goes once those have exited (retried by later polls).
  for (int i = 0; i < 500 && !all_gone(groups); ++i) {
    sup.poll();
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(all_gone(groups));
}

// GPU device rules with stand-ins for /dev/nvidiaN (the test makes character devices: its own GPU 2 is
// /dev/urandom's 1:9, a foreign GPU 3 is /dev/full's 1:7): the job opens its own and is refused the other,
// as root too (the devices controller binds every user). cgroup v1 only; skips without it or mknod.
TEST_F(Isolation, JobOpensItsOwnGpuDeviceAndIsRefusedAnother) {
  need_cgroups();
  auto d = detect_cgroup_driver(CgroupSetup{});
  if ((*d)->describe().find("devices at") == std::string::npos)
    GTEST_SKIP() << "no devices controller in " << (*d)->describe();
  const fs::path dev = dir_.path() / "dev";
  fs::create_directories(dev);
  if (mknod((dev / "nvidia2").c_str(), S_IFCHR | 0666, makedev(1, 9)) != 0 ||
      mknod((dev / "nvidia3").c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0)
    GTEST_SKIP() << "cannot mknod in " << dev << ": " << std::strerror(errno);
  auto options = launcher_options();
  options.cgroup.dev = dev;
  auto inventory = *emulated_inventory("dgx-h100", "node0");
  inventory.source = "nvml";  // device rules are written for real GPUs only
  Launcher l(options, inventory);
  const std::string d2 = (dev / "nvidia2").string(), d3 = (dev / "nvidia3").string();
  auto started =
      l.launch(request("dev", 1,
                       "head -c 1 " + d2 + " >/dev/null && echo own; if (: > " + d3 +
                           ") 2>/dev/null; then echo foreign-opened; else echo foreign-refused; fi"));
  ASSERT_TRUE(started) << started.error().message;
  auto sup = supervisor();
  sup.add(started->record);
  auto o = testing::run_until_finished(sup, 10s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(read_file(log("dev", 0)), "own\nforeign-refused\n");
  EXPECT_EQ(gpu_deny_rules(dev, {2}), std::vector<std::string>{"c 1:7 rwm"});
}

// The same on cgroup v2, where device access is a BPF program on the group (device_filter.hpp): a process in
// the group opens its own stand-in GPU and is refused the other (EPERM from the program), while the same
// open outside the group succeeds. Uses the unified hierarchy (/sys/fs/cgroup on a v2 host, its unified/
// on a hybrid one); skips where there is none writable or the kernel refuses the program.
TEST_F(Isolation, CgroupV2DeviceFilterRefusesForeignGpus) {
  fs::path unified;
  for (const fs::path p : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"})
    if (fs::exists(p / "cgroup.subtree_control") && access(p.c_str(), W_OK) == 0) unified = p;
  if (unified.empty()) GTEST_SKIP() << "no writable cgroup v2 hierarchy";
  const fs::path dev = dir_.path() / "dev";
  fs::create_directories(dev);
  if (mknod((dev / "nvidia2").c_str(), S_IFCHR | 0666, makedev(1, 9)) != 0 ||
      mknod((dev / "nvidia3").c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0)
    GTEST_SKIP() << "cannot mknod in " << dev << ": " << std::strerror(errno);
  const fs::path parent = unified / ("railyard-test-" + std::to_string(getpid()));
  auto group = make_cgroup_v2(parent, dev)->create("gpus", ResourceLimits{}, GpuAccess{true, {2}});
  if (!group && group.error().message.find("device filter") != std::string::npos)
    GTEST_SKIP() << group.error().message;
  ASSERT_TRUE(group) << group.error().message;
  // Exit code: 0 both as expected, 1 own refused, 2 foreign opened, 3 foreign refused other than EPERM.
  const pid_t child = fork();
  if (child == 0) {
    std::ofstream(fs::path(group->front()) / "cgroup.procs") << "0";
    const int own = open((dev / "nvidia2").c_str(), O_RDONLY);
    const int foreign = open((dev / "nvidia3").c_str(), O_WRONLY);
    _exit(own < 0 ? 1 : foreign >= 0 ? 2 : errno != EPERM ? 3 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: own refused, 2: foreign opened, 3: foreign refused, not EPERM";
  const int outside = open((dev / "nvidia3").c_str(), O_WRONLY);  // the filter binds the group only
  EXPECT_GE(outside, 0) << std::strerror(errno);
  if (outside >= 0) close(outside);
  EXPECT_TRUE(remove_cgroup(*group));
  rmdir((parent / "railyard").c_str());
  rmdir(parent.c_str());
}

// Runs as nobody; skips where the test is not root or there is no such user.
class AsUser : public Isolation {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "running jobs as another user needs root";
    nobody_ = getpwnam("nobody");
    if (nobody_ == nullptr) GTEST_SKIP() << "no user nobody";
    // The scratch state directory is mkdtemp's 0700: let the job's user reach its allocation directory.
    fs::permissions(dir_.path(), fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  }
  LaunchRequest as_nobody(LaunchRequest r) const {
    r.spec.user = "nobody";
    return r;
  }
  struct passwd* nobody_ = nullptr;
};

TEST_F(AsUser, AllocationDirectoryAndFilesAreTheUsersAlone) {
  auto run = launch_and_run(as_nobody(request("private", 1, "echo secret > mine; stat -c %a mine")), 10s);
  ASSERT_TRUE(run.error.empty()) << run.error;
  const auto& o = run.outcome;
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kCompleted);
  const fs::path dir = log("private", 0).parent_path();
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, nobody_->pw_uid);
  ASSERT_EQ(stat(log("private", 0).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, nobody_->pw_uid);
  EXPECT_EQ(read_file(log("private", 0)), "600\n");  // created under the job umask, 077
}

TEST_F(AsUser, JobCannotSignalTheAgent) {
  auto l = launcher();
  const std::string me = std::to_string(getpid());
  auto started = l.launch(as_nobody(request("signal", 1, "kill -TERM " + me + " 2>/dev/null; echo $?")));
  ASSERT_TRUE(started) << started.error().message;
  auto sup = supervisor();
  sup.add(started->record);
  auto o = testing::run_until_finished(sup, 10s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(read_file(log("signal", 0)), "1\n");  // EPERM: another user's process
}

}  // namespace
}  // namespace railyard::agent
