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
  for (const char* bad : {"dgx[001-003", "dgx001]", "dgx[003-001]", "dgx[a-b]", "dgx[]", "a,,b", "d[[1]]", "x[1-2][3]"}) {
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
      {"node9", "node10"},  // different widths stay apart
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
}

}  // namespace
}  // namespace railyard
