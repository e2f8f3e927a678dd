#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "agent/launch/proc.hpp"
#include "agent/state/alloc_state.hpp"
#include "agent/tests/test_util.hpp"

namespace railyard::agent {
namespace {

using testing::TempDir;

AllocRecord record(const std::string& id, pid_t pid, unsigned long long start_ticks) {
  AllocRecord r;
  r.job_id = 9;
  r.alloc_id = id;
  r.node = "node0";
  r.started_unix_ms = 1700000000000;
  r.deadline_unix_ms = 1700000360000;
  r.ranks = {RankRecord{0, pid, pid, start_ticks, "/s/rank-0.out", "/s/rank-0.err"}};
  return r;
}

pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

TEST(AllocState, RoundTripAndAtomicWrite) {
  TempDir dir;
  const AllocRecord r = record("a1", 1234, 99);
  ASSERT_TRUE(write_state(dir.path(), r));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "allocs" / "a1.json"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "allocs" / "a1.json.tmp"));
  auto back = read_state(state_file(dir.path(), "a1"));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, r);
  remove_state(dir.path(), "a1");
  EXPECT_FALSE(read_state(state_file(dir.path(), "a1")));
}

TEST(AllocState, RecoverKeepsLivingAndDropsDead) {
  TempDir dir;
  const pid_t self = getpid();
  // This test process stands in for a still-running worker (its own group may not be led by it: use pid).
  AllocRecord alive = record("alive", self, read_proc_stat(self)->start_ticks);
  alive.ranks[0].pgid = getpgrp();
  ASSERT_TRUE(write_state(dir.path(), alive));
  ASSERT_TRUE(write_state(dir.path(), record("dead", dead_pid(), 0)));
  // Same pid, other start time: a reused pid is not our worker.
  AllocRecord reused = record("reused", self, 1);
  reused.ranks[0].pgid = dead_pid();
  ASSERT_TRUE(write_state(dir.path(), reused));
  testing::write_file(dir.path() / "allocs" / "junk.json", "{not json");

  Recovery rec = recover(dir.path());
  ASSERT_EQ(rec.alive.size(), 1u);
  EXPECT_EQ(rec.alive[0].alloc_id, "alive");
  std::sort(rec.removed.begin(), rec.removed.end());
  EXPECT_EQ(rec.removed, (std::vector<std::string>{"dead", "junk", "reused"}));
  EXPECT_TRUE(std::filesystem::exists(state_file(dir.path(), "alive")));
  EXPECT_FALSE(std::filesystem::exists(state_file(dir.path(), "dead")));
}

TEST(Proc, ReadsOwnStat) {
  auto s = read_proc_stat(getpid());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pgrp, getpgrp());
  EXPECT_EQ(s->ppid, getppid());
  EXPECT_GT(s->start_ticks, 0u);
  EXPECT_TRUE(process_alive(getpid(), s->start_ticks));
  EXPECT_FALSE(process_alive(getpid(), s->start_ticks + 1));
  EXPECT_FALSE(process_alive(dead_pid()));
  EXPECT_GT(read_proc_rss(getpid()), 0);
}

}  // namespace
}  // namespace railyard::agent
