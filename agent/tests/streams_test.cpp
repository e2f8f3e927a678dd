#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "agent/streams/metrics.hpp"
#include "agent/streams/tailer.hpp"
#include "agent/streams/telemetry.hpp"
#include "agent/tests/test_util.hpp"

namespace railyard::agent {
namespace {

using testing::TempDir;

void append(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::app) << text;
}

// A tailer of a new empty file, as the launcher makes a rank's log before the rank starts.
FileTailer tail_new(const std::filesystem::path& p) {
  return FileTailer(Fd(::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)));
}

TEST(FileTailer, CompleteLinesOnlyAndNoRereads) {
  TempDir dir;
  const auto log = dir.path() / "rank-0.out";
  FileTailer tail = tail_new(log);
  EXPECT_TRUE(tail.read().empty());  // nothing written yet
  append(log, "first line\nsecond ");
  EXPECT_EQ(tail.read(), (std::vector<std::string>{"first line"}));
  EXPECT_TRUE(tail.read().empty());
  append(log, "half\nthird\n");
  EXPECT_EQ(tail.read(), (std::vector<std::string>{"second half", "third"}));
  append(log, "no newline at the end");
  EXPECT_TRUE(tail.read().empty());
  EXPECT_EQ(tail.flush(), (std::vector<std::string>{"no newline at the end"}));
  EXPECT_EQ(tail.offset(), std::filesystem::file_size(log));
}

TEST(FileTailer, TruncatedFileIsReadFromTheStart) {
  TempDir dir;
  const auto log = dir.path() / "out";
  FileTailer tail = tail_new(log);
  append(log, "one\ntwo\n");
  EXPECT_EQ(tail.read().size(), 2u);
  std::ofstream(log, std::ios::trunc) << "new\n";
  EXPECT_EQ(tail.read(), (std::vector<std::string>{"new"}));
}

std::string mllog(long long t, const char* type, const char* key, const std::string& value,
                  const std::string& meta) {
  return ":::MLLOG {\"namespace\": \"\", \"time_ms\": " + std::to_string(t) + ", \"event_type\": \"" + type +
         "\", \"key\": \"" + key + "\", \"value\": " + value + ", \"metadata\": " + meta + "}\n";
}

std::vector<MetricEvent> tail_in_chunks(const std::string& text, MllogTracker& tracker, size_t chunk) {
  TempDir dir;
  const auto log = dir.path() / "rank-0.out";
  FileTailer tail = tail_new(log);
  std::vector<MetricEvent> events;
  for (size_t pos = 0; pos < text.size(); pos += chunk) {
    append(log, text.substr(pos, chunk));
    for (const auto& line : tail.read())
      for (auto& e : tracker.feed(line)) events.push_back(std::move(e));
  }
  for (const auto& line : tail.flush())
    for (auto& e : tracker.feed(line)) events.push_back(std::move(e));
  return events;
}

const std::string kRun =
    "starting\n" + mllog(1000, "INTERVAL_START", "run_start", "null", "{}") +
    mllog(2000, "POINT_IN_TIME", "tracked_stats", "{\"throughput\": 1234.5}", "{\"step\": 1}") +
    mllog(3000, "POINT_IN_TIME", "eval_accuracy", "0.81", "{\"epoch_num\": 1}") +
    ":::MLLOG {\"broken json\n" +
    mllog(5000, "POINT_IN_TIME", "eval_accuracy", "0.93", "{\"epoch_num\": 2}") +
    mllog(7500, "INTERVAL_END", "run_stop", "null", "{\"status\": \"success\"}");

TEST(MllogTracker, ChunkedLogYieldsEventsAndTimeToTrain) {
  for (size_t chunk : {7u, 64u, 4096u}) {
    MllogTracker tracker;
    auto events = tail_in_chunks(kRun, tracker, chunk);
    ASSERT_EQ(events.size(), 7u) << "chunk " << chunk;
    EXPECT_EQ(std::get<RunStart>(events[0]).time_ms, 1000);
    EXPECT_DOUBLE_EQ(std::get<Throughput>(events[1]).value, 1234.5);
    const auto& eval = std::get<EvalPoint>(events[2]);
    EXPECT_EQ(eval.time_ms, 3000);
    EXPECT_EQ(eval.epoch, 1.0);
    EXPECT_DOUBLE_EQ(eval.value, 0.81);
    // The broken line is said, with its line number, the moment it is read.
    const auto& note = std::get<MllogNote>(events[3]).what;
    EXPECT_NE(note.find("line 5 of rank 0's output could not be read: MLLOG payload is not valid JSON"),
              std::string::npos) << note;
    EXPECT_DOUBLE_EQ(std::get<EvalPoint>(events[4]).value, 0.93);
    EXPECT_EQ(std::get<RunStop>(events[5]).status, "success");
    const auto& ttt = std::get<TimeToTrain>(events[6]);
    EXPECT_DOUBLE_EQ(ttt.seconds, 6.5);
    EXPECT_EQ(ttt.reason, "run_stop");
    EXPECT_EQ(tracker.malformed(), 1);
    EXPECT_EQ(tracker.parsed(), 5);
  }
}

TEST(MllogTracker, TargetMetFirstGivesTimeToTrainOnce) {
  MllogTracker tracker(MetricTarget{"eval_accuracy", 0.9});
  auto events = tail_in_chunks(kRun, tracker, 13);
  std::vector<TimeToTrain> ttts;
  for (const auto& e : events)
    if (auto* t = std::get_if<TimeToTrain>(&e)) ttts.push_back(*t);
  ASSERT_EQ(ttts.size(), 1u);
  EXPECT_DOUBLE_EQ(ttts[0].seconds, 4.0);
  EXPECT_EQ(ttts[0].reason, "target");
  EXPECT_EQ(tracker.time_to_train(), 4.0);
}

TEST(MllogTracker, AbortedRunHasNoTimeToTrain) {
  MllogTracker tracker;
  tracker.feed(mllog(1000, "INTERVAL_START", "run_start", "null", "{}"));
  auto events = tracker.feed(mllog(9000, "INTERVAL_END", "run_stop", "null", "{\"status\": \"aborted\"}"));
  ASSERT_EQ(events.size(), 2u);  // the run_stop, and the note that says why there is no time-to-train
  EXPECT_EQ(std::get<RunStop>(events[0]).status, "aborted");
  EXPECT_TRUE(std::get<MllogNote>(events[1]).what.starts_with(kNoTimeToTrain));
  EXPECT_FALSE(tracker.time_to_train());
}

template <typename T>
std::vector<T> only(const std::vector<MetricEvent>& events) {
  std::vector<T> out;
  for (const auto& e : events)
    if (const auto* x = std::get_if<T>(&e)) out.push_back(*x);
  return out;
}

std::vector<MetricEvent> feed_all(MllogTracker& tracker, const std::string& text) {
  std::vector<MetricEvent> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);)
    for (auto& e : tracker.feed(line)) out.push_back(std::move(e));
  return out;
}

TEST(MllogTracker, ReadsAV06LogWithSrunLabels) {
  // run_start 1558666210.123 s, run_stop 1558666290.456 s with status "success": 80.333 s.
  MllogTracker tracker;
  const auto events = feed_all(
      tracker,
      "0: :::MLL 1558666210.123 run_start: {\"value\": null, \"metadata\": {\"file\": \"train.py\", \"lineno\": 9}}\n"
      "0: :::MLL 1558666289.990 eval_accuracy: {\"value\": 0.7593, \"metadata\": {\"epoch_num\": 2}}\n"
      "0: :::MLL 1558666290.456 run_stop: {\"value\": null, \"metadata\": {\"status\": \"success\"}}\n");
  ASSERT_EQ(only<EvalPoint>(events).size(), 1u);
  EXPECT_EQ(only<EvalPoint>(events)[0].epoch, 2.0);
  ASSERT_EQ(only<TimeToTrain>(events).size(), 1u);
  EXPECT_DOUBLE_EQ(only<TimeToTrain>(events)[0].seconds, 80.333);
  EXPECT_TRUE(only<MllogNote>(events).empty());
  EXPECT_EQ(tracker.malformed(), 0);
}

TEST(MllogTracker, AV05RunThatReachedItsTargetHasATimeToTrain) {
  // run_start 1541720285.000 s; eval_accuracy 0.7521 >= eval_target 0.749; run_stop 1541720385.500 s
  // with no word of success: 100.5 s, as the v0.5 rules count it.
  MllogTracker tracker;
  const auto events = feed_all(tracker,
                               ":::MLPv0.5.0 resnet 1541720285.000 (m.py:1) run_start\n"
                               ":::MLPv0.5.0 resnet 1541720285.100 (m.py:2) eval_target: 0.749\n"
                               ":::MLPv0.5.0 resnet 1541720384.900 (m.py:3) eval_accuracy: {\"epoch\": 2, \"value\": 0.7521}\n"
                               ":::MLPv0.5.0 resnet 1541720385.500 (m.py:4) run_stop\n");
  ASSERT_EQ(only<RunStop>(events).size(), 1u);
  EXPECT_EQ(only<RunStop>(events)[0].status, "success");
  ASSERT_EQ(only<TimeToTrain>(events).size(), 1u);
  EXPECT_DOUBLE_EQ(only<TimeToTrain>(events)[0].seconds, 100.5);
}

TEST(MllogTracker, AnAbortedV06RunSaysWhyItHasNoTimeToTrain) {
  MllogTracker tracker;
  const auto events =
      feed_all(tracker,
               ":::MLL 1558666210.123 run_start: {\"value\": null, \"metadata\": {}}\n"
               ":::MLL 1558666251.500 run_stop: {\"value\": null, \"metadata\": {\"status\": \"aborted\"}}\n");
  EXPECT_TRUE(only<TimeToTrain>(events).empty());
  ASSERT_EQ(only<MllogNote>(events).size(), 1u);
  const std::string what = only<MllogNote>(events)[0].what;
  EXPECT_TRUE(what.starts_with(kNoTimeToTrain)) << what;
  EXPECT_NE(what.find("\"aborted\""), std::string::npos) << what;
  EXPECT_NE(what.find("v0.6"), std::string::npos) << what;
}

TEST(MllogTracker, MalformedLinesAreCountedAndSaidAtPowersOfTen) {
  MllogTracker tracker;
  std::string text;
  for (int i = 0; i < 120; ++i) text += "ordinary\n:::MLPv0.4.0 resnet 1.0 (a.py:1) run_start\n";
  const auto notes = only<MllogNote>(feed_all(tracker, text));
  EXPECT_EQ(tracker.malformed(), 120);
  ASSERT_EQ(notes.size(), 3u);  // the 1st, the 10th, the 100th
  EXPECT_NE(notes[0].what.find("line 2 "), std::string::npos) << notes[0].what;
  EXPECT_NE(notes[0].what.find("is not one Railyard reads"), std::string::npos) << notes[0].what;
  EXPECT_NE(notes[2].what.find("100 lines"), std::string::npos) << notes[2].what;
  EXPECT_NE(notes[2].what.find("the first: line 2"), std::string::npos) << notes[2].what;
}

TEST(Telemetry, SumsTheProcessGroup) {
  auto t = sample_groups({getpgrp()});
  EXPECT_GE(t.processes, 1);
  EXPECT_GT(t.rss_bytes, 0);
  EXPECT_GE(t.cpu_seconds, 0.0);
  EXPECT_EQ(sample_groups({999999999}).processes, 0);
}

}  // namespace
}  // namespace railyard::agent
