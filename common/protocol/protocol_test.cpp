// The shared protocol definition: MACs match known values, messages round-trip, and reading is strict.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

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

TEST(ProtocolMac, SessionKeyBindsBothChallengesAndTheAgent) {
  const std::string c(64, 'a'), a(64, 'b');
  EXPECT_EQ(session_key("k", c, a, "h:1"), hmac_sha256_hex("k", "session\n" + c + "\n" + a + "\nh:1"));
  EXPECT_NE(session_key("k", c, a, "h:1"), session_key("k", c, std::string(64, 'c'), "h:1"));
  EXPECT_NE(session_key("k", c, a, "h:1"), session_key("k2", c, a, "h:1"));
  EXPECT_TRUE(valid_challenge(random_hex(kChallengeBytes)));
  EXPECT_FALSE(valid_challenge("session\n"));
  EXPECT_FALSE(valid_challenge(std::string(64, 'A')));
}

// The sealed text is the serialized message with "n" first and the MAC of those exact bytes appended.
TEST(ProtocolMac, SealedOrdersVerifyOnceInOrderAndOnlyWithTheSessionKey) {
  const std::string key = session_key("node-key", std::string(64, 'a'), std::string(64, 'b'), "h:1");
  OrderSealer sealer(key);
  const std::string first = sealer.seal(R"({"type":"launch","v":1})");
  const std::string body = R"({"n":1,"type":"launch","v":1})";
  EXPECT_EQ(first, R"({"n":1,"type":"launch","v":1,"mac":")" + hmac_sha256_hex(key, body) + "\"}");
  const std::string second = sealer.seal(R"({"type":"kill"})");
  EXPECT_EQ(sealer.seal("{}").substr(0, 8), R"({"n":3,")");

  auto check = [](OrderVerifier& v, const std::string& text) -> std::string {
    auto s = v.verify(text, json::parse(text));
    return s ? "" : s.error().message;
  };
  OrderVerifier verifier(key);
  EXPECT_EQ(check(verifier, first), "");
  EXPECT_NE(check(verifier, first).find("replayed"), std::string::npos);  // the same frame again
  EXPECT_EQ(check(verifier, second), "");
  EXPECT_EQ(verifier.last(), 2);

  OrderVerifier fresh(key);
  EXPECT_EQ(check(fresh, second), "");  // gaps are allowed, going back is not
  EXPECT_NE(check(fresh, first).find("replayed or out of order"), std::string::npos);

  OrderVerifier other(session_key("other-key", std::string(64, 'a'), std::string(64, 'b'), "h:1"));
  EXPECT_NE(check(other, first).find("bad MAC"), std::string::npos);
  EXPECT_EQ(other.last(), 0);  // a refused message does not move the counter
  EXPECT_EQ(check(other, R"({"n":1,"type":"launch","v":1})"), "no MAC");
  std::string tampered = first;
  tampered.replace(tampered.find("launch"), 6, "lunch!");
  EXPECT_NE(check(verifier, tampered).find("bad MAC"), std::string::npos);
  // A MAC over a message without a counter is no order.
  const std::string no_n = R"({"type":"kill"})";
  const std::string unsealed = R"({"type":"kill","mac":")" + hmac_sha256_hex(key, no_n) + "\"}";
  EXPECT_EQ(check(fresh, unsealed), "no counter \"n\"");
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
  Register r{"h:1", {{"n1", json::object(), {{"9.1", 9, {0}, {42}}}, HealthState{false, "disk"}, "m1", std::nullopt}}, {}, {}, std::nullopt};
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

TEST(ProtocolKeyFile, CredentialFilesOthersCanReadAreRefused) {
  char dir_template[] = "/tmp/protocol_test_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string path = std::string(dir_template) + "/node.key";
  std::ofstream(path) << key_file_line("n1", std::string(64, 'a'));
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  auto good = read_private_file(path);
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_TRUE(read_key_files({path}, {"n1"}));
  for (mode_t mode : {0640, 0604, 0620, 0644}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    auto bad = read_key_files({path}, {"n1"});
    ASSERT_FALSE(bad) << std::oct << mode;
    EXPECT_NE(bad.error().message.find(path), std::string::npos) << bad.error().message;
    EXPECT_NE(bad.error().message.find("chmod 600"), std::string::npos) << bad.error().message;
  }
  EXPECT_FALSE(read_private_file(dir_template));  // not a regular file
  EXPECT_FALSE(read_private_file(path + ".missing"));
  std::filesystem::remove_all(dir_template);
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
