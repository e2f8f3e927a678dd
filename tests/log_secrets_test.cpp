// Tokens never appear in the scheduler's log (issue 10, security): the daemon runs with its stdout and
// stderr in a file; good, wrong and malformed bearer tokens go through every kind of route (submit, bad
// body, job and node actions, logs, whoami, a watch request without the upgrade), and the log is searched
// for them; also tokens made and revoked through the API, and a token sent in a URL.
#include <gtest/gtest.h>

#include "tests/fault_util.hpp"

namespace railyard::testing {
namespace {

TEST(LogSecrets, TokensNeverAppearInTheSchedulerLog) {
  TempDir d;
  const std::string db = d.file("s.db"), log = d.file("sched.log");
  const std::string admin = create_token(RAILYARD_SCHEDULER_BIN, db, "root", "admin");
  const std::string user = create_token(RAILYARD_SCHEDULER_BIN, db, "ada", "user");
  ASSERT_FALSE(admin.empty());
  ChildProcess sched(RAILYARD_SCHEDULER_BIN,
                     {"--listen", "127.0.0.1:0", "--db", db, "--preset", "dgx-h100-superpod", "--sus", "1",
                      "--web-root", "none"},
                     log);
  int port = 0;
  until([&] {
    const std::string text = read_small(log);
    const size_t at = text.find("listening on ");
    if (at == std::string::npos || text.find('\n', at) == std::string::npos) return false;
    port = std::atoi(text.c_str() + text.find(':', at + 13) + 1);
    return true;
  });
  ASSERT_GT(port, 0) << read_small(log);

  const std::string wrong = "ry_" + std::string(40, 'x');
  const std::string odd = "not-even-a-railyard-token-0123456789";
  HttpClient c(port);
  const auto sub = c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "command": ["true"]})", user);
  ASSERT_EQ(sub.status, 201) << sub.body;
  const std::string id = std::to_string(sub.json()["id"].get<int64_t>());
  for (const std::string& token : {admin, user, wrong, odd}) {
    c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "command": ["true"]})", token);
    c.request("POST", "/api/v1/jobs", "{broken json", token);
    c.request("POST", "/api/v1/jobs/" + id + "/hold", "", token);
    c.request("POST", "/api/v1/jobs/" + id + "/release", "", token);
    c.request("POST", "/api/v1/nodes/dgx001/drain", R"({"reason": "check"})", token);
    c.request("POST", "/api/v1/nodes/dgx001/resume", "", token);
    c.request("GET", "/api/v1/jobs/" + id + "/logs", "", token);
    c.request("GET", "/api/v1/whoami", "", token);
    c.request("GET", "/api/v1/watch", "", token);
  }
  EXPECT_EQ(c.request("GET", "/api/v1/whoami", "", wrong).status, 401);
  // Tokens made and revoked through the API (issue 32), and tokens sent in a URL, which are refused.
  const auto made = c.request("POST", "/api/v1/tokens", R"({"user": "bo", "expires": "1d"})", admin);
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string fresh = made.json()["token"];
  c.request("GET", "/api/v1/whoami", "", fresh);
  c.request("GET", "/api/v1/tokens", "", admin);
  c.request("POST", "/api/v1/tokens/" + made.json()["id"].get<std::string>() + "/revoke", "", admin);
  c.request("GET", "/api/v1/whoami", "", fresh);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs?token=" + user).status, 400);
  sched.stop(SIGTERM);
  const std::string text = read_small(log);
  EXPECT_NE(text.find("listening on"), std::string::npos);  // the log is the daemon's
  EXPECT_NE(text.find("by root"), std::string::npos) << text;  // actions are logged, with the user
  for (const std::string& token : {admin, user, wrong, odd, fresh})
    EXPECT_EQ(text.find(token), std::string::npos) << "token in the log:\n" << text;
}

}  // namespace
}  // namespace railyard::testing
