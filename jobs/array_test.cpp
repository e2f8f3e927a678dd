#include "jobs/array.hpp"

#include <gtest/gtest.h>

#include "jobs/spec_json.hpp"
#include "jobs/validate.hpp"

namespace railyard::jobs {
namespace {

std::vector<int> indexes(const ArraySpec& a) {
  std::vector<int> out;
  for (int64_t i = 0; i < a.size(); ++i) out.push_back(a.index_at(i));
  return out;
}

TEST(ArraySpec, RangesListsStepsAndTheRunningCap) {
  auto a = parse_array_spec("0-3");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(indexes(*a), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(a->max_running, 0);

  auto b = parse_array_spec("7,1,3-5");
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(indexes(*b), (std::vector<int>{7, 1, 3, 4, 5}));  // in the order given

  auto c = parse_array_spec("0-9:3%2");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(indexes(*c), (std::vector<int>{0, 3, 6, 9}));
  EXPECT_EQ(c->max_running, 2);
  EXPECT_EQ(c->index_at(4), -1);

  auto d = parse_array_spec("1-10:4");  // the range ends at the last index its step reaches
  ASSERT_TRUE(d);
  EXPECT_EQ(indexes(*d), (std::vector<int>{1, 5, 9}));
  EXPECT_EQ(d->text(), "1-9:4");

  auto big = parse_array_spec("0-999999");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->size(), kMaxArrayTasks);
  EXPECT_EQ(big->index_at(543210), 543210);
  EXPECT_EQ(big->position_of(999999), 999999);
}

TEST(ArraySpec, TextReadsBackToTheSameArray) {
  for (const char* t : {"0", "0-4999", "5,1,2-4", "0-98:2%10", "3-3", "9999999"}) {
    auto a = parse_array_spec(t);
    ASSERT_TRUE(a) << t << ": " << a.error().message;
    auto again = parse_array_spec(a->text());
    ASSERT_TRUE(again) << a->text();
    EXPECT_EQ(*again, *a) << t;
  }
  EXPECT_EQ(parse_array_spec("3-3")->text(), "3");
}

TEST(ArraySpec, BadTextIsRefusedWithTheReason) {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"", "empty"},
      {"%4", "empty"},
      {"1,,2", "empty part"},
      {"1,", "empty part"},
      {"a-3", "not a task index"},
      {"-1", "not a task index"},
      {"5-2", "backwards"},
      {"0-9:0", "step"},
      {"0-9:x", "step"},
      {"4:2", "needs a range"},
      {"0-10000000", "above 9999999"},
      {"0-1000000", "more than 1000000 tasks"},
      {"0-5,3", "index 3 is given twice"},
      {"0-9%0", "caps the tasks"},
      {"0-9%", "caps the tasks"},
      {"0-9%-1", "caps the tasks"},
  };
  for (const auto& [text, why] : bad) {
    auto a = parse_array_spec(text);
    ASSERT_FALSE(a) << text;
    EXPECT_NE(a.error().message.find(why), std::string::npos) << text << ": " << a.error().message;
    EXPECT_EQ(a.error().message.rfind("array", 0), 0u) << a.error().message;
  }
}

TEST(ArraySpec, TheSpecFieldReadsWritesAndIsCheckedForBatchJobsOnly) {
  auto s = parse_job_spec_text(R"({"user": "ada", "gpus": 1, "command": ["true"], "array": "0-9%2"})");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE(s->array);
  EXPECT_EQ(s->array->size(), 10);
  EXPECT_EQ(to_json(*s)["array"], "0-9%2");
  auto back = parse_job_spec(to_json(*s));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->array, s->array);

  JobSpec task = *s;
  task.array.reset();
  task.array_job = 17;
  task.array_task = 4;
  auto task_back = parse_job_spec_text(to_json(task).dump());
  ASSERT_TRUE(task_back);
  EXPECT_EQ(task_back->array_job, 17);
  EXPECT_EQ(task_back->array_task, 4);
  EXPECT_FALSE(to_json(*s).contains("array_job"));  // only tasks carry it

  auto bad = parse_job_spec_text(R"({"gpus": 1, "array": 5})");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("array: expected a string"), std::string::npos) << bad.error().message;
  auto bad_text = parse_job_spec_text(R"({"gpus": 1, "array": "3-1"})");
  ASSERT_FALSE(bad_text);
  EXPECT_NE(bad_text.error().message.find("backwards"), std::string::npos) << bad_text.error().message;

  auto service = parse_job_spec_text(
      R"({"user": "ada", "kind": "service", "gpus": 1, "time_limit": 0, "array": "0-3"})");
  ASSERT_TRUE(service);
  auto v = validate_spec(*service);
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().message.find("only batch jobs come in arrays"), std::string::npos) << v.error().message;
  auto ok = validate_spec(*s);
  EXPECT_TRUE(ok) << ok.error().message;
}

}  // namespace
}  // namespace railyard::jobs
