// The shared protocol definition: MACs match known values, messages round-trip, and reading is strict.
#include <gtest/gtest.h>

#include "common/protocol/key_file.hpp"
#include "common/protocol/mac.hpp"
#include "common/protocol/messages.hpp"

namespace railyard::protocol {
namespace {

TEST(ProtocolMac, HmacMatchesRfc4231Case2) {
  EXPECT_EQ(hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(ProtocolMac, RegisterMacIsTheHmacOfChallengeAgentAndNames) {
  EXPECT_EQ(register_mac("s", "c", "a", {"n1", "n2"}), hmac_sha256_hex("s", "c\na\nn1,n2"));
  EXPECT_EQ(node_mac("k", "c", "a", "n1"), hmac_sha256_hex("k", "c\na\nn1"));
  EXPECT_EQ(exec_token("k", "12.1"), hmac_sha256_hex("k", "exec\n12.1"));
  EXPECT_TRUE(same_mac("abc", "abc"));
  EXPECT_FALSE(same_mac("abc", "abd"));
  EXPECT_FALSE(same_mac("abc", "ab"));
}

TEST(ProtocolMac, RandomKeysAreFreshAndWellFormed) {
  const std::string a = new_node_key(), b = new_node_key();
  EXPECT_TRUE(valid_node_key(a));
  EXPECT_NE(a, b);
  EXPECT_FALSE(valid_node_key("xyz"));
}

TEST(ProtocolMessages, RoundTrip) {
  AllocFinished f{"12.1", 12, "n1", "failed", 3, 9, "rank 0", 77};
  const json j = encode(f);
  EXPECT_EQ(j["type"], "alloc_finished");
  EXPECT_EQ(j["v"], 1);
  const auto back = j.get<AllocFinished>();
  EXPECT_EQ(back.exit_code, 3);
  EXPECT_EQ(back.seq, 77);
  EXPECT_EQ(back.message, "rank 0");
  Launch l{"3.1", 3, "n2", 1, {{"n1", {0, 1}}, {"n2", {2}}}, json{{"gpus", 3}}, "10.0.0.1", 20001, 60};
  const auto lb = encode(l).get<Launch>();
  EXPECT_EQ(lb.nodes[1].gpus, std::vector<int>{2});
  EXPECT_EQ(lb.master_port, 20001);
  Register r{"h:1", {{"n1", json::object(), {{"9.1", 9, {0}, {42}}}, HealthState{false, "disk"}, "m1"}}, {}, {}};
  const auto rb = encode(r).get<Register>();
  EXPECT_EQ(rb.names(), std::vector<std::string>{"n1"});
  EXPECT_EQ(rb.nodes[0].mac, "m1");
  EXPECT_FALSE(rb.mac);
  EXPECT_FALSE(rb.nodes[0].health->ok);
}

TEST(ProtocolMessages, MissingOrMistypedFieldsAreClearErrors) {
  const json base = encode(Launched{"1.1", 1, "n1", {}});
  auto error_of = [](const json& j) -> std::string {
    try {
      (void)j.get<Launched>();
    } catch (const json::exception& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of(base), "");
  json no_node = base;
  no_node.erase("node");
  EXPECT_NE(error_of(no_node).find("missing field \"node\""), std::string::npos) << error_of(no_node);
  json float_job = base;
  float_job["job"] = 1.5;
  EXPECT_NE(error_of(float_job).find("field \"job\" must be an integer"), std::string::npos);
  json string_alloc = base;
  string_alloc["alloc"] = 11;
  EXPECT_NE(error_of(string_alloc).find("field \"alloc\" must be a string"), std::string::npos);
  EXPECT_THROW((void)json::array().get<Launched>(), json::exception);
  json bad_health = {{"node", "n1"}, {"ok", "yes"}};
  EXPECT_THROW((void)bad_health.get<Health>(), json::exception);
}

TEST(ProtocolKeyFile, NamedAndBareKeys) {
  const std::string k1(64, 'a'), k2(64, 'b');
  auto two = parse_key_file("# keys\n" + key_file_line("n1", k1) + key_file_line("n2", k2), {"n1", "n2"});
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_EQ(two->at("n2"), k2);
  auto bare = parse_key_file(k1 + "\n", {"n7"});
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->at("n7"), k1);
  EXPECT_FALSE(parse_key_file(k1 + "\n", {"n1", "n2"}));
  EXPECT_FALSE(parse_key_file(key_file_line("n1", k1), {"n1", "n2"}));
  EXPECT_FALSE(parse_key_file("n1 short\n", {"n1"}));
}

}  // namespace
}  // namespace railyard::protocol
