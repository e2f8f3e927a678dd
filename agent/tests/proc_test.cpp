// GroupLiveness and ProcessTable: which process groups still hold living processes, with real processes
// (a living group, a zombie-only group, a group whose leader is a zombie but whose child lives, a group
// gone after reaping) and how many /proc scans the answers cost.
#include "agent/launch/proc.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/streams/telemetry.hpp"

namespace railyard::agent {
namespace {

// A child leading its own process group, running `body` (which must not return).
template <typename Body>
pid_t group_leader(Body body) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    body();
    _exit(0);
  }
  setpgid(pid, pid);  // both sides, so the group exists whichever runs first
  return pid;
}

[[noreturn]] void sleep_forever() {
  for (;;) pause();
}

// Blocks until pid has exited, leaving it a zombie (not reaped).
void wait_until_zombie(pid_t pid) {
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
}

void kill_and_reap(pid_t pid) {
  kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(GroupLiveness, GroupWithALivingProcessIsAliveAndGoneAfterReaping) {
  const pid_t g = group_leader(sleep_forever);
  GroupLiveness groups;
  EXPECT_TRUE(groups.alive(g));
  EXPECT_EQ(groups.scans(), 1);  // kill(-g, 0) succeeds: the scan tells living from zombie

  kill_and_reap(g);
  groups.refresh();
  EXPECT_FALSE(groups.alive(g));
  EXPECT_EQ(groups.scans(), 1) << "an empty group is answered by kill(-pgid, 0) alone";
}

TEST(GroupLiveness, ZombieOnlyGroupIsNotAlive) {
  const pid_t g = group_leader([] { _exit(3); });
  wait_until_zombie(g);
  ASSERT_EQ(kill(-g, 0), 0) << "the zombie still holds the group";
  GroupLiveness groups;
  EXPECT_FALSE(groups.alive(g));
  EXPECT_TRUE(groups.table().seen(g));
  EXPECT_TRUE(groups.table().members(g).empty());
  int status = 0;
  ASSERT_EQ(waitpid(g, &status, 0), g);
  EXPECT_EQ(WEXITSTATUS(status), 3);
}

TEST(GroupLiveness, LivingChildKeepsTheGroupOfAZombieLeaderAlive) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t g = group_leader([&] {
    if (fork() == 0) {  // stays in the leader's group
      close(pipe_fds[0]);
      close(pipe_fds[1]);
      sleep_forever();
    }
    _exit(0);  // the leader goes; the child lives on in its group
  });
  close(pipe_fds[1]);
  wait_until_zombie(g);
  GroupLiveness groups;
  EXPECT_TRUE(groups.alive(g));
  ASSERT_EQ(groups.table().members(g).size(), 1u);
  EXPECT_NE(groups.table().members(g)[0].pid, g);

  kill(-g, SIGKILL);
  waitpid(g, nullptr, 0);
  char byte;
  EXPECT_EQ(read(pipe_fds[0], &byte, 1), 0);  // EOF: the child (holding the write end) is dead
  close(pipe_fds[0]);
  // The child closes its files early in its exit, before it is a zombie, so for a moment it may still show
  // as running; then it is a zombie (reparented, reaped by init or a subreaper when it gets to it) or gone,
  // and the group is not alive.
  bool alive = true;
  for (int i = 0; i < 500 && alive; ++i) {
    groups.refresh();
    alive = groups.alive(g);
    if (alive) usleep(10'000);
  }
  EXPECT_FALSE(alive);
}

TEST(GroupLiveness, OneScanServesEveryGroupUntilRefresh) {
  const pid_t a = group_leader(sleep_forever);
  const pid_t b = group_leader(sleep_forever);
  const pid_t z = group_leader([] { _exit(0); });
  wait_until_zombie(z);
  GroupLiveness groups;
  EXPECT_TRUE(groups.alive(a));
  EXPECT_TRUE(groups.alive(b));
  EXPECT_FALSE(groups.alive(z));
  EXPECT_FALSE(groups.alive(999999999));
  EXPECT_EQ(groups.scans(), 1);

  // A group created after the scan was not seen by it: alive (the next tick looks again), not "empty".
  const pid_t late = group_leader(sleep_forever);
  EXPECT_TRUE(groups.alive(late));
  EXPECT_EQ(groups.scans(), 1);

  groups.refresh();
  EXPECT_TRUE(groups.alive(late));
  EXPECT_EQ(groups.scans(), 2);
  for (pid_t p : {a, b, z, late}) kill_and_reap(p);
}

TEST(ProcessTable, TelemetryFromASharedScan) {
  const pid_t g = group_leader(sleep_forever);
  GroupLiveness groups;
  const ProcessTelemetry t = sample_groups({g, g}, groups.table());
  EXPECT_EQ(t.processes, 1);  // a group listed twice counts once
  EXPECT_GT(t.rss_bytes, 0);
  EXPECT_EQ(sample_groups({999999999}, groups.table()).processes, 0);
  EXPECT_EQ(groups.scans(), 1);
  kill_and_reap(g);
}

// /proc files of a process that is gone read as nothing (a read racing the exit fails with ESRCH, which
// std::ifstream turned into an exception that ended a scan: seen in CI); a living process's read whole.
TEST(ProcFiles, AGoneProcessReadsAsNothingALivingOneWhole) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_FALSE(read_proc_file(child, "stat").has_value());
  EXPECT_FALSE(read_proc_stat(child).has_value());
  EXPECT_EQ(read_proc_rss(child), 0);
  const auto self = read_proc_file(::getpid(), "status");
  ASSERT_TRUE(self.has_value());
  EXPECT_NE(self->find("VmRSS:"), std::string::npos);
  EXPECT_GT(self->size(), 4096u / 4) << "read to its end";
  const auto stat = read_proc_stat(::getpid());
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->pid, ::getpid());
  EXPECT_GT(read_proc_rss(::getpid()), 0);
}

}  // namespace
}  // namespace railyard::agent
