// Integration tests of `railyard-scheduler`: the real binary on 127.0.0.1:0 with a temporary database,
// driven over HTTP (path of the binary: RAILYARD_SCHEDULER_BIN). Restarts and kill -9:
// daemon_durability_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "tests/daemon_client.hpp"
#include "tests/daemon_fixture.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;

using namespace daemon_fixture;  // NOLINT(google-build-using-namespace): the shared fixture

TEST_F(DaemonTest, SubmitListShowCancel) {
  auto d = start();
  HttpClient c(d->port());
  const int64_t id = submit(c, alice_, R"({"name": "t1", "gpus": 1})");
  ASSERT_GT(id, 0);
  json job = wait_placed(c, id);
  EXPECT_EQ(job["name"], "t1");
  EXPECT_EQ(job["user"], "alice");
  EXPECT_EQ(job["state"], "STARTING") << job.dump();
  EXPECT_EQ(job["gpus"], 1);
  EXPECT_EQ(job["gpu_ids"].size(), 1u);
  EXPECT_EQ(job["gpu_type"], "H100");
  EXPECT_TRUE(job["time_to_train_s"].is_null());

  auto list = c.request("GET", "/api/v1/jobs?user=alice").json();
  ASSERT_EQ(list["jobs"].size(), 1u) << list.dump();
  EXPECT_EQ(list["jobs"][0]["id"], id);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs?user=bob").json()["jobs"].size(), 0u);

  auto cancel = c.request("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", "", alice_);
  EXPECT_EQ(cancel.status, 200) << cancel.body;
  EXPECT_EQ(cancel.json()["state"], "CANCELLED");
  auto again = c.request("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", "", alice_);
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(again.json()["error"]["code"], "conflict");
  EXPECT_EQ(c.request("GET", "/api/v1/jobs?state=CANCELLED").json()["jobs"].size(), 1u);
}

// An array over HTTP: one record that lists its tasks' progress, its tasks listed with ?array=, bad arrays
// and forged task fields refused, and a cancel that reaches the tasks.
TEST_F(DaemonTest, ArraysOverTheApi) {
  auto d = start();
  HttpClient c(d->port());
  const int64_t id = submit(c, alice_, R"({"name": "sweep", "gpus": 8, "array": "0-3"})");
  ASSERT_GT(id, 0);
  json tasks;
  for (int i = 0; i < 200; ++i) {  // two tasks fill the two nodes, two wait
    tasks = c.request("GET", "/api/v1/jobs?array=" + std::to_string(id), "", alice_).json()["jobs"];  // env: hers
    if (tasks.size() == 4 && tasks[1]["state"] == "STARTING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(tasks.size(), 4u) << tasks.dump();
  std::set<int> indexes;
  for (const auto& t : tasks) {
    EXPECT_EQ(t["array_job"], id);
    EXPECT_EQ(t["name"], "sweep");
    EXPECT_TRUE(t["array_tasks"].is_null());
    EXPECT_EQ(t["spec"]["env"]["RAILYARD_ARRAY_TASK_ID"], std::to_string(t["array_task"].get<int>()));
    indexes.insert(t["array_task"].get<int>());
  }
  EXPECT_EQ(indexes, (std::set<int>{0, 1, 2, 3}));
  json array = c.request("GET", "/api/v1/jobs/" + std::to_string(id)).json();
  EXPECT_EQ(array["state"], "PENDING");
  EXPECT_TRUE(array["nodes"].empty());
  EXPECT_EQ(array["spec"]["array"], "0-3");
  EXPECT_EQ(array["array_tasks"],
            json({{"total", 4}, {"created", 4}, {"active", 4}, {"completed", 0}, {"failed", 0}}));
  const std::string metrics = c.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find("railyard_array_tasks_total 4\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("railyard_submits_total 1\n"), std::string::npos) << metrics;

  auto bad = c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "array": "5-1"})", alice_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("the range runs backwards"), std::string::npos) << bad.body;
  auto forged = c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "array_job": 1, "array_task": 0})", alice_);
  EXPECT_EQ(forged.status, 400) << forged.body;
  EXPECT_NE(forged.body.find("set by the scheduler"), std::string::npos) << forged.body;
  EXPECT_EQ(c.request("GET", "/api/v1/jobs?array=x").status, 400);

  auto cancel = c.request("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", "", alice_);
  EXPECT_EQ(cancel.status, 200) << cancel.body;
  EXPECT_EQ(cancel.json()["state"], "CANCELLED");
  const json after = c.request("GET", "/api/v1/jobs?array=" + std::to_string(id)).json()["jobs"];
  ASSERT_EQ(after.size(), 4u);
  for (const auto& t : after) EXPECT_EQ(t["state"], "CANCELLED") << t.dump();
}

TEST_F(DaemonTest, HoldAndRelease) {
  auto d = start();
  HttpClient c(d->port());
  const int64_t big = submit(c, alice_, R"({"gpus": 16})");
  EXPECT_EQ(wait_placed(c, big)["state"], "STARTING");
  const int64_t id = submit(c, alice_, R"({"gpus": 8})");
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  EXPECT_EQ(wait_placed(c, id)["state"], "PENDING");
  EXPECT_EQ(c.request("POST", path + "/hold", "", alice_).json()["state"], "HELD");
  EXPECT_EQ(c.request("POST", path + "/hold", "", alice_).status, 409);
  // The pass after the hold parks it (JobTable::park); the release takes it back into the passes.
  auto soon = [](const std::function<bool()>& met) {
    for (int i = 0; i < 250 && !met(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return met();
  };
  auto parked = [&](const std::string& n) {
    return c.request("GET", "/metrics").body.find("\nrailyard_jobs_parked " + n + "\n") != std::string::npos;
  };
  auto reason = [&] {  // null until a pass gives one
    const auto j = c.request("GET", path).json()["reason"];
    return j.is_string() ? j.get<std::string>() : std::string();
  };
  EXPECT_TRUE(soon([&] { return parked("1"); }));
  EXPECT_EQ(reason().rfind("held", 0), 0u);
  EXPECT_EQ(c.request("POST", path + "/release", "", admin_).json()["state"], "PENDING");
  EXPECT_TRUE(parked("0"));
  EXPECT_TRUE(soon([&] { return reason().rfind("resources", 0) == 0; })) << reason();
}

TEST_F(DaemonTest, AuthErrors) {
  auto d = start();
  HttpClient c(d->port());
  auto none = c.request("POST", "/api/v1/jobs", R"({"gpus": 1})");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.json()["error"]["code"], "unauthorized");
  EXPECT_EQ(c.request("POST", "/api/v1/jobs", R"({"gpus": 1})", "ry_not_a_token").status, 401);
  const int64_t id = submit(c, alice_, R"({"gpus": 1})");
  auto other = c.request("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", "", bob_);
  EXPECT_EQ(other.status, 403) << other.body;
  EXPECT_EQ(other.json()["error"]["code"], "forbidden");
  EXPECT_EQ(c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "user": "alice"})", bob_).status, 403);
  EXPECT_EQ(c.request("POST", "/api/v1/nodes/n1/drain", R"({"reason": "x"})", bob_).status, 403);
  EXPECT_EQ(c.request("POST", "/api/v1/nodes/n1/drain", R"({"reason": "x"})").status, 401);

  auto drain = c.request("POST", "/api/v1/nodes/n2/drain", R"({"reason": "bad fan"})", admin_);
  EXPECT_EQ(drain.status, 200) << drain.body;
  auto nodes = c.request("GET", "/api/v1/nodes").json()["nodes"];
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1]["health"], "drain");
  EXPECT_EQ(nodes[1]["reason"], "bad fan");
  EXPECT_EQ(c.request("POST", "/api/v1/nodes/n9/drain", "", admin_).status, 404);
  EXPECT_EQ(c.request("POST", "/api/v1/nodes/n2/resume", "", admin_).status, 200);
  EXPECT_EQ(c.request("GET", "/api/v1/nodes").json()["nodes"][1]["health"], "up");
  // Admins may act on anyone's job.
  EXPECT_EQ(c.request("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", "", admin_).status, 200);
  // whoami answers about the token, and needs one even though it is a read.
  auto me = c.request("GET", "/api/v1/whoami", "", bob_);
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(me.json()["user"], "bob");
  EXPECT_EQ(me.json()["role"], "user");
  EXPECT_EQ(c.request("GET", "/api/v1/whoami", "", admin_).json()["role"], "admin");
  EXPECT_EQ(c.request("GET", "/api/v1/whoami").status, 401);
}

TEST_F(DaemonTest, BadRequestsAreAnsweredNotCrashedOn) {
  auto d = start();
  HttpClient c(d->port());
  auto expect_400 = [&](const std::string& body, const std::string& needle) {
    auto r = c.request("POST", "/api/v1/jobs", body, alice_);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_EQ(r.json()["error"]["code"], "invalid_argument") << r.body;
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  };
  expect_400(R"({"gpus": 1,)", "JSON");
  expect_400(R"({"gpus": 1, "gpuz": 2})", "gpuz");
  expect_400(R"({"gpus": -4})", "gpus");
  expect_400(R"({"nodes": 1, "gpus_per_node": 9})", "gpus_per_node");
  expect_400(R"([1, 2])", "");
  auto huge = c.request("POST", "/api/v1/jobs", std::string(10 << 20, ' '), alice_);
  EXPECT_EQ(huge.status, 413) << huge.body;
  EXPECT_EQ(huge.json()["error"]["code"], "payload_too_large");
  auto batch = c.request("POST", "/api/v1/jobs:batch",
                         R"({"jobs": [{"gpus": 1}, {"gpus": 1, "qos": "urgent"}]})", alice_);
  EXPECT_EQ(batch.status, 400);
  EXPECT_NE(batch.body.find("jobs[1]"), std::string::npos) << batch.body;
  // Hostile shapes: answered at once, without deep recursion or quadratic parsing.
  std::string many = R"({"gpus": 1, "x": [)";
  for (int i = 0; i < 200'000; ++i) many += "{},";
  many += "{}]}";
  expect_400(many, "unknown field");  // parsed in linear time, then refused for its field
  auto deep =
      c.request("POST", "/api/v1/jobs:batch", std::string(100'000, '[') + std::string(100'000, ']'), alice_);
  EXPECT_EQ(deep.status, 400) << deep.body;
  EXPECT_NE(deep.body.find("nested deeper"), std::string::npos) << deep.body;
  EXPECT_EQ(c.request("GET", "/api/v1/nope").status, 404);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs/%FF%FE").status, 404);  // invalid UTF-8 echoed in the message
  EXPECT_EQ(c.request("GET", "/api/v1/jobs?state=%C3%28").status, 400);
  EXPECT_EQ(c.request("POST", "/api/v1/nodes/%FF/drain", "", admin_).status, 404);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs/12345").status, 404);
  EXPECT_EQ(c.request("DELETE", "/api/v1/jobs", "", alice_).status, 405);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs?limit=0").status, 400);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs?state=SLEEPING").status, 400);
  // Still alive and nothing was stored.
  EXPECT_EQ(c.request("GET", "/api/v1/health").status, 200);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs").json()["jobs"].size(), 0u);
}

// HTTP/1.1 pipelining: requests sent without waiting are answered in order. Submits run together (their
// commit is shared); anything else waits for the requests before it, so it sees what they did.
TEST_F(DaemonTest, PipelinedRequestsAreAnsweredInOrder) {
  auto d = start();
  HttpClient c(d->port());
  const std::string job = R"({"name": "p", "gpus": 1})";
  std::string bytes;
  for (int i = 0; i < 20; ++i) bytes += HttpClient::request_text("POST", "/api/v1/jobs", job, alice_);
  bytes += HttpClient::request_text("GET", "/api/v1/jobs/20");
  bytes += HttpClient::request_text("POST", "/api/v1/jobs", "{\"gpus\": ", alice_);
  bytes += HttpClient::request_text("POST", "/api/v1/jobs/1/cancel", "", alice_);
  bytes += HttpClient::request_text("POST", "/api/v1/jobs:batch", R"({"jobs": [{"gpus": 1}, {"gpus": 2}]})", alice_);
  bytes += HttpClient::request_text("GET", "/api/v1/jobs/1");
  ASSERT_TRUE(c.send_raw(bytes));
  for (int i = 1; i <= 20; ++i) {
    auto r = c.receive();
    ASSERT_EQ(r.status, 201) << i << ": " << r.body;
    EXPECT_EQ(r.json().value("id", 0), i);
  }
  auto shown = c.receive();
  ASSERT_EQ(shown.status, 200) << shown.body;
  EXPECT_EQ(shown.json().value("name", ""), "p");
  auto bad = c.receive();
  EXPECT_EQ(bad.status, 400) << bad.body;
  auto cancelled = c.receive();
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(cancelled.json().value("state", ""), "CANCELLED");
  auto batch = c.receive();
  ASSERT_EQ(batch.status, 201) << batch.body;
  EXPECT_EQ(batch.json()["ids"], json::array({21, 22}));
  auto after = c.receive();
  EXPECT_EQ(after.json().value("state", ""), "CANCELLED");
  // The connection is still usable the ordinary way.
  EXPECT_EQ(c.request("GET", "/api/v1/jobs/22").status, 200);
}

// A pipelined request the server refuses early (413) is answered after the ones before it, then the
// connection closes; the submits before it are kept.
TEST_F(DaemonTest, PipelinedOversizedBodyIsAnsweredInItsTurn) {
  auto d = start();
  HttpClient c(d->port());
  const std::string job = R"({"gpus": 1})";
  std::string bytes = HttpClient::request_text("POST", "/api/v1/jobs", job, alice_) +
                      HttpClient::request_text("POST", "/api/v1/jobs", job, alice_);
  bytes += "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string((1 << 20) + 1) + "\r\n\r\n{";
  ASSERT_TRUE(c.send_raw(bytes));
  EXPECT_EQ(c.receive().status, 201);
  EXPECT_EQ(c.receive().status, 201);
  EXPECT_EQ(c.receive().status, 413);
  HttpClient other(d->port());
  auto list = other.request("GET", "/api/v1/jobs").json();
  EXPECT_EQ(list["jobs"].size(), 2u) << list.dump();
}

TEST_F(DaemonTest, SixteenGpusSpanBothNodes) {
  auto d = start();
  HttpClient c(d->port());
  const int64_t id = submit(c, alice_, R"({"name": "wide", "gpus": 16})");
  json job = wait_placed(c, id);
  EXPECT_EQ(job["state"], "STARTING") << job.dump();
  EXPECT_EQ(job["nodes"], json({"n1", "n2"}));
  EXPECT_EQ(job["gpu_ids"].size(), 16u);
  EXPECT_EQ(job["leaves_spanned"], 2);
  EXPECT_EQ(job["min_leaves"], 2);
  // The cost model's estimate for the placement: two nodes under the spine, 1 GiB allreduce over IB.
  const json& e = job["estimate"];
  ASSERT_TRUE(e.is_object()) << job.dump();
  EXPECT_EQ(e["allreduce_bytes"], 1024 * 1024 * 1024);
  EXPECT_EQ(e["span"], "spine");
  EXPECT_GT(e["seconds"].get<double>(), 0);
  EXPECT_EQ(e["seconds"], std::min(e["ring_seconds"].get<double>(), e["tree_seconds"].get<double>()));
  EXPECT_GT(e["bus_gbytes_s"].get<double>(), 0);
  EXPECT_GT(e["bottleneck_gbits_s"].get<double>(), 0);
  EXPECT_TRUE(e["rail_aligned"].get<bool>());
  EXPECT_FALSE(c.request("GET", "/api/v1/jobs").json()["jobs"][0].contains("estimate")) << "show route only";
  const int64_t next = submit(c, alice_, R"({"gpus": 1})");
  json waiting = wait_placed(c, next);
  EXPECT_EQ(waiting["state"], "PENDING");
  EXPECT_NE(waiting["reason"].get<std::string>().find("resources"), std::string::npos) << waiting.dump();
  EXPECT_TRUE(waiting["estimate"].is_null()) << "never placed: no estimate";
  auto metrics = c.request("GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("railyard_gpus_allocated 16"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("railyard_queue_length 1"), std::string::npos);
  EXPECT_NE(metrics.body.find("railyard_submits_total 2"), std::string::npos);
}

TEST_F(DaemonTest, BatchAndPaging) {
  auto d = start();
  HttpClient c(d->port());
  json jobs = json::array();
  for (int i = 0; i < 250; ++i) jobs.push_back({{"name", "b" + std::to_string(i)}, {"gpus", 1}});
  auto r = c.request("POST", "/api/v1/jobs:batch", json{{"jobs", jobs}}.dump(), bob_);
  ASSERT_EQ(r.status, 201) << r.body;
  ASSERT_EQ(r.json()["ids"].size(), 250u);
  std::set<int64_t> seen;
  std::string after = "0";
  for (int page = 0; page < 10; ++page) {
    auto p = c.request("GET", "/api/v1/jobs?limit=100&user=bob&after=" + after).json();
    for (auto& j : p["jobs"]) seen.insert(j["id"].get<int64_t>());
    if (p["next_after"].is_null()) break;
    after = std::to_string(p["next_after"].get<int64_t>());
  }
  EXPECT_EQ(seen.size(), 250u);
  json too_many = json::array();
  for (int i = 0; i < 10'001; ++i) too_many.push_back({{"gpus", 1}});
  EXPECT_EQ(c.request("POST", "/api/v1/jobs:batch", json{{"jobs", too_many}}.dump(), bob_).status, 400);
}

// order=desc reads newest first; before= and after= bound the ids (exclusive) in either order, so the
// newest page is one request and a page of 10 reads the same whatever the history behind it.
TEST_F(DaemonTest, ListNewestFirstWithBeforeCursor) {
  auto d = start();
  HttpClient c(d->port());
  json jobs = json::array();
  for (int i = 0; i < 30; ++i) jobs.push_back({{"name", i % 3 == 0 ? "tri" : "other"}, {"gpus", 1}});
  auto r = c.request("POST", "/api/v1/jobs:batch", json{{"jobs", jobs}}.dump(), bob_);
  ASSERT_EQ(r.status, 201) << r.body;
  auto ids = [](const json& page) {
    std::vector<int64_t> out;
    for (const auto& j : page["jobs"]) out.push_back(j["id"].get<int64_t>());
    return out;
  };
  auto newest = c.request("GET", "/api/v1/jobs?order=desc&limit=10").json();
  EXPECT_EQ(ids(newest), (std::vector<int64_t>{30, 29, 28, 27, 26, 25, 24, 23, 22, 21})) << newest.dump();
  EXPECT_EQ(newest["next_before"], 21);
  EXPECT_FALSE(newest.contains("next_after"));
  // Walking back with before= visits every job once, newest first.
  std::vector<int64_t> seen;
  std::string before = "";
  for (int page = 0; page < 10; ++page) {
    auto p = c.request("GET", "/api/v1/jobs?order=desc&limit=7" + before).json();
    for (auto id : ids(p)) seen.push_back(id);
    if (p["next_before"].is_null()) break;
    before = "&before=" + std::to_string(p["next_before"].get<int64_t>());
  }
  ASSERT_EQ(seen.size(), 30u);
  EXPECT_TRUE(std::is_sorted(seen.rbegin(), seen.rend())) << ::testing::PrintToString(seen);
  // Filters apply before the limit; both bounds are exclusive and combine with either order.
  auto tri = c.request("GET", "/api/v1/jobs?order=desc&name=tri&before=28&limit=3").json();
  EXPECT_EQ(ids(tri), (std::vector<int64_t>{25, 22, 19}));
  EXPECT_EQ(tri["next_before"], 19);
  EXPECT_EQ(ids(c.request("GET", "/api/v1/jobs?after=10&before=14").json()),
            (std::vector<int64_t>{11, 12, 13}));
  EXPECT_EQ(ids(c.request("GET", "/api/v1/jobs?order=desc&after=10&before=14").json()),
            (std::vector<int64_t>{13, 12, 11}));
  auto asc = c.request("GET", "/api/v1/jobs?order=asc&before=3").json();
  EXPECT_EQ(ids(asc), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(asc["next_after"].is_null());
  auto last = c.request("GET", "/api/v1/jobs?order=desc&before=1").json();
  EXPECT_TRUE(last["jobs"].empty());
  EXPECT_TRUE(last["next_before"].is_null());
  // Bad values: 400 naming the parameter.
  for (const std::string q : {"order=newest", "order=", "before=abc", "before=-1", "before=", "after=x7"}) {
    auto bad = c.request("GET", "/api/v1/jobs?" + q);
    EXPECT_EQ(bad.status, 400) << q << ": " << bad.body;
    const std::string message = bad.json()["error"]["message"].get<std::string>();
    EXPECT_EQ(message.rfind(q.substr(0, q.find('=') + 1), 0), 0u) << q << ": " << message;
    EXPECT_EQ(bad.json()["error"]["code"], "invalid_argument");
  }
}

// GET /utilization derives GPUs busy over time from the job history: the 16-GPU job counts from its
// start_time on, nothing before.
TEST_F(DaemonTest, UtilizationFromJobHistory) {
  auto d = start();
  HttpClient c(d->port());
  json job = wait_placed(c, submit(c, alice_, R"({"gpus": 16})"));
  ASSERT_TRUE(job["start_time"].is_number()) << job.dump();
  const int64_t t = job["start_time"].get<int64_t>();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the daemon's clock passes t + 1
  auto u = c.request("GET", "/api/v1/utilization?since=" + std::to_string(t - 2) + "&until=" +
                                std::to_string(t + 1) + "&step=1");
  ASSERT_EQ(u.status, 200) << u.body;
  EXPECT_EQ(u.json()["gpus"], 16);
  EXPECT_EQ(u.json()["samples"], json::parse("[[" + std::to_string(t - 2) + ", 0.0], [" + std::to_string(t - 1) +
                                             ", 0.0], [" + std::to_string(t) + ", 16.0]]"))
      << u.body;
  EXPECT_GE(c.request("GET", "/api/v1/utilization").json()["samples"].size(), 360u);  // last hour, 10 s steps
  for (const std::string q : {"step=0", "step=1&since=0", "since=x", "until=-5"}) {
    auto bad = c.request("GET", "/api/v1/utilization?" + q);
    EXPECT_EQ(bad.status, 400) << q << ": " << bad.body;
  }
}

TEST_F(DaemonTest, ReadRoutes) {
  auto d = start();
  HttpClient c(d->port());
  EXPECT_EQ(c.request("GET", "/api/v1/health").json()["status"], "ok");
  EXPECT_EQ(c.request("GET", "/api/v1/version").json()["api"], "v1");
  auto topo = c.request("GET", "/api/v1/topology");
  EXPECT_EQ(topo.status, 200);
  EXPECT_EQ(topo.json()["name"], "two");
  EXPECT_EQ(c.request("POST", "/api/v1/health", "", alice_).status, 405);
}

TEST_F(DaemonTest, PrivateModeClosesReads) {
  auto d = start({"--private"});
  HttpClient c(d->port());
  EXPECT_EQ(c.request("GET", "/api/v1/jobs").status, 401);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs", "", bob_).status, 200);
}

TEST_F(DaemonTest, ConfigFileKeysWithFlagsWinning) {
  std::ofstream(dir_.file("conf.json")) << json{
      {"listen", "127.0.0.1:1"},
      {"db", db()},
      {"cluster", dir_.file("two.json")},
      {"private", true}}.dump();
  DaemonProcess d(kBin, {"--config", dir_.file("conf.json"), "--listen", "127.0.0.1:0"});
  ASSERT_GT(d.port(), 1);
  HttpClient c(d.port());
  EXPECT_EQ(c.request("GET", "/api/v1/nodes").status, 401);                           // private from the file
  EXPECT_EQ(c.request("GET", "/api/v1/nodes", "", bob_).json()["nodes"].size(), 2u);  // cluster from the file
}

TEST_F(DaemonTest, EventsAccountingNodeShowFiltersAndGuardedRoutes) {
  auto d = start();
  HttpClient c(d->port());
  const int64_t a = submit(c, alice_, R"({"name": "one", "gpus": 8})");
  const int64_t b = submit(c, bob_, R"({"name": "two", "gpus": 1, "project": "p2"})");
  wait_placed(c, a);
  wait_placed(c, b);
  // List filters: a comma list of states (any case), user, name.
  auto list = c.request("GET", "/api/v1/jobs?state=starting,PENDING&name=two").json();
  ASSERT_EQ(list["jobs"].size(), 1u) << list.dump();
  EXPECT_EQ(list["jobs"][0]["id"], b);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs?state=RUNNING,bogus").status, 400);
  // The audit log names who did what.
  auto events = c.request("GET", "/api/v1/jobs/" + std::to_string(a) + "/events").json();
  ASSERT_GE(events["events"].size(), 2u) << events.dump();
  EXPECT_EQ(events["events"][0]["actor"], "alice");
  EXPECT_EQ(events["events"][0]["what"], "submitted");
  EXPECT_EQ(events["events"][1]["actor"], "scheduler");
  EXPECT_EQ(c.request("GET", "/api/v1/jobs/999/events").status, 404);
  auto metrics = c.request("GET", "/api/v1/jobs/" + std::to_string(a) + "/metrics").json();
  EXPECT_TRUE(metrics["samples"].empty());
  // Node show: GPUs used, jobs, not connected (no agents here).
  const std::string node = c.request("GET", "/api/v1/jobs/" + std::to_string(a)).json()["nodes"][0];
  auto n = c.request("GET", "/api/v1/nodes/" + node).json();
  EXPECT_GE(n["gpus_allocated"], 8);
  EXPECT_NE(std::find(n["jobs"].begin(), n["jobs"].end(), json(a)), n["jobs"].end()) << n.dump();
  EXPECT_EQ(n["connected"], false);
  EXPECT_EQ(c.request("GET", "/api/v1/nodes/nope").status, 404);
  // Accounting: GPU-hours by user and by project (runs of a whole second at least).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  auto acc = c.request("GET", "/api/v1/accounting?by=project").json();
  ASSERT_EQ(acc["rows"].size(), 2u) << acc.dump();
  EXPECT_EQ(acc["rows"][1]["project"], "p2");
  EXPECT_EQ(c.request("GET", "/api/v1/accounting?by=team").status, 400);
  // Logs: a token, the owner or an admin; no agent connected -> 503.
  const std::string logs = "/api/v1/jobs/" + std::to_string(a) + "/logs?rank=0";
  EXPECT_EQ(c.request("GET", logs).status, 401);
  EXPECT_EQ(c.request("GET", logs, "", bob_).status, 403);
  EXPECT_EQ(c.request("GET", logs, "", alice_).status, 503);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs/" + std::to_string(a) + "/logs?rank=8", "", admin_).status, 404);
  // Exec needs the allocation's exec token; remove is admin-only.
  EXPECT_EQ(c.request("POST", "/api/v1/allocs/1.1/exec", R"({"node":"n1","argv":["orted"]})", alice_).status,
            403);
  EXPECT_EQ(c.request("POST", "/api/v1/nodes/n2/remove", "", bob_).status, 403);
  // Remove is refused while the node runs a job, and done once none does (no agents: nothing held).
  auto refused = c.request("POST", "/api/v1/nodes/" + node + "/remove", "", admin_);
  EXPECT_EQ(refused.status, 409);
  EXPECT_NE(refused.body.find("runs job"), std::string::npos) << refused.body;
  for (int64_t id : {a, b})
    ASSERT_EQ(c.request("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", "", admin_).status, 200);
  EXPECT_EQ(c.request("POST", "/api/v1/nodes/" + node + "/remove", "", admin_).status, 200);
  EXPECT_EQ(c.request("GET", "/api/v1/nodes/" + node).json()["health"], "removed");
  // Without a web root, / is a JSON 404.
  EXPECT_EQ(c.request("GET", "/index.html").status, 404);
}

}  // namespace
}  // namespace railyard::testing
