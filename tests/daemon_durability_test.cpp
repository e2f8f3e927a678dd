// Integration tests of `railyard-scheduler` across restarts: the log checkpointed into the database file, and
// acknowledged submits and array tasks kept through a kill -9 (the real binary, driven over HTTP).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/daemon_client.hpp"
#include "tests/daemon_fixture.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;

using namespace daemon_fixture;  // NOLINT(google-build-using-namespace): the shared fixture

// The log's checkpoints run on a thread of their own (Service::checkpoint_on_thread): they still run, so the
// rows reach the database file (which a log of 1,000 frames or more never would without one), and all of
// them are there after a restart.
TEST_F(DaemonTest, TheLogIsCheckpointedIntoTheDatabase) {
  auto d = start();
  HttpClient c(d->port());
  const auto size = [](const std::string& f) { return std::filesystem::file_size(f); };
  const auto empty = size(db());
  json jobs = json::array();
  for (int i = 0; i < 200; ++i)
    jobs.push_back({{"gpus", 1}, {"command", {"sh", "-c", std::string(4000, 'x')}}});
  for (int batch = 0; batch < 12; ++batch)  // ~200 frames each
    ASSERT_EQ(c.request("POST", "/api/v1/jobs:batch", json{{"jobs", jobs}}.dump(), bob_).status, 201);
  // ~10 MB committed; up to 1,000 frames (~4 MB) may stay in the log until it fills again.
  for (int i = 0; i < 250 && size(db()) < empty + (4u << 20); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(size(db()), empty + (4u << 20)) << "the database file did not grow: no checkpoint ran";
  d.reset();
  auto again = start();
  HttpClient c2(again->port());
  std::istringstream metrics(c2.request("GET", "/metrics").body);
  long long jobs_known = 0;
  for (std::string line; std::getline(metrics, line);)
    if (line.starts_with("railyard_jobs{state=")) jobs_known += std::stoll(line.substr(line.rfind(' ') + 1));
  EXPECT_EQ(jobs_known, 12 * 200);
}

// kill -9 while submits are in flight: every acknowledged job is there after a restart, exactly once; with
// submits acknowledged once synced (the default) and once written to the log (--submit-durability written,
// which a killed process keeps: only a crash of the machine could lose the last of them).
class DaemonKillTest : public DaemonTest, public ::testing::WithParamInterface<const char*> {};

INSTANTIATE_TEST_SUITE_P(Durability, DaemonKillTest, ::testing::Values("synced", "written"));

TEST_P(DaemonKillTest, AcknowledgedSubmitsSurviveKill9) {
  auto d = start({"--submit-durability", GetParam()});
  {
    HttpClient m(d->port());
    const std::string synced = std::string(GetParam()) == "synced" ? "1" : "0";
    EXPECT_NE(m.request("GET", "/metrics").body.find("\nrailyard_submits_synced " + synced + "\n"),
              std::string::npos);
  }
  std::atomic<int> acked{0};
  std::vector<std::vector<int64_t>> ids(4);
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t)
    clients.emplace_back([&, t] {
      HttpClient c(d->port());
      for (int i = 0; i < 100000; ++i) {
        auto r = c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "name": "k"})", alice_);
        if (r.status != 201) return;
        ids[static_cast<size_t>(t)].push_back(r.json()["id"].get<int64_t>());
        ++acked;
      }
    });
  while (acked < 200) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  d->stop(SIGKILL);
  for (auto& t : clients) t.join();

  auto again = start();
  HttpClient c(again->port());
  std::multiset<int64_t> stored;
  std::string after = "0";
  for (;;) {
    auto p = c.request("GET", "/api/v1/jobs?limit=10000&after=" + after).json();
    for (auto& j : p["jobs"]) stored.insert(j["id"].get<int64_t>());
    if (p["next_after"].is_null()) break;
    after = std::to_string(p["next_after"].get<int64_t>());
  }
  size_t total = 0;
  for (auto& v : ids)
    for (int64_t id : v) {
      EXPECT_EQ(stored.count(id), 1u) << "acknowledged job " << id;
      ++total;
    }
  EXPECT_GE(total, 200u);
  EXPECT_GE(stored.size(), total);  // unacknowledged ones in the last commit may be there too
  // New ids continue after the stored ones.
  const int64_t next = submit(c, alice_, R"({"gpus": 1})");
  EXPECT_GT(next, *stored.rbegin());
}

// An array's created tasks are on disk: after a kill -9 the restarted scheduler goes on from them, and the
// tasks it creates next continue the array's indexes without repeating one.
TEST_F(DaemonTest, AnArrayGoesOnAfterKill9WithoutRepeatingAnIndex) {
  auto d = start();
  std::unique_ptr<HttpClient> c = std::make_unique<HttpClient>(d->port());
  const int64_t id = submit(*c, alice_, R"({"gpus": 8, "array": "0-99"})");
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  auto created = [&] { return c->request("GET", path).json()["array_tasks"].value("created", 0); };
  for (int i = 0; i < 200 && created() < 64; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(created(), 64);  // the window: two nodes hold 2 tasks, at least 64 are kept created
  d->stop(SIGKILL);

  auto again = start();
  c = std::make_unique<HttpClient>(again->port());
  EXPECT_EQ(created(), 64);
  auto tasks = [&] {
    return c->request("GET", "/api/v1/jobs?limit=10000&array=" + std::to_string(id)).json()["jobs"];
  };
  int ended = 0;
  for (const auto& t : tasks()) {  // ending five tasks makes room for five more
    if (ended == 5) break;
    const std::string task = "/api/v1/jobs/" + std::to_string(t["id"].get<int64_t>()) + "/cancel";
    EXPECT_EQ(c->request("POST", task, "", alice_).status, 200);
    ++ended;
  }
  for (int i = 0; i < 200 && created() < 69; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const json all = tasks();
  ASSERT_EQ(all.size(), 69u);
  std::set<int> indexes;
  for (const auto& t : all) indexes.insert(t["array_task"].get<int>());
  EXPECT_EQ(indexes.size(), 69u);
  EXPECT_EQ(*indexes.rbegin(), 68);
}

}  // namespace
}  // namespace railyard::testing
