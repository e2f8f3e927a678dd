#include "common/hostlist.hpp"

#include <gtest/gtest.h>

namespace railyard {
namespace {

TEST(Hostlist, ExpandsRangesKeepingPadding) {
  auto r = expand_hostlist("dgx[001-003,010],login1");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (std::vector<std::string>{"dgx001", "dgx002", "dgx003", "dgx010", "login1"}));
}

TEST(Hostlist, ExpandsSuffixAndSingleValues) {
  auto r = expand_hostlist("r[1,3]-ib");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::string>{"r1-ib", "r3-ib"}));
}

TEST(Hostlist, RejectsMalformedExpressions) {
  for (const char* bad : {"dgx[001-003", "dgx001]", "dgx[003-001]", "dgx[a-b]", "dgx[]", "a,,b", "d[[1]]", "x[1-2]]["}) {
    auto r = expand_hostlist(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    }
  }
}

TEST(Hostlist, RefusesHugeExpansions) {
  auto r = expand_hostlist("n[0-99999999]", 1000);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("more than 1000"), std::string::npos);
}

TEST(Hostlist, BoundsHugeExpansionsBeforeMakingAName) {
  // Ten million names: refused by the count, with no name made.
  auto many = expand_hostlist("dgx[0000000-9999999]", 100'000);
  ASSERT_FALSE(many);
  EXPECT_NE(many.error().message.find("more than 100000 hosts"), std::string::npos) << many.error().message;
  // Bounds that would overflow a long, and padding that would make every name huge.
  auto wide = expand_hostlist("n[0-9223372036854775807]");
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.error().message.find("at most 18 digits"), std::string::npos) << wide.error().message;
  auto padded = expand_hostlist("n[" + std::string(100'000, '0') + "-9]");
  ASSERT_FALSE(padded);
  EXPECT_NE(padded.error().message.find("at most 18 digits"), std::string::npos);
  EXPECT_LT(padded.error().message.size(), 400u);  // the expression is quoted shortened
  auto long_prefix = expand_hostlist(std::string(300, 'a') + "[0-999999]");
  ASSERT_FALSE(long_prefix);
  EXPECT_NE(long_prefix.error().message.find("longer than 255 characters"), std::string::npos);
  EXPECT_FALSE(expand_hostlist(std::string(256, 'a')));
  EXPECT_TRUE(expand_hostlist(std::string(255, 'a')));
  EXPECT_TRUE(expand_hostlist(std::string(250, 'a') + "[01-99]"));
}

TEST(Hostlist, CompressRoundTrips) {
  std::vector<std::vector<std::string>> cases = {
      {"dgx001", "dgx002", "dgx003", "dgx010"},
      {"a1", "b1", "b2", "c"},
      {"node9", "node10"},      // unpadded numbers of different widths share a range
      {"node09", "node10", "node100"},  // a padded one does not
      {"n10", "n9", "n011", "n12"},
      {"x"},
      {},
  };
  for (const auto& names : cases) {
    std::string expr = compress_hostlist(names);
    if (names.empty()) {
      EXPECT_EQ(expr, "");
      continue;
    }
    auto back = expand_hostlist(expr);
    ASSERT_TRUE(back) << expr;
    EXPECT_EQ(*back, names) << expr;
  }
  EXPECT_EQ(compress_hostlist({"dgx001", "dgx002", "dgx003", "dgx010"}), "dgx[001-003,010]");
  // One range where Slurm prints one, not node[9],node[10-16].
  EXPECT_EQ(compress_hostlist(*expand_hostlist("node[9],node[10-16]")), "node[9-16]");
  EXPECT_EQ(compress_hostlist(*expand_hostlist("node[8-9,11,98-101]")), "node[8-9,11,98-101]");
  EXPECT_EQ(compress_hostlist(*expand_hostlist("node[09-10]")), "node[09-10]");
}

TEST(Hostlist, SeveralBracketGroupsGiveTheCrossProductInSlurmsOrder) {
  auto r = expand_hostlist("row[0,1]_rack[2-3]_blade[4,5]");
  ASSERT_TRUE(r) << r.error().message;
  std::vector<std::string> want;
  for (int row : {0, 1})  // the first group varies slowest, as scontrol show hostnames prints them
    for (int rack : {2, 3})
      for (int blade : {4, 5})
        want.push_back("row" + std::to_string(row) + "_rack" + std::to_string(rack) + "_blade" + std::to_string(blade));
  EXPECT_EQ(*r, want);
  auto adjacent = expand_hostlist("x[1-2][07-08],y");
  ASSERT_TRUE(adjacent) << adjacent.error().message;
  EXPECT_EQ(*adjacent, (std::vector<std::string>{"x107", "x108", "x207", "x208", "y"}));
  // The limit counts the product, and a bad later group fails the whole expression.
  auto many = expand_hostlist("a[0-999]b[0-999]", 100'000);
  ASSERT_FALSE(many);
  EXPECT_NE(many.error().message.find("more than 100000 hosts"), std::string::npos) << many.error().message;
  EXPECT_FALSE(expand_hostlist("a[1-2]b[3-x]"));
  EXPECT_FALSE(expand_hostlist("a[1-2]b[]"));
}

TEST(Hostlist, TheEmptyExpressionIsAnError) {
  for (const char* empty : {"", " ", "\t\n"}) {
    auto r = expand_hostlist(empty);
    ASSERT_FALSE(r) << "'" << empty << "'";
    EXPECT_NE(r.error().message.find("empty host list"), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace railyard
