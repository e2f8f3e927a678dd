#include "common/json_text.hpp"

#include <gtest/gtest.h>

#include <string>

namespace railyard {
namespace {

TEST(JsonText, DepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(json_text_depth(R"({"a": [1, {"b": 2}]})"), 3);
  EXPECT_EQ(json_text_depth(R"({"a": "[[[[\"[[["})"), 1);
  EXPECT_EQ(json_text_depth("42"), 0);
}

TEST(JsonText, RefusesDeepTextWithoutBuildingIt) {
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  auto r = parse_json_bounded(deep);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message, "nested deeper than 32 levels");
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json_bounded(at_limit));
  EXPECT_FALSE(parse_json_bounded("[" + at_limit + "]"));
}

TEST(JsonText, InvalidJsonIsAShortErrorNotAnException) {
  auto r = parse_json_bounded("\"" + std::string(100'000, 'a') + "\x01\"");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.rfind("invalid JSON: ", 0), 0u) << r.error().message;
  EXPECT_LE(r.error().message.size(), 220u);
  auto ok = parse_json_bounded(R"({"type": "heartbeat"})");
  ASSERT_TRUE(ok);
  EXPECT_EQ((*ok)["type"], "heartbeat");
}

}  // namespace
}  // namespace railyard
