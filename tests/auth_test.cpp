// A cluster many users share (issue 32), against the real scheduler: tokens that expire and are revoked,
// the audit log of mutating requests (and that a submit's row is durable with the submit), tokens refused in
// URLs, --private lists, and duplicate keys refused in a batch as in a single submit.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/fault_util.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;

const std::string kBin = RAILYARD_SCHEDULER_BIN;

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("two.json")) << kOneLeafCluster;
    alice_ = create_token(kBin, db(), "alice", "user");
    bob_ = create_token(kBin, db(), "bob", "user");
    root_ = create_token(kBin, db(), "root", "admin");
  }
  std::string db() const { return dir_.file("state.db"); }
  std::unique_ptr<DaemonProcess> start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--listen",  "127.0.0.1:0",         "--db",       db(),
                                  "--cluster", dir_.file("two.json"), "--web-root", "none"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto d = std::make_unique<DaemonProcess>(kBin, args);
    EXPECT_GT(d->port(), 0);
    return d;
  }
  TempDir dir_;
  std::string alice_, bob_, root_;
};

std::string message(const HttpResult& r) { return r.json()["error"].value("message", ""); }

TEST_F(AuthTest, RevokedTokensAreRefusedWithAClearMessage) {
  auto d = start();
  HttpClient c(d->port());
  auto made = c.request("POST", "/api/v1/tokens", R"({"user": "dora", "expires": "30d"})", root_);
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string dora = made.json()["token"], id = made.json()["id"];
  EXPECT_EQ(made.json()["role"], "user");
  EXPECT_FALSE(made.json()["expires"].is_null());
  EXPECT_EQ(c.request("GET", "/api/v1/whoami", "", dora).json()["user"], "dora");
  // The list names tokens by id, never by secret, and shows the last use.
  auto list = c.request("GET", "/api/v1/tokens", "", root_);
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.body.find("ry_"), std::string::npos) << "a secret in the list: " << list.body;
  bool found = false;
  const json listed = list.json();
  for (const auto& t : listed["tokens"])
    if (t["id"] == id) found = !t["last_used"].is_null() && t["revoked"].is_null();
  EXPECT_TRUE(found) << list.body;
  EXPECT_EQ(c.request("POST", "/api/v1/tokens/" + id + "/revoke", "", alice_).status, 403);
  ASSERT_EQ(c.request("POST", "/api/v1/tokens/" + id + "/revoke", "", root_).status, 200);
  auto refused = c.request("GET", "/api/v1/whoami", "", dora);
  EXPECT_EQ(refused.status, 401);
  EXPECT_NE(message(refused).find("token " + id + " was revoked"), std::string::npos) << refused.body;
  EXPECT_EQ(c.request("POST", "/api/v1/tokens/000000000000/revoke", "", root_).status, 404);
  // A revocation survives a restart.
  d.reset();
  d = start();
  HttpClient c2(d->port());
  EXPECT_EQ(c2.request("GET", "/api/v1/whoami", "", dora).status, 401);
}

TEST_F(AuthTest, ExpiredTokensAreRefusedWithAClearMessage) {
  const std::string brief = create_token(kBin, db(), "eve", "user --expires 1s");
  auto d = start();
  HttpClient c(d->port());
  HttpResult last;
  ASSERT_TRUE(until([&] {
    last = c.request("GET", "/api/v1/whoami", "", brief);
    return last.status == 401;
  })) << last.body;
  EXPECT_NE(message(last).find("expired at"), std::string::npos) << last.body;
  auto bad = c.request("POST", "/api/v1/tokens", R"({"user": "x", "expires": "soon"})", root_);
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(message(bad).find("expires soon"), std::string::npos) << bad.body;
}

TEST_F(AuthTest, TokensInUrlsAreRefused) {
  auto d = start();
  HttpClient c(d->port());
  for (const char* target :
       {"/api/v1/jobs?token=abc", "/api/v1/whoami?access_token=abc", "/index.html?Token=x"}) {
    auto r = c.request("GET", target);
    EXPECT_EQ(r.status, 400) << target;
    EXPECT_NE(message(r).find("not accepted in URLs"), std::string::npos) << r.body;
  }
}

TEST_F(AuthTest, MutatingRequestsAreAuditedAndASubmitsRowIsDurableWithIt) {
  auto d = start();
  HttpClient c(d->port());
  auto sub = c.request("POST", "/api/v1/jobs", R"({"gpus": 1})", alice_);
  ASSERT_EQ(sub.status, 201);
  const std::string job = std::to_string(sub.json()["id"].get<int64_t>());
  auto denied = c.request("POST", "/api/v1/jobs/" + job + "/cancel", "", bob_);
  EXPECT_EQ(denied.status, 403);
  EXPECT_EQ(message(denied), "job " + job + " belongs to alice; only its owner or an admin may cancel it");
  EXPECT_EQ(c.request("POST", "/api/v1/jobs", R"({"gpus": 1})").status, 401);
  EXPECT_EQ(c.request("POST", "/api/v1/nodes/n2/drain", R"({"reason": "fan"})", root_).status, 200);
  EXPECT_EQ(c.request("GET", "/api/v1/audit", "", alice_).status, 403);
  auto audit = c.request("GET", "/api/v1/audit", "", root_);
  ASSERT_EQ(audit.status, 200);
  std::vector<std::string> seen;
  const json rows = audit.json();
  for (const auto& r : rows["rows"]) {
    EXPECT_EQ(r["source"], "127.0.0.1");
    EXPECT_EQ(r["method"], "POST");
    seen.push_back(r["actor"].get<std::string>() + " " + r["target"].get<std::string>() + " " +
                   std::to_string(r["status"].get<int>()));
  }
  const std::vector<std::string> want = {"alice /api/v1/jobs 201", "bob /api/v1/jobs/" + job + "/cancel 403",
                                         " /api/v1/jobs 401", "root /api/v1/nodes/n2/drain 200"};
  EXPECT_EQ(seen, want) << audit.body;
  auto bobs = c.request("GET", "/api/v1/audit?user=bob", "", root_).json()["rows"];
  ASSERT_EQ(bobs.size(), 1u);
  // Killed right after a synced submit: its audit row was in the submit's transaction.
  auto second = c.request("POST", "/api/v1/jobs", R"({"gpus": 2})", bob_);
  ASSERT_EQ(second.status, 201);
  d->stop(SIGKILL);
  d = start();
  HttpClient c2(d->port());
  auto after = c2.request("GET", "/api/v1/audit?user=bob", "", root_).json()["rows"];
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.back()["status"], 201);
  EXPECT_EQ(after.back()["target"], "/api/v1/jobs");
}

TEST_F(AuthTest, PrivateListsShowAUserTheirOwnJobsAndAnAdminAll) {
  auto d = start({"--private"});
  HttpClient c(d->port());
  ASSERT_EQ(c.request("POST", "/api/v1/jobs", R"({"gpus": 1})", alice_).status, 201);
  ASSERT_EQ(c.request("POST", "/api/v1/jobs", R"({"gpus": 1})", bob_).status, 201);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs").status, 401);
  auto mine = c.request("GET", "/api/v1/jobs", "", alice_).json()["jobs"];
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0]["user"], "alice");
  EXPECT_EQ(c.request("GET", "/api/v1/jobs?user=bob", "", alice_).status, 403);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs/2", "", alice_).status, 403);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs", "", root_).json()["jobs"].size(), 2u);
  // Without --private everyone sees every job (as squeue does).
  d.reset();
  d = start();
  HttpClient pub(d->port());
  EXPECT_EQ(pub.request("GET", "/api/v1/jobs").json()["jobs"].size(), 2u);
}

TEST_F(AuthTest, DuplicateKeysAreRefusedInABatchAsInASingleSubmit) {
  auto d = start();
  HttpClient c(d->port());
  auto one = c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "gpus": 2})", alice_);
  EXPECT_EQ(one.status, 400);
  EXPECT_EQ(message(one), R"(duplicate key "gpus" (each field may appear once))");
  auto batch =
      c.request("POST", "/api/v1/jobs:batch", R"({"jobs": [{"gpus": 1}, {"gpus": 1, "gpus": 2}]})", alice_);
  EXPECT_EQ(batch.status, 400);
  EXPECT_EQ(message(batch), R"(jobs[1]: duplicate key "gpus" (each field may appear once))");
  auto env = c.request("POST", "/api/v1/jobs:batch",
                       R"({"jobs": [{"gpus": 1, "env": {"A": "1", "A": "2"}}]})", alice_);
  EXPECT_EQ(message(env), R"(jobs[0].env: duplicate key "A" (each field may appear once))");
  auto top = c.request("POST", "/api/v1/jobs:batch", R"({"jobs": [], "jobs": [{"gpus": 1}]})", alice_);
  EXPECT_EQ(message(top), R"(duplicate key "jobs" (each field may appear once))");
  EXPECT_EQ(c.request("GET", "/api/v1/jobs").json()["jobs"].size(), 0u) << "nothing may be stored";
}

}  // namespace
}  // namespace railyard::testing
