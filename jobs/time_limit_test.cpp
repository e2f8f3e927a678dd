#include "jobs/time_limit.hpp"

#include <gtest/gtest.h>

#include "jobs/mig.hpp"
#include "jobs/parse_util.hpp"

namespace railyard::jobs {
namespace {

TEST(SlurmTime, AcceptsEverySlurmForm) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"30", 1800},        {"90", 5400},           {"5:30", 330},
      {"01:30:00", 5400},  {"100:00:00", 360000},  {"2-12", 216000},
      {"2-12:30", 217800}, {"2-12:30:15", 217815}, {"0", 0},
      {"UNLIMITED", 0},    {"infinite", 0},        {"90:00", 5400},
  };
  for (const auto& [text, seconds] : cases) {
    auto r = parse_slurm_time(text);
    ASSERT_TRUE(r) << text << ": " << r.error().message;
    EXPECT_EQ(*r, seconds) << text;
  }
}

TEST(SlurmTime, RejectsMalformed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "expected MM"},          {"1:2:3:4", "expected MM"}, {"abc", "expected MM"},
      {"1:", "expected MM"},        {"-5", "expected MM"},      {"1-", "expected MM"},
      {"1:60:00", "below 60"},      {"10:75", "below 60"},      {"1-24", "below 24"},
      {"1-2:3:4:5", "expected MM"}, {"4000-00", "3650-day"},    {"99999999999999999999", "expected MM"},
      {"1.5", "expected MM"},       {" 5", "expected MM"},
  };
  for (const auto& [text, expected] : cases) {
    auto r = parse_slurm_time(text);
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.error().message.find(expected), std::string::npos) << text << ": " << r.error().message;
  }
}

TEST(TimeLimit, FormatReadsBack) {
  for (int64_t s : {int64_t{1}, int64_t{59}, int64_t{3600}, int64_t{5400}, int64_t{86399}, int64_t{86400},
                    int64_t{2 * 86400 + 3723}, kMaxTimeLimitS}) {
    std::string text = format_time_limit(s);
    auto a = parse_slurm_time(text);
    auto b = parse_time_limit(text);
    ASSERT_TRUE(a && b) << text;
    EXPECT_EQ(*a, s) << text;
    EXPECT_EQ(*b, s) << text;
  }
  EXPECT_EQ(format_time_limit(5400), "01:30:00");
  EXPECT_EQ(format_time_limit(90061), "1-01:01:01");
  EXPECT_EQ(format_time_limit(0), "unlimited");
}

TEST(TimeLimit, UnitForms) {
  EXPECT_EQ(*parse_time_limit("1d2h3m4s"), 93784);
  for (std::string bad : {"2h1d", "1h1h", "h", "5y", "3650d1s"}) EXPECT_FALSE(parse_time_limit(bad)) << bad;
}

TEST(ParseUtil, Dependency) {
  using T = Dependency::Type;
  EXPECT_EQ(parse_dependency("afterok:12")->afterok, std::vector<JobId>{12});
  EXPECT_TRUE(parse_dependency("afterok:12")->after.empty());
  EXPECT_EQ(parse_dependency("afterok:12:13,afterok:13:14")->afterok, (std::vector<JobId>{12, 13, 14}));
  auto d = parse_dependency("afterany:40, afternotok:41:40,afterok:12_3:12,aftercorr:50,afterany:40");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->afterok, std::vector<JobId>{12});
  EXPECT_EQ(d->after, (std::vector<Dependency>{{T::kAfterAny, 40},
                                               {T::kAfterNotOk, 41},
                                               {T::kAfterNotOk, 40},
                                               {T::kAfterOk, 12, 3},
                                               {T::kAfterCorr, 50}}));  // the second afterany:40 dropped
  EXPECT_EQ(parse_dependency("afterany:7_0")->after.at(0).task, 0);
  for (std::string bad : {"", "afterok", "afterok:", "afterok:0", "afterok:1?afterok:2", "after:1",
                          "singleton", "aftercorr:12_3", "afterok:12_", "afterok:12_x", "afterok:12_10000000",
                          "afterok:12+60", "afterok:1::2", "afterany:-1", "Afterok:1"})
    EXPECT_FALSE(parse_dependency(bad)) << bad;
  std::string many = "afterany";
  for (int i = 1; i <= static_cast<int>(kMaxDependencies); ++i) many += ":" + std::to_string(i);
  EXPECT_EQ(parse_dependency(many + ":1")->after.size(), kMaxDependencies);  // a repeat is dropped, not counted
  EXPECT_EQ(parse_dependency(many + ":99999").error().message, "more than 10000 dependencies");
  EXPECT_EQ(parse_dependency("after:1").error().message,
            R"(dependency type "after" is not supported (afterok, afterany, afternotok and aftercorr are))");
}

TEST(ParseUtil, OneDependencyRoundTripsThroughItsText) {
  using T = Dependency::Type;
  for (const Dependency& d : std::vector<Dependency>{{T::kAfterOk, 12, 3},
                                                     {T::kAfterAny, 40},
                                                     {T::kAfterNotOk, 9, 0},
                                                     {T::kAfterCorr, 50},
                                                     {T::kAfterOk, 7}}) {
    auto back = parse_one_dependency(d.text());
    ASSERT_TRUE(back) << d.text() << ": " << back.error().message;
    EXPECT_EQ(*back, d) << d.text();
  }
  EXPECT_EQ(Dependency({T::kAfterOk, 12, 3}).text(), "afterok:12_3");
  EXPECT_EQ(Dependency({T::kAfterOk, 12, 3}).target(), "task 3 of array 12");
  for (std::string bad : {"afterany", "afterany:40:41", "afterany:40,afterok:1", "aftercorr:5_1", "x:1"})
    EXPECT_FALSE(parse_one_dependency(bad)) << bad;
}

TEST(ParseUtil, SuggestionsAndQuoting) {
  constexpr std::array<std::string_view, 3> kWords = {"gpus", "nodes", "gpus_per_node"};
  EXPECT_EQ(did_you_mean("gpu", kWords), R"( (did you mean "gpus"?))");
  EXPECT_EQ(did_you_mean("GPUS_PER_NOD", kWords), R"( (did you mean "gpus_per_node"?))");
  EXPECT_EQ(did_you_mean("memory", kWords), "");
  EXPECT_EQ(did_you_mean("x", kWords), "");
  EXPECT_EQ(in_quotes("a\"b\n"), R"("a\"b\x0a")");
  EXPECT_EQ(in_quotes(std::string(100, 'x')), "\"" + std::string(64, 'x') + "...\"");
}

TEST(ParseUtil, Utf8) {
  EXPECT_TRUE(is_valid_utf8("plain, caf\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x9a\x82"));
  for (std::string bad : {"\xff", "\xc3", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"})
    EXPECT_FALSE(is_valid_utf8(bad));
}

TEST(Mig, ProfilesByGpuMemory) {
  EXPECT_TRUE(is_known_mig_profile("1g.5gb"));
  EXPECT_FALSE(is_known_mig_profile("1g.6gb"));
  ASSERT_NE(find_mig_profile("1g.10gb", 40), nullptr);
  EXPECT_EQ(find_mig_profile("1g.10gb", 40)->max_per_gpu, 4);
  EXPECT_EQ(find_mig_profile("1g.10gb", 80)->max_per_gpu, 7);
  EXPECT_EQ(find_mig_profile("1g.5gb", 80), nullptr);
  EXPECT_EQ(find_mig_profile("7g.141gb", 141)->compute_slices, 7);
  EXPECT_EQ(known_mig_profile_names().find("1g.10gb"), known_mig_profile_names().rfind("1g.10gb"));
}

}  // namespace
}  // namespace railyard::jobs
