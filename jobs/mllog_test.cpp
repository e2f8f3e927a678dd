#include "jobs/mllog.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace railyard::jobs {
namespace {

std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(RAILYARD_TESTDATA) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A writer on a fake clock that ticks 10 ms per event.
struct Recorder {
  std::ostringstream out;
  std::int64_t now = 1'700'000'000'000;
  MllogWriter writer{out, [this] { return now += 10; }};
};

TEST(MllogWriter, RoundTripsEveryEventKind) {
  Recorder r;
  r.writer.start(mllog_key::kInitStart);
  r.writer.point(mllog_key::kSubmissionBenchmark, "railyard_digits_mlp", {{"dataset", "sklearn-digits"}});
  r.writer.end(mllog_key::kInitStop);
  r.writer.start(mllog_key::kRunStart);
  r.writer.point(mllog_key::kResume, 3, {{"epoch_num", 3}, {"previous_elapsed_s", 1.5}});
  r.writer.start(mllog_key::kEpochStart, nullptr, {{"epoch_num", 3}});
  r.writer.end(mllog_key::kEpochStop, nullptr, {{"epoch_num", 3}});
  r.writer.point(mllog_key::kTrackedStats, {{"throughput", 1234.5}}, {{"step", 3}});
  r.writer.point(mllog_key::kEvalAccuracy, 0.9625, {{"epoch_num", 3}});
  r.writer.at(1'699'999'999'000, MllogEventType::kIntervalEnd, mllog_key::kRunStop, nullptr,
              {{"status", "success"}});

  const auto lines = lines_of(r.out.str());
  ASSERT_EQ(lines.size(), 10u);
  const std::vector<std::pair<std::string, MllogEventType>> expected = {
      {"init_start", MllogEventType::kIntervalStart},  {"submission_benchmark", MllogEventType::kPointInTime},
      {"init_stop", MllogEventType::kIntervalEnd},     {"run_start", MllogEventType::kIntervalStart},
      {"resume", MllogEventType::kPointInTime},        {"epoch_start", MllogEventType::kIntervalStart},
      {"epoch_stop", MllogEventType::kIntervalEnd},    {"tracked_stats", MllogEventType::kPointInTime},
      {"eval_accuracy", MllogEventType::kPointInTime}, {"run_stop", MllogEventType::kIntervalEnd}};
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i]);
    ASSERT_TRUE(lines[i].starts_with(":::MLLOG {\"namespace\": \"\", \"time_ms\": "));
    const auto event = parse_mllog_line(lines[i]);
    ASSERT_TRUE(event.has_value());
    EXPECT_EQ(event->key, expected[i].first);
    EXPECT_EQ(event->type, expected[i].second);
    EXPECT_EQ(event->metadata_string("file"), "mllog_test.cpp");
    EXPECT_TRUE(event->metadata_number("lineno").has_value());
    EXPECT_EQ(format_mllog_line(*event), lines[i]);  // parse . format is the identity on writer output
  }
  const auto events = parse_mllog_text(r.out.str());
  EXPECT_EQ(events[0].time_ms, 1'700'000'000'010);
  EXPECT_EQ(events[1].value, "railyard_digits_mlp");
  EXPECT_EQ(events[4].metadata_number("previous_elapsed_s"), 1.5);
  EXPECT_EQ(events[7].value["throughput"], 1234.5);
  EXPECT_DOUBLE_EQ(events[8].value.get<double>(), 0.9625);
  EXPECT_EQ(events[9].time_ms, 1'699'999'999'000);
  EXPECT_EQ(events[9].metadata_string("status"), "success");
}

TEST(MllogWriter, KeepsMlperfKeyOrderAndEscapes) {
  MllogEvent event;
  event.time_ms = 42;
  event.key = "weird";
  event.value = "a \"quoted\", colon: and \\ backslash";
  event.metadata = {{"zeta", 1}, {"lineno", 7}, {"file", "x.py"}};
  const std::string line = format_mllog_line(event);
  EXPECT_EQ(
      line,
      R"(:::MLLOG {"namespace": "", "time_ms": 42, "event_type": "POINT_IN_TIME", "key": "weird", )"
      R"("value": "a \"quoted\", colon: and \\ backslash", "metadata": {"file": "x.py", "lineno": 7, "zeta": 1}})");
  const auto back = parse_mllog_line(line);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->value, event.value);
}

TEST(MllogParser, IgnoresOrdinaryLinesAndAcceptsLauncherPrefixes) {
  EXPECT_FALSE(parse_mllog_line("epoch 3 loss 0.25").has_value());
  EXPECT_FALSE(parse_mllog_line("").has_value());
  const auto plain = parse_mllog("epoch 3 loss 0.25");
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->has_value());
  const auto tagged = parse_mllog_line(
      R"([1,0]<stdout>::::MLLOG {"namespace": "", "time_ms": 5, "event_type": "POINT_IN_TIME", "key": "k", "value": 1}
)");
  ASSERT_TRUE(tagged.has_value());
  EXPECT_EQ(tagged->key, "k");
  EXPECT_TRUE(tagged->metadata.is_object());
}

TEST(MllogParser, RejectsMalformedLinesWithoutThrowing) {
  const auto lines = lines_of(read_fixture("mllog_malformed.log"));
  ASSERT_EQ(lines.size(), 9u);
  for (const auto& line : lines) {
    SCOPED_TRACE(line);
    std::optional<MllogEvent> quiet;
    EXPECT_NO_THROW(quiet = parse_mllog_line(line));
    EXPECT_FALSE(quiet.has_value());
    const auto checked = parse_mllog(line);
    ASSERT_FALSE(checked.has_value());
    EXPECT_FALSE(checked.error().message.empty());
  }
}

TEST(MllogParser, SurvivesArbitraryBytes) {
  std::uint64_t state = 12345;
  for (int round = 0; round < 2000; ++round) {
    std::string line = ":::MLLOG {\"key\": \"";
    const int length = static_cast<int>(state % 40);
    for (int i = 0; i < length; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      line.push_back(static_cast<char>(state >> 56));
    }
    EXPECT_NO_THROW((void)parse_mllog(line));
  }
}

TEST(TimeToTrain, IsRunStopMinusRunStartOnSuccess) {
  const auto events = parse_mllog_text(read_fixture("mllog_success.log"));
  ASSERT_EQ(events.size(), 15u);  // the three ordinary lines are skipped
  const auto ttt = time_to_train_s(events);
  ASSERT_TRUE(ttt.has_value());
  EXPECT_DOUBLE_EQ(*ttt, (1700000098765 - 1700000012345) / 1000.0);
}

TEST(TimeToTrain, IsAbsentWhenAborted) {
  const auto events = parse_mllog_text(read_fixture("mllog_aborted.log"));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().metadata_string("status"), "aborted");
  EXPECT_FALSE(time_to_train_s(events).has_value());
}

TEST(TimeToTrain, IsAbsentWithoutRunStopOrRunStart) {
  auto events = parse_mllog_text(read_fixture("mllog_success.log"));
  events.pop_back();  // no run_stop: the run was cut off
  EXPECT_FALSE(time_to_train_s(events).has_value());
  EXPECT_FALSE(time_to_train_s({}).has_value());
}

TEST(TimeToTrain, SpansAPreemptedAttemptAndItsResumption) {
  // First attempt: run_start, no run_stop (killed). Second: run_start repeats the original time, resume,
  // success.
  Recorder r;
  r.writer.at(1000, MllogEventType::kIntervalStart, mllog_key::kRunStart, nullptr, nlohmann::json::object());
  r.writer.at(5000, MllogEventType::kIntervalStart, mllog_key::kRunStart, nullptr, nlohmann::json::object());
  r.writer.at(5001, MllogEventType::kPointInTime, mllog_key::kResume, 3, {{"epoch_num", 3}});
  r.writer.at(9000, MllogEventType::kIntervalEnd, mllog_key::kRunStop, nullptr, {{"status", "success"}});
  EXPECT_DOUBLE_EQ(*time_to_train_s(parse_mllog_text(r.out.str())), 8.0);
}

}  // namespace
}  // namespace railyard::jobs
