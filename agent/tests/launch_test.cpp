// Real processes through the Launcher and the Supervisor (grace period 1 s).
#include <pwd.h>
#include <signal.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <thread>
#include <utility>

#include "agent/launch/proc.hpp"
#include "agent/launch/process.hpp"
#include "agent/streams/metrics.hpp"
#include "agent/streams/tailer.hpp"
#include "agent/streams/telemetry.hpp"
#include "agent/tests/launch_harness.hpp"

namespace railyard::agent {
namespace {

using namespace std::chrono_literals;
using testing::read_file;

class Launch : public testing::LaunchFixture {};

std::vector<pid_t> pgids(const AllocRecord& r) {
  std::vector<pid_t> out;
  for (const auto& k : r.ranks) out.push_back(k.pgid);
  return out;
}

// Waits until the allocation's groups hold `n` living processes (the shells have forked their children).
bool wait_for_processes(const AllocRecord& r, int n) {
  for (int i = 0; i < 200; ++i) {
    if (sample_groups(pgids(r)).processes >= n) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST_F(Launch, EnvRanksSeeTheirVariables) {
  auto l = launcher();
  auto started =
      l.launch(request("env", 4, "echo $RANK $WORLD_SIZE $LOCAL_RANK $CUDA_VISIBLE_DEVICES $NCCL_IB_HCA"));
  ASSERT_TRUE(started) << started.error().message;
  EXPECT_TRUE(stored("env"));
  auto sup = supervisor();
  sup.add(started->record);
  auto o = testing::run_until_finished(sup, 10s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kCompleted);
  EXPECT_EQ(o.finished->exit_code, 0);
  EXPECT_EQ(o.all<RankStarted>().size(), 4u);
  EXPECT_EQ(o.all<RankExited>().size(), 4u);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(read_file(log("env", r)),
              std::to_string(r) + " 4 " + std::to_string(r) + " 2,3,4,5 mlx5_2,mlx5_3,mlx5_4,mlx5_5\n");
  EXPECT_FALSE(stored("env"));  // removed once finished
}

TEST_F(Launch, FailingRankTearsDownTheOthers) {
  auto run =
      launch_and_run(request("fail", 4, "if [ $RANK = 2 ]; then echo bad >&2; exit 3; fi; exec sleep 30"), 10s);
  ASSERT_TRUE(run.error.empty()) << run.error;
  const auto& o = run.outcome;
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kFailed);
  EXPECT_EQ(o.finished->exit_code, 3);
  EXPECT_LT(o.elapsed, 5s);  // SIGTERM, not the 30 s sleep
  for (const auto& e : o.all<RankExited>()) {
    if (e.rank == 2) continue;
    EXPECT_EQ(e.signal, SIGTERM) << "rank " << e.rank;
  }
  EXPECT_EQ(read_file(log("fail", 2, "err")), "bad\n");
}

// Rank 1 ignores SIGTERM (and so do its children): SIGKILL after the grace period gets it.
TEST_F(Launch, CancelKillsWholeProcessGroups) {
  auto l = launcher();
  auto started =
      l.launch(request("cancel", 2, "if [ $RANK = 1 ]; then trap '' TERM; fi; sleep 60 & sleep 60"));
  ASSERT_TRUE(started) << started.error().message;
  auto sup = supervisor();
  sup.add(started->record);
  ASSERT_TRUE(wait_for_processes(started->record, 6));  // two shells, four sleeps
  ASSERT_TRUE(sup.cancel("cancel"));
  auto o = testing::run_until_finished(sup, 10s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kCancelled);
  EXPECT_GE(o.elapsed, 900ms);  // rank 1 waited for SIGKILL
  EXPECT_LT(o.elapsed, 6s);
  for (const auto& r : started->record.ranks) EXPECT_TRUE(group_members(r.pgid).empty()) << "rank " << r.rank;
  EXPECT_FALSE(sup.cancel("cancel"));  // gone
}

// Every rank exits 0 but leaves a background process in its group: the allocation COMPLETES, and only once
// that process is gone (SIGKILL, then the group is empty), so its GPUs are free when the agent says so.
TEST_F(Launch, ALeftoverBackgroundProcessIsGoneWhenTheAllocationFinishes) {
  auto run = launch_and_run(request("leftover", 2, "sleep 60 & exit 0"), 10s);
  ASSERT_TRUE(run.error.empty()) << run.error;
  const auto& o = run.outcome;
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kCompleted);
  EXPECT_EQ(o.finished->exit_code, 0);
  EXPECT_LT(o.elapsed, 5s);  // SIGKILL at once, not the grace period or the 60 s sleep
  for (const auto& r : run.record.ranks) EXPECT_TRUE(group_members(r.pgid).empty()) << "rank " << r.rank;
}

TEST_F(Launch, TimeLimitKillsWithTimeout) {
  auto req = request("timeout", 2, "sleep 30");
  req.time_limit = 500ms;
  const auto before_launch = std::chrono::steady_clock::now();
  auto run = launch_and_run(req, 10s);
  ASSERT_TRUE(run.error.empty()) << run.error;
  const auto& o = run.outcome;
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kTimeout);
  EXPECT_EQ(o.finished->exit_code, 128 + SIGTERM);
  EXPECT_GE(std::chrono::steady_clock::now() - before_launch, 500ms);  // the limit counts from the launch
  EXPECT_LT(o.elapsed, 5s);
}

TEST_F(Launch, RecoverAfterDroppingTheLauncher) {
  {
    auto l = launcher();
    auto sup = supervisor();
    auto started = l.launch(request("survivor", 2, "sleep 60"));
    ASSERT_TRUE(started) << started.error().message;
    sup.add(started->record);
  }  // the agent "restarts": Launcher, Supervisor and store gone, workers still running
  allocs_ = std::make_shared<AllocStore>(dir_.path());
  Recovery rec = allocs_->recover();
  ASSERT_EQ(rec.alive.size(), 1u);
  EXPECT_EQ(rec.alive[0].alloc_id, "survivor");
  EXPECT_EQ(rec.alive[0].ranks.size(), 2u);
  auto sup = supervisor();
  sup.adopt(rec.alive[0]);
  EXPECT_TRUE(sup.poll().empty());
  ASSERT_TRUE(sup.cancel("survivor"));
  auto o = testing::run_until_finished(sup, 10s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kCancelled);
  EXPECT_FALSE(stored("survivor"));
}

// A later node of an mpi job: its allocation is held, and the orteds mpirun asks for arrive through
// add_process. One that exits 0 decides nothing (the allocation waits for its kill); one that fails ends
// the allocation FAILED with its code, since mpirun would otherwise wait for that daemon forever.
TEST_F(Launch, AFailingAddedProcessFailsAHeldAllocation) {
  auto sup = supervisor();
  AllocRecord r;
  r.job_id = 6;
  r.alloc_id = "held";
  sup.hold(r);
  auto start = [&](int rank, const std::string& command) {
    const Fd null_out(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    auto p = spawn_process(
        SpawnSpec{{"/bin/sh", "-c", command}, {}, "", null_out.get(), null_out.get(), std::nullopt, {}, std::nullopt});
    EXPECT_TRUE(p) << p.error().message;
    EXPECT_TRUE(sup.add_process("held", RankRecord{rank, p->pid, p->pgid, p->start_ticks, "", ""}));
  };
  start(1000, "exit 0");
  auto quiet = testing::run_until_finished(sup, 2s);
  EXPECT_FALSE(quiet.finished) << "a daemon that exited 0 ended the held allocation";
  start(1001, "exit 3");
  auto o = testing::run_until_finished(sup, 10s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kFailed);
  EXPECT_EQ(o.finished->exit_code, 3);
}

// A worker that is not our child (a restarted agent's view): liveness only, exit code lost.
TEST_F(Launch, AdoptedStrangerReportsLostExitCode) {
  const auto pidfile = dir_.path() / "pid";
  const Fd null_out(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  auto shell = spawn_process(SpawnSpec{{"/bin/sh", "-c", "sleep 60 & echo $! > " + pidfile.string()},
                                       {},
                                       "",
                                       null_out.get(),
                                       null_out.get(),
                                       std::nullopt,
                                       {},
                                       std::nullopt});
  ASSERT_TRUE(shell) << shell.error().message;
  waitpid(shell->pid, nullptr, 0);  // the sleep is now an orphan, no longer ours
  const pid_t sleeper = std::stoi(read_file(pidfile));
  AllocRecord r;
  r.job_id = 5;
  r.alloc_id = "stranger";
  r.ranks = {RankRecord{0, sleeper, shell->pgid, read_proc_stat(sleeper)->start_ticks, "", ""}};
  auto sup = supervisor();
  sup.adopt(r);
  EXPECT_TRUE(sup.poll().empty());
  kill(sleeper, SIGKILL);
  auto o = testing::run_until_finished(sup, 10s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kLost);
  ASSERT_EQ(o.all<RankExited>().size(), 1u);
  EXPECT_TRUE(o.all<RankExited>()[0].exit_code_lost);
}

// As subreaper the test process inherits a worker's escaped (setsid) child; reap_all_children collects
// it once it dies instead of leaving a zombie.
TEST_F(Launch, SubreaperReapsEscapedOrphans) {
  ASSERT_TRUE(become_subreaper());
  const auto pidfile = dir_.path() / "pid";
  auto l = launcher();
  auto started = l.launch(request("orphan", 1, "setsid sleep 30 & echo $! > " + pidfile.string()));
  ASSERT_TRUE(started) << started.error().message;
  SupervisorOptions options{allocs_, 1000ms};
  options.reap_all_children = true;
  Supervisor sup(options);
  sup.add(started->record);
  auto o = testing::run_until_finished(sup, 10s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kCompleted);
  const pid_t orphan = std::stoi(read_file(pidfile));
  ASSERT_EQ(read_proc_stat(orphan)->ppid, getpid());  // escaped its group, but not us
  kill(orphan, SIGKILL);
  for (int i = 0; i < 100 && std::filesystem::exists("/proc/" + std::to_string(orphan)); ++i) {
    (void)sup.poll();
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(orphan)));  // reaped, no zombie
  prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
}

TEST_F(Launch, MllogFromARunningRank) {
  auto l = launcher();
  auto started = l.launch(request(
      "mllog", 1,
      R"(printf ':::MLLOG {"namespace": "", "time_ms": 1000, "event_type": "INTERVAL_START", "key": "run_start", "value": null, "metadata": {}}\n'; )"
      R"(sleep 0.3; printf ':::MLLOG {"namespace": "", "time_ms": 4000, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", "value": 0.95, )"
      R"("metadata": {"epoch_num": 3}}\n')"));
  ASSERT_TRUE(started) << started.error().message;
  auto sup = supervisor();
  sup.add(started->record);
  ASSERT_TRUE(started->rank0_out);
  FileTailer tail(std::move(started->rank0_out));
  MllogTracker tracker(MetricTarget{"eval_accuracy", 0.9});
  std::vector<MetricEvent> metrics;
  bool finished = false;
  for (int i = 0; i < 100 && !finished; ++i) {
    for (const auto& e : sup.wait_for(50ms))
      finished = finished || std::holds_alternative<AllocationFinished>(e);
    for (const auto& line : finished ? tail.flush() : tail.read())
      for (auto& m : tracker.feed(line)) metrics.push_back(std::move(m));
  }
  ASSERT_TRUE(finished);
  ASSERT_EQ(metrics.size(), 3u);
  EXPECT_EQ(std::get<EvalPoint>(metrics[1]).epoch, 3.0);
  EXPECT_DOUBLE_EQ(std::get<TimeToTrain>(metrics[2]).seconds, 3.0);
}

TEST_F(Launch, AgentDescriptorsDoNotLeakIntoRanks) {
  const int leaked = dup2(STDERR_FILENO, 57);  // no O_CLOEXEC, like a careless library's descriptor
  ASSERT_EQ(leaked, 57);
  auto l = launcher();
  auto started =
      l.launch(request("fds", 1, "if [ -e /proc/$$/fd/57 ]; then echo leaked; else echo clean; fi"));
  close(leaked);
  ASSERT_TRUE(started) << started.error().message;
  auto sup = supervisor();
  sup.add(started->record);
  ASSERT_TRUE(testing::run_until_finished(sup, 10s).finished);
  EXPECT_EQ(read_file(log("fds", 0)), "clean\n");
}

// What the agent ignores or blocks (SIGPIPE; SIGHUP under nohup) is not the job's business: workers start
// with every signal at its default and none blocked, through posix_spawn and (as root, another user) fork.
// Except glibc's own two (32 and 33, below SIGRTMIN), which its posix_spawn sets to ignored in the child
// and no program linked with glibc uses otherwise.
TEST_F(Launch, WorkersStartWithDefaultSignals) {
  struct sigaction ignore = {}, old_hup = {}, old_usr1 = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGHUP, &ignore, &old_hup);
  sigaction(SIGUSR1, &ignore, &old_usr1);
  sigset_t usr2, old_mask;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &usr2, &old_mask);
  auto l = launcher();
  auto req = request("signals", 1, "exec grep -E '^Sig(Blk|Ign)' /proc/self/status");
  auto started = l.launch(req);
  std::optional<Result<Launched>> as_nobody;
  struct passwd* nobody = geteuid() == 0 ? getpwnam("nobody") : nullptr;
  if (nobody) {
    auto options = launcher_options();
    options.allow_root_jobs = false;
    Launcher strict(options, *emulated_inventory("dgx-h100", "node0"));
    auto other = request("signals-nobody", 1, "exec grep -E '^Sig(Blk|Ign)' /proc/self/status");
    other.spec.user = "nobody";
    other.spec.workdir = "/";
    as_nobody = strict.launch(other);
  }
  sigaction(SIGHUP, &old_hup, nullptr);
  sigaction(SIGUSR1, &old_usr1, nullptr);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  // "SigBlk:\t<hex>\nSigIgn:\t<hex>\n" -> the two masks, glibc's internal signals left out.
  auto masks = [](const std::string& status) {
    unsigned long long blocked = ~0ULL, ignored = ~0ULL;
    std::sscanf(status.c_str(), "SigBlk:\t%llx\nSigIgn:\t%llx", &blocked, &ignored);
    const unsigned long long glibc = (1ULL << (32 - 1)) | (1ULL << (33 - 1));
    return std::pair{blocked, ignored & ~glibc};
  };
  ASSERT_TRUE(started) << started.error().message;
  auto sup = supervisor();
  sup.add(started->record);
  ASSERT_TRUE(testing::run_until_finished(sup, 10s).finished);
  EXPECT_EQ(masks(read_file(log("signals", 0))), std::pair(0ULL, 0ULL)) << read_file(log("signals", 0));
  if (!as_nobody) GTEST_SKIP() << "the fork path needs root and a user nobody";
  ASSERT_TRUE(*as_nobody) << as_nobody->error().message;
  sup.add((*as_nobody)->record);
  ASSERT_TRUE(testing::run_until_finished(sup, 10s).finished);
  EXPECT_EQ(masks(read_file(log("signals-nobody", 0))), std::pair(0ULL, 0ULL))
      << read_file(log("signals-nobody", 0));
}

TEST_F(Launch, CommandThatCannotStartIsAnError) {
  auto l = launcher();
  auto req = request("nocmd", 2, "");
  req.spec.command = {"/nonexistent/train"};
  auto started = l.launch(req);
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().message.find("No such file"), std::string::npos) << started.error().message;
  EXPECT_FALSE(stored("nocmd"));
}

TEST_F(Launch, RootRefusesUnknownUserAndDropsToAKnownOne) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto options = launcher_options();
  options.allow_root_jobs = false;
  Launcher strict(options, *emulated_inventory("dgx-h100", "node0"));
  auto req = request("user", 1, "id -u");
  req.spec.user = "no-such-user-railyard";
  auto refused = strict.launch(req);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kPermission);
  EXPECT_NE(refused.error().message.find("no-such-user-railyard"), std::string::npos);
  req.spec.user = "";
  EXPECT_FALSE(strict.launch(req));

  struct passwd* nobody = getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user nobody";
  req.spec.user = "nobody";
  req.spec.workdir = "/";
  auto started = strict.launch(req);
  ASSERT_TRUE(started) << started.error().message;
  auto sup = supervisor();
  sup.add(started->record);
  auto o = testing::run_until_finished(sup, 10s);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.finished->state, AllocState::kCompleted);
  EXPECT_EQ(read_file(log("user", 0)), std::to_string(nobody->pw_uid) + "\n");
}

// A user with uid 0 under another name is root: refused as root is, by uid. Checked in a mount namespace
// whose /etc/passwd adds such a user, so the machine's own file is untouched.
TEST(ResolveJobUser, AUidZeroAliasIsRefusedAsRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  const pid_t child = fork();
  if (child == 0) {
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(77);
    char path[] = "/tmp/railyard-passwd-XXXXXX";
    const int fd = mkstemp(path);
    const std::string text = read_file("/etc/passwd") + "toor-railyard:x:0:0:alias:/root:/bin/sh\n";
    const bool written = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    if (fd >= 0) close(fd);
    if (!written || mount(path, "/etc/passwd", nullptr, MS_BIND, nullptr) != 0) _exit(77);
    auto refused = resolve_job_user("toor-railyard", false);
    auto allowed = resolve_job_user("toor-railyard", true);
    unlink(path);
    const bool ok = !refused && refused.error().code == ErrorCode::kPermission &&
                    refused.error().message.find("uid 0") != std::string::npos && allowed && !allowed->has_value();
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot bind-mount /etc/passwd in a new mount namespace";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a uid-0 alias was not refused as root (or, allowed, not run as root)";
}

// Isolation fails closed: where the allocation's group cannot be made the job does not start, and the
// error says why and how to accept running without it.
TEST_F(Launch, WithoutCgroupsAJobIsRefusedUnlessIsolationIsBestEffort) {
  auto options = launcher_options();
  options.cgroup.root = dir_.path() / "no-cgroup";
  Launcher l(options, *emulated_inventory("dgx-h100", "node0"));
  auto started = l.launch(request("refused", 1, "touch ran"));
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().message.find("cannot isolate"), std::string::npos) << started.error().message;
  EXPECT_NE(started.error().message.find("--isolation best-effort"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(l.alloc_dir(5, "refused") / "ran"));
}

TEST_F(Launch, CgroupLimitsSkippedWithANoteWhenUnavailable) {
  auto options = launcher_options();
  std::vector<std::string> notes;
  options.isolation = IsolationMode::kBestEffort;
  options.cgroup.root = dir_.path() / "no-cgroup";
  options.log = [&notes](const std::string& n) { notes.push_back(n); };
  Launcher l(options, *emulated_inventory("dgx-h100", "node0"));
  auto req = request("limits", 1, "true");
  req.limits.memory_bytes = 1LL << 30;
  auto started = l.launch(req);
  ASSERT_TRUE(started) << started.error().message;
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("cgroup limits skipped"), std::string::npos);
  auto sup = supervisor();
  sup.add(started->record);
  EXPECT_EQ(testing::run_until_finished(sup, 10s).finished->state, AllocState::kCompleted);
}

}  // namespace
}  // namespace railyard::agent
