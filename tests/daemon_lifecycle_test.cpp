// Unit tests of what outlives one run of a job or one run of the scheduler: GPU holds of ended allocations
// across a restart, the runs of requeued jobs (accounting, utilization), node removal. The AgentHub harness
// (fake peers, fake loop, settable clock, real SQLite) with the real Router for the HTTP answers.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "jobs/spec_json.hpp"
#include "scheduler/api/router.hpp"
#include "scheduler/daemon/tokens.hpp"
#include "tests/agent_hub_harness.hpp"
#include "tests/service_harness.hpp"

namespace railyard::daemon {
namespace {

using namespace hub_test;  // NOLINT(google-build-using-namespace): the shared harness
using service_test::count_rows;

constexpr const char* kAdminToken = "ry_admin-token-for-tests";

// The real router over a harness's service and hub; requests run to their answer.
class Api {
 public:
  explicit Api(Harness& h) : h_(h), router_(*h.service, {}) {
    router_.set_agent_hub(h.hub.get());
    EXPECT_TRUE(h.service->store().add_token({daemon::sha256_hex(kAdminToken), "root", store::Role::kAdmin}));
  }
  std::pair<int, json> call(const std::string& method, const std::string& target) {
    api::HttpResponse out;
    router_.handle({method, target, "Bearer " + std::string(kAdminToken), ""},
                   [&](api::HttpResponse r) { out = std::move(r); });
    h_.run();
    return {out.status, out.content_type == "application/json" ? json::parse(out.body) : json(out.body)};
  }

 private:
  Harness& h_;
  api::Router router_;
};

// The value of a Prometheus metric line "name value".
double metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

// --- GPU holds (kill sent, not confirmed) survive a restart ---

TEST(DaemonHolds, CancelledJobsGpusStayHeldAcrossARestartUntilItsNodeConfirmsTheKill) {
  testing::TempDir dir;
  jobs::JobId id = 0;
  std::string alloc;
  {
    Harness h(dir);
    auto p = h.connect({"n1", "n2"});
    id = h.submit(16);
    alloc = std::to_string(id) + ".1";
    h.send(p, launched(alloc, id, "n1"));
    h.send(p, launched(alloc, id, "n2"));
    ASSERT_TRUE(h.service->act(id, jobs::JobEvent::kCancelled, {"ada", store::Role::kUser}));
    h.run();
    ASSERT_EQ(p->of("kill").size(), 2u);
    EXPECT_EQ(count_rows(dir.file("s.db"), "SELECT count(*) FROM gpu_holds"), 1) << "written with the cancel";
  }  // the scheduler stops before either node confirmed
  Harness h(dir);
  ASSERT_EQ(h.job(id).state, JobState::kCancelled);
  EXPECT_TRUE(h.service->table().holds(alloc));
  const auto next = h.submit(8);
  EXPECT_EQ(h.job(next).state, JobState::kPending) << "held GPUs are not allocatable after the restart";
  // n1 comes back still running the allocation: told to kill it. n2 comes back without it: done there.
  json running = {{"n1", {{{"alloc", alloc}, {"job", id}}}}};
  auto p = h.connect({"n1", "n2"}, running);
  auto reg = p->of("registered");
  ASSERT_EQ(reg.size(), 1u);
  ASSERT_EQ(reg[0]["kill"].size(), 1u);
  EXPECT_EQ(reg[0]["kill"][0]["alloc"], alloc);
  EXPECT_EQ(reg[0]["kill"][0]["node"], "n1");
  h.run();
  EXPECT_TRUE(h.service->table().holds(alloc));
  EXPECT_EQ(h.job(next).state, JobState::kPending) << "n1 has not confirmed the kill";
  h.send(p, finished(alloc, id, "n1", "cancelled", 143, 1));
  h.run();
  EXPECT_FALSE(h.service->table().holds(alloc));
  EXPECT_EQ(h.job(next).state, JobState::kStarting);
  EXPECT_EQ(count_rows(dir.file("s.db"), "SELECT count(*) FROM gpu_holds"), 0);
}

TEST(DaemonHolds, AHeldNodeThatNeverComesBackIsReleasedAtTheEndOfTheGrace) {
  testing::TempDir dir;
  std::string alloc;
  {
    Harness h(dir);
    auto p = h.connect({"n1", "n2"});
    const auto id = h.submit(8);
    alloc = std::to_string(id) + ".1";
    h.send(p, launched(alloc, id, h.job(id).nodes[0]));
    ASSERT_TRUE(h.service->act(id, jobs::JobEvent::kCancelled, {"ada", store::Role::kUser}));
    h.run();
  }
  Harness h(dir);
  ASSERT_TRUE(h.service->table().holds(alloc));
  h.now += 29;
  h.hub->tick();
  h.run();
  EXPECT_TRUE(h.service->table().holds(alloc)) << "within the grace the node may still come back";
  h.now += 2;
  h.hub->tick();
  h.run();
  EXPECT_FALSE(h.service->table().holds(alloc));
  EXPECT_EQ(count_rows(dir.file("s.db"), "SELECT count(*) FROM gpu_holds"), 0);
}

TEST(DaemonHolds, WithoutAgentsNothingIsHeldAndOldHoldsAreReleased) {
  testing::TempDir dir;
  {
    Harness h(dir);
    auto p = h.connect({"n1", "n2"});
    const auto id = h.submit(8);
    h.send(p, launched(std::to_string(id) + ".1", id, h.job(id).nodes[0]));
    ASSERT_TRUE(h.service->act(id, jobs::JobEvent::kCancelled, {"ada", store::Role::kUser}));
    h.run();
    ASSERT_EQ(count_rows(dir.file("s.db"), "SELECT count(*) FROM gpu_holds"), 1);
  }
  Harness h(dir, "");  // restarted without an agent secret: no agent can ever confirm
  h.hub->tick();
  h.run();
  EXPECT_TRUE(h.service->table().gpu_holds().empty());
  EXPECT_EQ(h.job(h.submit(16)).state, JobState::kStarting);
}

// --- Runs: every placement of a job is recorded ---

TEST(DaemonRuns, ARequeuedJobHasTwoRunsAndAccountingAndUtilizationCountBoth) {
  testing::TempDir dir;
  jobs::JobId id = 0;
  {
    Harness h(dir);
    Api api(h);
    auto a = h.connect({"n1"});
    auto b = h.connect({"n2"});
    id = h.submit(8, /*requeue=*/true);  // placed at 10,000
    const std::string node = h.job(id).nodes.at(0), other = node == "n1" ? "n2" : "n1";
    auto& runs = node == "n1" ? a : b;
    auto& stays = node == "n1" ? b : a;
    h.send(runs, launched(std::to_string(id) + ".1", id, node));
    h.now += 20;
    h.send(stays, {{"type", "heartbeat"}, {"v", 1}});
    h.now += 15;  // 10,035: `node` silent for 35 s, DOWN; the job is requeued and placed on `other`
    h.hub->tick();
    h.run();
    ASSERT_EQ(h.job(id).attempt, 2);
    ASSERT_EQ(h.job(id).nodes.at(0), other);
    const std::string alloc2 = std::to_string(id) + ".2";
    h.send(stays, launched(alloc2, id, other));
    h.now += 50;  // 10,085
    h.send(stays, finished(alloc2, id, other, "completed", 0, 1));
    ASSERT_EQ(h.job(id).state, JobState::kCompleted);

    auto [status, acct] = api.call("GET", "/api/v1/accounting?since=0");
    ASSERT_EQ(status, 200);
    ASSERT_EQ(acct["rows"].size(), 1u);
    EXPECT_EQ(acct["rows"][0]["user"], "ada");
    EXPECT_DOUBLE_EQ(acct["rows"][0]["gpu_seconds"].get<double>(), 8 * 35 + 8 * 50);
    EXPECT_DOUBLE_EQ(acct["rows"][0]["gpu_hours"].get<double>(), (8 * 35 + 8 * 50) / 3600.0);
    EXPECT_EQ(acct["rows"][0]["jobs"], 1);
    EXPECT_EQ(acct["rows"][0]["runs"], 2);
    // [10000, 10050): run 1 for 35 s and run 2 for 15 s, 8 GPUs all along; [10050, 10100): run 2 for 35 s.
    auto [ustatus, util] = api.call("GET", "/api/v1/utilization?since=10000&until=10100&step=50");
    ASSERT_EQ(ustatus, 200);
    ASSERT_EQ(util["samples"].size(), 2u);
    EXPECT_DOUBLE_EQ(util["samples"][0][1].get<double>(), 8.0);
    EXPECT_DOUBLE_EQ(util["samples"][1][1].get<double>(), 8.0 * 35 / 50);
    auto [rstatus, list] = api.call("GET", "/api/v1/jobs/" + std::to_string(id) + "/runs");
    ASSERT_EQ(rstatus, 200);
    ASSERT_EQ(list["runs"].size(), 2u);
    EXPECT_EQ(list["runs"][0]["alloc"], std::to_string(id) + ".1");
    EXPECT_EQ(list["runs"][0]["nodes"], json({node}));
    EXPECT_EQ(list["runs"][0]["gpus"], 8);
    EXPECT_EQ(list["runs"][0]["end_time"], 10'035);
    EXPECT_EQ(list["runs"][0]["outcome"], "NODE_FAIL");
    EXPECT_EQ(list["runs"][1]["outcome"], "COMPLETED");
    EXPECT_EQ(api.call("GET", "/api/v1/jobs/999/runs").first, 404);
  }
  Harness h(dir);  // the runs are durable
  const auto& runs = h.service->table().runs();
  ASSERT_EQ(runs.size(), 2u);
  const auto& first = runs.at({id, 1});
  EXPECT_EQ(first.start, 10'000);
  EXPECT_EQ(first.end, 10'035);
  EXPECT_EQ(first.outcome, "NODE_FAIL");
  EXPECT_EQ(first.gpu_count(), 8);
  const auto& second = runs.at({id, 2});
  EXPECT_EQ(second.start, 10'035);
  EXPECT_EQ(second.end, 10'085);
  EXPECT_EQ(second.outcome, "COMPLETED");
  EXPECT_NE(first.nodes, second.nodes);
}

TEST(DaemonRuns, MigrationGivesEachPlacedJobOfAnOlderDatabaseItsLastRunAndEventsWholeSeconds) {
  testing::TempDir dir;
  {
    auto v3 = store::SqliteStateStore::open(dir.file("old.db"), 3);
    ASSERT_TRUE(v3);
  }
  {
    // Rows as version 3 wrote them (today's statements write columns that version 3 lacks).
    JobRecord job;
    job.spec.user = job.spec.project = "ada";
    job.spec.gpus = 2;
    const std::string spec = jobs::to_json(job.spec).dump();
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir.file("old.db").c_str(), &db), SQLITE_OK);
    const std::string sql =
        "INSERT INTO jobs(id, spec, state, user, submit_time, start_time, end_time, gpus, nodes, attempt) "
        "VALUES "
        "(1, '" +
        spec +
        "', 'COMPLETED', 'ada', 90, 100, 160, '[0,1]', '[\"n1\"]', 1), "
        "(2, '" +
        spec +
        "', 'PENDING', 'ada', 95, NULL, NULL, '[]', '[]', 0);"
        "INSERT INTO events(subject, time, actor, what) VALUES ('job:1', 90, 'ada', 'submitted');";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto latest = store::SqliteStateStore::open(dir.file("old.db"));
  ASSERT_TRUE(latest) << latest.error().message;
  auto state = (*latest)->load();
  ASSERT_TRUE(state) << state.error().message;
  ASSERT_EQ(state->runs.size(), 1u) << "the job that never started has no run";
  const auto& run = state->runs[0];
  EXPECT_EQ(run.job, 1);
  EXPECT_EQ(run.attempt, 1);
  EXPECT_EQ(run.start, 100);
  EXPECT_EQ(run.end, 160);
  EXPECT_EQ(run.gpu_count(), 2);
  EXPECT_EQ(run.outcome, "COMPLETED");
  EXPECT_EQ(run.nodes, std::vector<std::string>{"n1"});
  auto events = (*latest)->events("job:1", 10);
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].time, 90);
  EXPECT_EQ((*events)[0].time_ms, 90'000) << "an old row reads as its whole second";
}

// --- Event times in milliseconds ---

TEST(DaemonEvents, EventsCarryMillisecondsNextToTheirSecond) {
  testing::TempDir dir;
  Harness h(dir);
  Api api(h);
  int64_t ms = h.now * 1000 + 250;
  h.service->set_clock_ms([&] { return ms; });
  const auto id = h.submit(8);
  ms += 1;
  ASSERT_TRUE(h.service->act(id, jobs::JobEvent::kCancelled, {"ada", store::Role::kUser}));
  ms = (h.now + 1) * 1000 + 5;  // a millisecond clock already in the next second: the event keeps its second
  ASSERT_TRUE(h.service->set_node_health("n1", sched::NodeHealth::kDrain, "", {"root", store::Role::kAdmin}));
  auto [status, body] = api.call("GET", "/api/v1/jobs/" + std::to_string(id) + "/events");
  ASSERT_EQ(status, 200);
  const json& ev = body["events"];
  ASSERT_EQ(ev.size(), 3u) << body;  // submitted, placed, cancelled
  EXPECT_EQ(ev[0]["time"], h.now);
  EXPECT_EQ(ev[0]["time_ms"], h.now * 1000 + 250);
  EXPECT_EQ(ev[2]["what"], "cancelled");
  EXPECT_EQ(ev[2]["time_ms"], h.now * 1000 + 251);
  auto node = h.service->store().events("node:n1", 10);
  ASSERT_TRUE(node);
  ASSERT_EQ(node->size(), 1u);
  EXPECT_EQ(node->front().time_ms, h.now * 1000);
}

// --- Node removal ---

TEST(DaemonNodeRemoval, RefusedWhileANodeRunsAJobThenRemovedAndNeverPlacedOn) {
  testing::TempDir dir;
  Harness h(dir);
  Api api(h);
  auto p = h.connect({"n1", "n2"});
  const auto id = h.submit(16);
  const std::string alloc = std::to_string(id) + ".1";
  auto [status, body] = api.call("POST", "/api/v1/nodes/n1/remove");
  EXPECT_EQ(status, 409);
  EXPECT_NE(body["error"]["message"].get<std::string>().find("runs job " + std::to_string(id)),
            std::string::npos)
      << body;
  EXPECT_EQ(h.health("n1"), sched::NodeHealth::kUp);
  // Cancelled: its GPUs stay held until both nodes confirm, and removal waits for that too.
  ASSERT_TRUE(h.service->act(id, jobs::JobEvent::kCancelled, {"ada", store::Role::kUser}));
  h.run();
  std::tie(status, body) = api.call("POST", "/api/v1/nodes/n1/remove");
  EXPECT_EQ(status, 409);
  EXPECT_NE(body["error"]["message"].get<std::string>().find(alloc), std::string::npos) << body;
  h.send(p, finished(alloc, id, "n1", "cancelled", 143, 1));
  h.send(p, finished(alloc, id, "n2", "cancelled", 143, 2));
  std::tie(status, body) = api.call("POST", "/api/v1/nodes/n1/remove");
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(body["health"], "removed");
  EXPECT_EQ(h.health("n1"), sched::NodeHealth::kRemoved);
  EXPECT_FALSE(p->closed) << "the connection still speaks for n2";
  EXPECT_FALSE(h.hub->connected("n1"));
  // Never placed on: 8 GPUs go to n2, 16 can never fit while it is removed.
  const auto small = h.submit(8);
  EXPECT_EQ(h.job(small).nodes, std::vector<std::string>{"n2"});
  const auto big = h.submit(16);
  EXPECT_EQ(h.job(big).state, JobState::kPending);
  // Drain is refused (resume it first); removing again changes nothing.
  EXPECT_EQ(api.call("POST", "/api/v1/nodes/n1/drain").first, 409);
  EXPECT_EQ(api.call("POST", "/api/v1/nodes/n1/remove").first, 200);
}

TEST(DaemonNodeRemoval, RemovedNodesGpusAreNotCapacityAndTheStateIsDurable) {
  testing::TempDir dir;
  {
    Harness h(dir);
    Api api(h);
    ASSERT_EQ(api.call("POST", "/api/v1/nodes/n2/remove").first, 200);
    const std::string text = api.call("GET", "/metrics").second.get<std::string>();
    EXPECT_EQ(metric(text, "railyard_gpus_free"), 8);
    EXPECT_EQ(metric(text, "railyard_gpus_removed"), 8);
    EXPECT_EQ(api.call("GET", "/api/v1/utilization").second["gpus"], 8);
    auto nodes = api.call("GET", "/api/v1/nodes").second["nodes"];
    ASSERT_EQ(nodes.size(), 2u) << "removed nodes are listed, with their health";
    EXPECT_EQ(nodes[1]["name"], "n2");
    EXPECT_EQ(nodes[1]["health"], "removed");
    EXPECT_EQ(nodes[1]["reason"], "removed by root");
    // A user may not remove a node.
    EXPECT_EQ(h.service->remove_node("n1", {"ada", store::Role::kUser}).error().code, ErrorCode::kPermission);
  }
  Harness h(dir);
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kRemoved);
  // The end of the grace does not turn a removed node into a DOWN one.
  h.now += 31;
  h.hub->tick();
  h.run();
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kRemoved);
}

TEST(DaemonNodeRemoval, AnAgentRegisteringARemovedNodeIsRefusedUntilAnAdminResumesIt) {
  testing::TempDir dir;
  Harness h(dir);
  Api api(h);
  auto p = h.connect({"n1", "n2"});
  ASSERT_EQ(api.call("POST", "/api/v1/nodes/n2/remove").first, 200);
  EXPECT_FALSE(h.hub->connected("n2"));
  // A health report for it changes nothing and is not a bad message.
  h.send(p, {{"type", "health"}, {"v", 1}, {"node", "n2"}, {"ok", false}, {"reason", "x"}});
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kRemoved);
  EXPECT_EQ(h.hub->stats().bad_messages_total, 0);

  auto again = h.connect({"n2"});
  auto reg = again->of("registered");
  ASSERT_EQ(reg.size(), 1u);
  EXPECT_TRUE(reg[0]["nodes"].empty());
  ASSERT_EQ(reg[0]["rejected"].size(), 1u);
  EXPECT_EQ(reg[0]["rejected"][0]["name"], "n2");
  EXPECT_NE(reg[0]["rejected"][0]["reason"].get<std::string>().find("removed by an admin"),
            std::string::npos);
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kRemoved);

  ASSERT_EQ(api.call("POST", "/api/v1/nodes/n2/resume").first, 200);
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kUp);
  auto back = h.connect({"n2"});
  EXPECT_EQ(back->of("registered")[0]["nodes"], json({"n2"}));
  EXPECT_EQ(h.job(h.submit(16)).state, JobState::kStarting);
}

TEST(DaemonNodeRemoval, AResumedNodeWhoseAgentNeverRegistersGoesDown) {
  testing::TempDir dir;
  Harness h(dir);
  Api api(h);
  auto p = h.connect({"n1", "n2"});
  ASSERT_EQ(api.call("POST", "/api/v1/nodes/n2/remove").first, 200);
  ASSERT_EQ(api.call("POST", "/api/v1/nodes/n2/resume").first, 200);
  h.now += 29;
  h.send(p, {{"type", "heartbeat"}, {"v", 1}});
  h.hub->tick();
  h.run();
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kUp);
  h.now += 2;
  h.hub->tick();
  h.run();
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kDown);
  EXPECT_EQ(h.health("n1"), sched::NodeHealth::kUp);
}

}  // namespace
}  // namespace railyard::daemon
