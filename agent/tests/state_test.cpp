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

size_t lines(const std::filesystem::path& file) {
  const std::string text = testing::read_file(file);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(Journal, ChangesSurviveReopeningAndDroppedLinesAreRewrittenAway) {
  TempDir dir;
  const auto file = dir.path() / "sub" / "j.journal";
  {
    Journal j(file);
    ASSERT_TRUE(j.put("a", {{"v", 1}}));
    ASSERT_TRUE(j.put("b", {{"v", 2}}));
    ASSERT_TRUE(j.put("a", {{"v", 3}}));  // replaces a
    j.drop("b");
    j.drop("nobody");  // no line
    EXPECT_EQ(lines(file), 4u);
    EXPECT_EQ(j.dead_lines(), 3u);
    EXPECT_EQ(Journal::read(file), j.records());  // read() sees what the writer holds, and writes nothing
    EXPECT_EQ(lines(file), 4u);
  }
  Journal again(file);  // replaying found dead lines: the file now holds the live record only
  ASSERT_EQ(again.records().size(), 1u);
  EXPECT_EQ(again.records().at("a"), (nlohmann::json{{"v", 3}}));
  EXPECT_EQ(lines(file), 1u);
  EXPECT_EQ(again.dead_lines(), 0u);
  EXPECT_FALSE(std::filesystem::exists(file.string() + ".tmp"));
}

TEST(Journal, SkipsLinesThatDoNotParseAndATornLastLine) {
  TempDir dir;
  const auto file = dir.path() / "j.journal";
  testing::write_file(file,
                      "[\"put\",\"a\",{\"v\":1}]\n"
                      "garbage\n"
                      "[\"put\",\"b\"]\n"  // no record
                      "[\"put\",\"c\",{\"v\":3}]\n"
                      "[\"put\",\"d\",{\"v\":");  // cut short by a crash
  {
    Journal j(file);
    EXPECT_EQ(j.records().size(), 2u);
    EXPECT_TRUE(j.records().count("a") && j.records().count("c"));
    ASSERT_TRUE(j.put("e", {{"v", 5}}));  // lands on a line of its own, not after the torn one
  }
  const auto back = Journal::read(file);
  EXPECT_EQ(back.size(), 3u);
  EXPECT_TRUE(back.count("e"));
  EXPECT_EQ(lines(file), 3u);
}

TEST(Journal, StaysSmallUnderChurn) {
  TempDir dir;
  const auto file = dir.path() / "j.journal";
  Journal j(file);
  ASSERT_TRUE(j.put("long-lived", {{"v", 0}}));
  for (int i = 0; i < 1000; ++i) {
    const std::string key = std::to_string(i);
    ASSERT_TRUE(j.put(key, {{"v", i}}));
    j.drop(key);
    ASSERT_LE(lines(file), 64u + 2u) << "after " << i;  // rewritten once the dead lines pass 64
  }
  EXPECT_EQ(Journal::read(file), j.records());
  EXPECT_EQ(j.records().size(), 1u);
}

// A change that cannot be written is an error, stays in memory, and reaches the file with the next change
// that can be written (the whole file is rewritten then, so no partial line is appended to).
TEST(Journal, AChangeThatCannotBeWrittenIsWrittenWithTheNextOne) {
  TempDir dir;
  const auto file = dir.path() / "j.journal";
  Journal j(file);
  std::filesystem::create_directories(file);  // in the way: neither append nor rename can write the file
  EXPECT_FALSE(j.put("a", {{"v", 1}}));
  EXPECT_EQ(j.records().size(), 1u);
  std::filesystem::remove(file);
  ASSERT_TRUE(j.put("b", {{"v", 2}}));
  EXPECT_EQ(Journal::read(file), j.records());
  EXPECT_EQ(lines(file), 2u);
  ASSERT_TRUE(j.put("c", {{"v", 3}}));  // appends again
  EXPECT_EQ(lines(file), 3u);
}

TEST(AllocState, RecordsRoundTripThroughTheJournal) {
  TempDir dir;
  const AllocRecord r = record("a1", 1234, 99);
  {
    AllocStore store(dir.path());
    ASSERT_TRUE(store.put(r));
    ASSERT_TRUE(store.put(record("a2", 1235, 98)));
    EXPECT_EQ(store.records().size(), 2u);
  }
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "allocs.journal"));
  AllocStore again(dir.path());
  const auto back = again.records();
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0], r);
  again.remove("a1");
  ASSERT_EQ(AllocStore::read(dir.path()).size(), 1u);
  EXPECT_EQ(AllocStore::read(dir.path())[0].alloc_id, "a2");
}

TEST(AllocState, RecoverKeepsLivingAndDropsDead) {
  TempDir dir;
  const pid_t self = getpid();
  // This test process stands in for a still-running worker (its own group may not be led by it: use pid).
  AllocRecord alive = record("alive", self, read_proc_stat(self)->start_ticks);
  alive.ranks[0].pgid = getpgrp();
  // Same pid, other start time: a reused pid is not our worker.
  AllocRecord reused = record("reused", self, 1);
  reused.ranks[0].pgid = dead_pid();
  {
    AllocStore store(dir.path());
    ASSERT_TRUE(store.put(alive));
    ASSERT_TRUE(store.put(record("dead", dead_pid(), 0)));
    ASSERT_TRUE(store.put(reused));
    ASSERT_TRUE(store.put(AllocRecord{}));  // job 0, alloc "": made unreadable below
  }
  std::string text = testing::read_file(dir.path() / "allocs.journal");
  text.replace(text.find("\"job_id\":0"), 10, "\"job_id\":\"x\"");
  testing::write_file(dir.path() / "allocs.journal", text);

  AllocStore store(dir.path());
  Recovery rec = store.recover();
  ASSERT_EQ(rec.alive.size(), 1u);
  EXPECT_EQ(rec.alive[0].alloc_id, "alive");
  std::sort(rec.removed.begin(), rec.removed.end());
  EXPECT_EQ(rec.removed, (std::vector<std::string>{"", "dead", "reused"}));
  const auto left = AllocStore::read(dir.path());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].alloc_id, "alive");
}

// An agent from before the journal kept <state>/allocs/<alloc>.json: an upgraded agent adopts those workers.
TEST(AllocState, TakesOverTheFilesOfAnOlderAgent) {
  TempDir dir;
  const auto old_dir = dir.path() / "allocs";
  std::filesystem::create_directories(old_dir);
  const AllocRecord r = record("old", 4321, 7);
  testing::write_file(old_dir / "old.json",
                      R"({"job_id": 9, "alloc_id": "old", "node": "node0", "started_unix_ms": 1700000000000,
                          "deadline_unix_ms": 1700000360000, "cgroup": "",
                          "ranks": [{"rank": 0, "pid": 4321, "pgid": 4321, "start_ticks": 7,
                                     "stdout": "/s/rank-0.out", "stderr": "/s/rank-0.err"}]})");
  testing::write_file(old_dir / "junk.json", "{not json");
  testing::write_file(old_dir / "half.json.tmp", "{");
  {
    AllocStore store(dir.path());
    ASSERT_EQ(store.records().size(), 1u);
    EXPECT_EQ(store.records()[0], r);
  }
  EXPECT_FALSE(std::filesystem::exists(old_dir));
  ASSERT_EQ(AllocStore::read(dir.path()).size(), 1u);
  EXPECT_EQ(AllocStore::read(dir.path())[0], r);
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
