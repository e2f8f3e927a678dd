// The MLPerf log formats before v0.7 (v0.5 ":::MLPv0.5.0", v0.6 ":::MLL"), launcher prefixes, and the
// verdict MllogRun reaches: time-to-train as MLPerf's result summarizer computes it, or why there is none.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "jobs/mllog.hpp"

namespace railyard::jobs::formats_test {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(RAILYARD_TESTDATA) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

MllogRun run_of(const std::string& text) {
  MllogRun run;
  for (const auto& e : parse_mllog_text(text)) run.add(e);
  return run;
}

TEST(MllogV06, ReadsTimeKeyValueAndMetadata) {
  const auto e = parse_mllog_line(
      R"(:::MLL 1558666289.990 eval_accuracy: {"value": 0.7593, "metadata": {"epoch_num": 2, "file": "train.py", "lineno": 140}})");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->format, MllogFormat::kV06);
  EXPECT_EQ(e->time_ms, 1558666289990);
  EXPECT_EQ(e->key, "eval_accuracy");
  EXPECT_EQ(e->type, MllogEventType::kPointInTime);
  EXPECT_DOUBLE_EQ(e->value.get<double>(), 0.7593);
  EXPECT_EQ(e->metadata_number("epoch_num"), 2.0);
  const auto stop = parse_mllog_line(R"(:::MLL 1558666290.456 run_stop: {"value": null, "metadata": {"status": "success"}})");
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->type, MllogEventType::kIntervalEnd);
  EXPECT_EQ(stop->metadata_string("status"), "success");
}

TEST(MllogV06, TimeToTrainDerivedByHand) {
  // run_start 1558666210.123 s, run_stop 1558666290.456 s with status "success":
  // 290.456 - 210.123 = 80.333 s (the ResNet-50-in-about-80-s shape of MLPerf v0.6).
  const auto text = fixture("mllog_v06_success.log");
  const auto events = parse_mllog_text(text);
  ASSERT_EQ(events.size(), 9u);  // the NCCL line is ordinary output
  EXPECT_TRUE(malformed_mllog_lines(text).empty());
  const auto ttt = time_to_train_s(events);
  ASSERT_TRUE(ttt.has_value());
  EXPECT_DOUBLE_EQ(*ttt, 80.333);
}

TEST(MllogV06, AbortedRunHasNoTimeToTrainAndSaysWhy) {
  const auto run = run_of(fixture("mllog_v06_aborted.log"));
  EXPECT_TRUE(run.stopped());
  EXPECT_FALSE(run.time_to_train_s().has_value());
  EXPECT_NE(run.no_time_to_train().find("\"aborted\""), std::string::npos) << run.no_time_to_train();
}

TEST(MllogV05, ReadsBenchmarkTimeFileKeyAndValue) {
  const auto e = parse_mllog_line(
      ":::MLPv0.5.0 resnet 1541720285.254530191 (resnet/imagenet_main.py:245) run_start");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->format, MllogFormat::kV05);
  EXPECT_EQ(e->key, "run_start");
  EXPECT_EQ(e->type, MllogEventType::kIntervalStart);
  EXPECT_EQ(e->time_ms, 1541720285255);  // .2545 rounds up to the nearest millisecond
  EXPECT_TRUE(e->value.is_null());
  EXPECT_EQ(e->metadata_string("benchmark"), "resnet");
  EXPECT_EQ(e->metadata_string("file"), "resnet/imagenet_main.py");
  EXPECT_EQ(e->metadata_number("lineno"), 245.0);
  const auto eval = parse_mllog_line(
      R"(:::MLPv0.5.0 resnet 1541720384.9 (loop.py:520) eval_accuracy: {"epoch": 2, "value": 0.7521})");
  ASSERT_TRUE(eval.has_value());
  EXPECT_DOUBLE_EQ(eval->value.get<double>(), 0.7521);  // v0.7's shape: the number, epoch in metadata
  EXPECT_EQ(eval->metadata_number("epoch_num"), 2.0);
  const auto shape = parse_mllog_line(R"(:::MLPv0.5.0 ssd 1541720285 (p.py:1) input_resize: [300, 300])");
  ASSERT_TRUE(shape.has_value());
  EXPECT_EQ(shape->value, nlohmann::json({300, 300}));
  EXPECT_EQ(shape->time_ms, 1541720285000);
}

TEST(MllogV05, TimeToTrainDerivedByHand) {
  // run_start 1541720285.254530191 s -> 1541720285255 ms (nearest ms); run_stop 1541720385.755470000 s
  // -> 1541720385755 ms; 1541720385755 - 1541720285255 = 100500 ms = 100.5 s. run_stop carries no
  // status: the run succeeded because eval_accuracy 0.7521 (epoch 2) reached eval_target 0.749.
  // (MLPerf's summarizer, in float seconds, gets 100.500939809: the same to the millisecond.)
  const auto text = fixture("mllog_v05_success.log");
  EXPECT_TRUE(malformed_mllog_lines(text).empty());
  const auto ttt = time_to_train_s(parse_mllog_text(text));
  ASSERT_TRUE(ttt.has_value());
  EXPECT_DOUBLE_EQ(*ttt, 100.5);
}

TEST(MllogV05, SuccessIsTheTargetReachedOrRunStopsOwnWord) {
  const std::string head =
      ":::MLPv0.5.0 ncf 1538678136.000 (ncf.py:10) run_start\n"
      ":::MLPv0.5.0 ncf 1538678136.100 (ncf.py:11) eval_target: 0.635\n"
      ":::MLPv0.5.0 ncf 1538678150.000 (ncf.py:12) eval_accuracy: {\"epoch\": 0, \"value\": 0.61}\n";
  const std::string stop = ":::MLPv0.5.0 ncf 1538678160.000 (ncf.py:13) run_stop";
  const auto short_of_target = run_of(head + stop);
  EXPECT_FALSE(short_of_target.time_to_train_s().has_value());
  EXPECT_NE(short_of_target.no_time_to_train().find("never reached eval_target 0.635"), std::string::npos)
      << short_of_target.no_time_to_train();
  // run_stop {"success": true}, as v0.5 reference code printed it, is success whatever the curve says.
  EXPECT_DOUBLE_EQ(*run_of(head + stop + ": {\"success\": true}").time_to_train_s(), 24.0);
  EXPECT_FALSE(run_of(head + stop + ": {\"success\": false}").time_to_train_s().has_value());
  const std::string reached = ":::MLPv0.5.0 ncf 1538678159.000 (ncf.py:12) eval_accuracy: 0.64\n";
  EXPECT_DOUBLE_EQ(*run_of(head + reached + stop).time_to_train_s(), 24.0);
}

TEST(MllogPrefixes, SrunLabelsAreIgnored) {
  // Rank 0's run_start 1558666210.123 s opens the run (rank 1's comes a millisecond later); run_stop
  // 1558666255.623 s, status success: 255.623 - 210.123 = 45.5 s.
  const auto text = fixture("mllog_v06_srun_label.log");
  const auto events = parse_mllog_text(text);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_DOUBLE_EQ(*time_to_train_s(events), 45.5);
}

TEST(MllogPrefixes, TextGluedBeforeTheTokenIsIgnored) {
  for (const std::string line :
       {R"(epoch 3 done:::MLL 1558666250.000 eval_accuracy: {"value": 0.75, "metadata": {}})",
        R"(progress 40%:::MLPv0.5.0 resnet 1558666250.000 (a.py:1) eval_accuracy: 0.75)",
        R"([1,0]<stdout>:::MLLOG {"time_ms": 1558666250000, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", "value": 0.75})"}) {
    SCOPED_TRACE(line);
    const auto e = parse_mllog_line(line);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->key, "eval_accuracy");
    EXPECT_EQ(e->time_ms, 1558666250000);
    EXPECT_DOUBLE_EQ(e->value.get<double>(), 0.75);
  }
}

TEST(MllogMalformed, EveryFormatSaysWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {":::MLL", "a space must follow"},
      {":::MLL 1558666250.0.1 run_start: {}", "is not seconds"},
      {":::MLL 1558666250.000 run_start {\"value\": null}", "is not followed by ': '"},
      {":::MLL 1558666250.000 run_start: {\"value\": null", "not valid JSON"},
      {":::MLL 1558666250.000 run_start: {\"metadata\": 3}", "'metadata' is not an object"},
      {":::MLPv0.5.0 resnet 1541720285.25 (a.py:1)", "no key"},
      {":::MLPv0.5.0 resnet 1541720285.25 a.py:1 run_start", "(file:line)"},
      {":::MLPv0.5.0 resnet 1541720285.25 (a.py:1) eval_target: 0.7x", "not valid JSON"},
      {":::MLPv0.5.0 resnet soon (a.py:1) run_start", "is not seconds"},
      {":::MLP resnet 1541720285.25 (a.py:1) run_start", "without a version"},
      {":::MLPv0.4.0 resnet 1541720285.25 (a.py:1) run_start", "is not one Railyard reads"},
      {"0: :::MLLOG", "without a JSON payload"},
  };
  for (const auto& [line, reason] : cases) {
    SCOPED_TRACE(line);
    const auto parsed = parse_mllog(line);
    ASSERT_FALSE(parsed.has_value());
    EXPECT_NE(parsed.error().message.find(reason), std::string::npos) << parsed.error().message;
  }
  std::string text;
  for (const auto& [line, reason] : cases) text += line + "\nordinary output\n";
  const auto bad = malformed_mllog_lines(text);
  ASSERT_EQ(bad.size(), cases.size());
  EXPECT_EQ(bad.front().first, 1);
  EXPECT_EQ(bad.back().first, static_cast<int>(2 * cases.size() - 1));
}

TEST(MllogMalformed, WordsThatOnlyResembleATokenAreOrdinaryOutput) {
  for (const std::string line : {"::MLL 1.0 run_start: {}", ":::ML", "see :::MLLx notes", ":::MLM 1.0 k: 1"}) {
    SCOPED_TRACE(line);
    const auto parsed = parse_mllog(line);
    ASSERT_TRUE(parsed.has_value());
    EXPECT_FALSE(parsed->has_value());
  }
}

TEST(MllogRunVerdict, SaysWhyWhileTheLogIsIncomplete) {
  EXPECT_EQ(run_of("").no_time_to_train(), "the log has no run_start");
  EXPECT_EQ(run_of(":::MLL 1.000 run_start: {\"value\": null}").no_time_to_train(),
            "the log has run_start but no run_stop");
  const auto no_status = run_of(":::MLL 1.000 run_start: {\"value\": null}\n:::MLL 2.000 run_stop: {\"value\": null}");
  EXPECT_FALSE(no_status.time_to_train_s().has_value());
  EXPECT_NE(no_status.no_time_to_train().find("no status"), std::string::npos);
}

}  // namespace
}  // namespace railyard::jobs::formats_test
