// The route-role test (issue 32): who may call each HTTP route. The scheduler's route table (printed by
// `railyard-scheduler routes`) must equal the table below, route for route, so a route whose role is
// loosened (or a new route) fails here until this file agrees; then every route of the code's table is
// called, on a scheduler with and one without --private, with no token, another user's token, the job
// owner's and an admin's, and each answer is checked against what the role allows (this file's role, the
// code's for a route this file lacks): 401 without a needed token, 403 for a caller the role refuses,
// anything but 401/403/405/500 for one it lets through.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "tests/daemon_client.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;

const std::string kBin = RAILYARD_SCHEDULER_BIN;

struct Expected {
  const char* role;
  const char* body;  // sent with the request ("" = none)
};

// The roles this test holds, keyed by "METHOD pattern". Loosening one in the code fails the first test.
const std::map<std::string, Expected> kExpected = {
    {"GET /healthz", {"anonymous", ""}},
    {"GET /api/v1/leader", {"anonymous", ""}},
    {"GET /metrics", {"read", ""}},
    {"GET /api/v1/health", {"read", ""}},
    {"GET /api/v1/version", {"read", ""}},
    {"GET /api/v1/metrics", {"read", ""}},
    {"GET /api/v1/topology", {"read", ""}},
    {"GET /api/v1/utilization", {"read", ""}},
    {"GET /api/v1/accounting", {"read", ""}},
    {"GET /api/v1/fairshare", {"read", ""}},
    {"GET /api/v1/quotas", {"read", ""}},
    {"POST /api/v1/quotas/{kind}/{name}", {"admin", R"({"gpus": 64})"}},
    {"POST /api/v1/quotas/{kind}/{name}/lift", {"admin", ""}},
    {"GET /api/v1/nodes", {"read", ""}},
    {"GET /api/v1/nodes/{name}", {"read", ""}},
    {"POST /api/v1/nodes/{name}/drain", {"admin", R"({"reason": "walk"})"}},
    {"POST /api/v1/nodes/{name}/resume", {"admin", ""}},
    {"POST /api/v1/nodes/{name}/remove", {"admin", ""}},
    {"POST /api/v1/nodes/{name}/key", {"admin", R"({"force": true})"}},
    {"GET /api/v1/nodes/{name}/images", {"read", ""}},
    {"POST /api/v1/nodes/{name}/images", {"admin", R"({"image": "localhost/walk:1"})"}},
    {"GET /api/v1/whoami", {"user", ""}},
    {"GET /api/v1/jobs", {"job-read", ""}},
    {"POST /api/v1/jobs", {"user", R"({"gpus": 1})"}},
    {"POST /api/v1/jobs:batch", {"user", R"({"jobs": [{"gpus": 1}]})"}},
    {"GET /api/v1/jobs/{id}", {"job-read", ""}},
    {"GET /api/v1/jobs/{id}/events", {"job-read", ""}},
    {"GET /api/v1/jobs/{id}/metrics", {"job-read", ""}},
    {"GET /api/v1/jobs/{id}/runs", {"job-read", ""}},
    {"GET /api/v1/jobs/{id}/logs", {"owner-or-admin", ""}},
    {"POST /api/v1/jobs/{id}/cancel", {"owner-or-admin", ""}},
    {"POST /api/v1/jobs/{id}/hold", {"owner-or-admin", ""}},
    {"POST /api/v1/jobs/{id}/release", {"owner-or-admin", ""}},
    {"POST /api/v1/allocs/{alloc}/exec", {"exec-token", R"({"node": "n1", "argv": ["true"]})"}},
    {"GET /api/v1/tokens", {"admin", ""}},
    {"POST /api/v1/tokens", {"admin", R"({"user": "dora", "expires": "1d"})"}},
    {"POST /api/v1/tokens/{id}/revoke", {"admin", ""}},
    {"GET /api/v1/audit", {"admin", ""}},
    {"GET /api/v1/watch", {"read", ""}},
    {"GET /api/v1/agent", {"agent", ""}},
    {"GET /*", {"anonymous", ""}},
    {"HEAD /*", {"anonymous", ""}},
};

json code_routes() { return json::parse(run_capture(kBin + " routes"), nullptr, false); }

TEST(RouteRoles, CodeTableMatchesTheRolesThisTestHolds) {
  const json routes = code_routes();
  ASSERT_TRUE(routes.is_array()) << "railyard-scheduler routes did not print a JSON array";
  std::set<std::string> seen;
  for (const auto& r : routes) {
    const std::string key = r["method"].get<std::string>() + " " + r["path"].get<std::string>();
    EXPECT_TRUE(seen.insert(key).second) << key << " appears twice in the route table";
    auto it = kExpected.find(key);
    if (it == kExpected.end()) {
      ADD_FAILURE() << key << " (role " << r["role"]
                    << ") is in the route table but not in this test: add it "
                    << "to kExpected with the role it must have";
      continue;
    }
    EXPECT_EQ(r["role"].get<std::string>(), it->second.role)
        << key << ": the code's role differs from this test's";
  }
  for (const auto& [key, e] : kExpected)
    EXPECT_TRUE(seen.count(key)) << key << " is in this test but no longer in the route table";
}

// The tokens, the job and the scheduler a walk uses.
class RouteWalk : public ::testing::TestWithParam<bool> {  // the parameter: --private
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("two.json")) << kOneLeafCluster;
    std::filesystem::create_directories(dir_.file("web"));
    std::ofstream(dir_.file("web/index.html")) << "<!doctype html><title>railyard</title>";
    alice_ = create_token(kBin, db(), "alice", "user");
    bob_ = create_token(kBin, db(), "bob", "user");
    root_ = create_token(kBin, db(), "root", "admin");
    create_token(kBin, db(), "carol", "user");  // revoked by the walk
    std::vector<std::string> args{"--listen",  "127.0.0.1:0",         "--db",       db(),
                                  "--cluster", dir_.file("two.json"), "--web-root", dir_.file("web")};
    if (GetParam()) args.push_back("--private");
    daemon_ = std::make_unique<DaemonProcess>(kBin, args);
    ASSERT_GT(daemon_->port(), 0);
  }
  std::string db() const { return dir_.file("state.db"); }

  TempDir dir_;
  std::string alice_, bob_, root_;
  std::unique_ptr<DaemonProcess> daemon_;
};

// What a caller may get from a route of `role`: true = let through, false = refused.
bool allowed(const std::string& role, const std::string& caller, bool private_reads, bool job_route) {
  if (role == "anonymous") return true;
  if (role == "read") return caller != "none" || !private_reads;
  if (role == "job-read") {
    if (!private_reads) return true;
    return caller == "alice" || caller == "root" || (caller == "bob" && !job_route);
  }
  if (role == "user") return caller != "none";
  if (role == "owner-or-admin") return caller == "alice" || caller == "root";
  if (role == "admin") return caller == "root";
  return false;  // exec-token, agent: no API token is enough
}

TEST_P(RouteWalk, EveryRouteAnswersEachCallerAsItsRoleSays) {
  const bool private_reads = GetParam();
  HttpClient c(daemon_->port());
  auto a = c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "name": "walk"})", alice_);
  ASSERT_EQ(a.status, 201) << a.body;
  const std::string job = std::to_string(a.json()["id"].get<int64_t>());
  std::string carol_id;
  const json tokens = c.request("GET", "/api/v1/tokens", "", root_).json();
  for (const auto& t : tokens["tokens"])
    if (t["user"] == "carol") carol_id = t["id"];
  ASSERT_FALSE(carol_id.empty());
  const json routes = code_routes();
  ASSERT_TRUE(routes.is_array());
  const std::vector<std::pair<std::string, std::string>> callers = {
      {"none", ""}, {"bob", bob_}, {"alice", alice_}, {"root", root_}};
  for (const auto& r : routes) {
    const std::string method = r["method"], pattern = r["path"];
    const std::string key = method + " " + pattern;
    // The role this test holds where it has one (so a loosened role fails here too), else the code's.
    const auto it = kExpected.find(key);
    const std::string role = it != kExpected.end() ? it->second.role : r["role"].get<std::string>();
    std::string path = pattern;
    auto put = [&](const std::string& name, const std::string& value) {
      if (auto at = path.find(name); at != std::string::npos) path.replace(at, name.size(), value);
    };
    put("{id}", pattern.find("/tokens/") != std::string::npos ? carol_id : job);
    put("{kind}", "user");
    put("{name}", "n2");
    put("{alloc}", job + ".1");
    put("/*", "/index.html");
    const std::string body = it == kExpected.end() ? "" : it->second.body;
    const bool job_route = pattern.find("/jobs/{id}") != std::string::npos;
    // HEAD answers carry no body, which this client would wait for; GET /* covers the same handler.
    if (method == "HEAD") continue;
    for (const auto& [who, token] : callers) {
      const HttpResult res = c.request(method, path, body, token);
      SCOPED_TRACE(key + " as " + who + (private_reads ? " (--private)" : "") + ": " +
                   std::to_string(res.status) + " " + res.body.substr(0, 300));
      ASSERT_NE(res.status, 0) << "no answer";
      EXPECT_NE(res.status, 405);
      EXPECT_NE(res.status, 500);
      EXPECT_EQ(res.body.find("no such route"), std::string::npos);
      if (role == "exec-token" || role == "agent") {
        EXPECT_NE(res.status / 100, 2) << "an API token must not pass for an exec token or an agent";
        continue;
      }
      if (allowed(role, who, private_reads, job_route)) {
        EXPECT_NE(res.status, 401);
        EXPECT_NE(res.status, 403);
      } else {
        EXPECT_EQ(res.status, who == "none" ? 401 : 403);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PublicAndPrivate, RouteWalk, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Private" : "Public"; });

}  // namespace
}  // namespace railyard::testing
