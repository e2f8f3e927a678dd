// Unit tests of the AgentHub (scheduler/daemon/agents.hpp) against protocol abuse (issue 10): slow,
// duplicated, reordered, misdirected and lying agents, with the harness of tests/agent_hub_harness.hpp.
// No sockets.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/agent_hub_harness.hpp"

namespace railyard::daemon {
namespace {

using jobs::JobState;
using nlohmann::json;

using namespace hub_test;  // NOLINT(google-build-using-namespace): the shared harness

// --- Protocol abuse (issue 10): slow, duplicated, reordered, misdirected and lying agents. ---

// Registers `nodes` ([{name, inventory, running}]) as agent "test:2" on a new connection.
std::shared_ptr<FakePeer> register_nodes(Harness& h, const json& nodes) {
  auto p = std::make_shared<FakePeer>();
  h.hub->on_open(p);
  std::vector<std::string> names;
  for (const auto& n : nodes) names.push_back(n["name"]);
  const std::string challenge = p->sent.at(0).at("challenge");
  h.send(p, {{"type", "register"},
             {"v", 1},
             {"agent", "test:2"},
             {"nodes", nodes},
             {"mac", register_mac(kSecret, challenge, "test:2", names)},
             {"finished", json::array()}});
  return p;
}

// No GPU belongs to two STARTING/RUNNING jobs.
void expect_no_gpu_twice(const Harness& h) {
  std::map<topology::GpuId, jobs::JobId> owner;
  for (const auto& [id, r] : h.service->table().jobs()) {
    if (r.state != JobState::kStarting && r.state != JobState::kRunning) continue;
    for (auto g : r.gpus)
      EXPECT_TRUE(owner.emplace(g, id).second) << "GPU " << g << " in jobs " << id << " and " << owner[g];
  }
}

TEST(AgentHub, StuckAgentThatNeverAnswersALaunchFailsTheJobAfterTheLaunchTimeout) {
  testing::TempDir dir;
  Harness h(dir);
  auto a = h.connect({"n1"});
  auto b = h.connect({"n2"});  // stuck: heartbeats, but never answers its launch order
  const auto id = h.submit(16);
  const std::string alloc = std::to_string(id) + ".1";
  ASSERT_EQ(a->of("launch").size(), 1u);
  ASSERT_EQ(b->of("launch").size(), 1u);
  h.send(a, launched(alloc, id, "n1"));
  auto beat = [&](const std::vector<std::shared_ptr<FakePeer>>& peers, int64_t seconds) {
    h.now += seconds;
    for (const auto& p : peers) h.send(p, {{"type", "heartbeat"}, {"v", 1}});
    h.hub->tick();
    h.run();
  };
  for (int i = 0; i < 4; ++i) beat({a, b}, 29);
  ASSERT_EQ(h.job(id).state, JobState::kStarting) << "116 s: within the 120 s launch timeout";
  beat({a, b}, 5);
  EXPECT_EQ(h.job(id).state, JobState::kFailed);
  EXPECT_EQ(h.job(id).reason, "launch timeout: no answer from n2 within 120 s");
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kUp) << "the node heartbeats: only the job fails";
  EXPECT_EQ(a->of("kill").size(), 1u);
  EXPECT_EQ(b->of("kill").size(), 1u);
  // Its GPUs stay held until every node confirmed the kill or went DOWN: nothing is placed on them.
  const auto next = h.submit(8);
  EXPECT_EQ(h.job(next).state, JobState::kPending);
  h.send(a, finished(alloc, id, "n1", "cancelled", 143, 1));
  EXPECT_EQ(h.job(next).state, JobState::kPending) << "n2 may still start the old job's ranks";
  beat({a}, 31);  // b falls silent as well: n2 DOWN, the hold ends
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kDown);
  EXPECT_EQ(h.job(next).state, JobState::kStarting);
  EXPECT_EQ(h.job(next).nodes, std::vector<std::string>{"n1"});
  expect_no_gpu_twice(h);
}

TEST(AgentHub, DuplicatedLaunchedAndFinishedAreIdempotent) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  const auto id = h.submit(16);
  const std::string alloc = std::to_string(id) + ".1";
  h.send(p, launched(alloc, id, "n1"));
  h.send(p, launched(alloc, id, "n1"));
  EXPECT_EQ(h.job(id).state, JobState::kStarting) << "the same node twice is still one node of two";
  h.send(p, launched(alloc, id, "n2"));
  h.send(p, launched(alloc, id, "n2"));
  EXPECT_EQ(h.job(id).state, JobState::kRunning);
  h.send(p, finished(alloc, id, "n1", "completed", 0, 1));
  h.send(p, finished(alloc, id, "n1", "completed", 0, 1));
  EXPECT_EQ(h.job(id).state, JobState::kRunning) << "a resent report from n1 does not stand for n2";
  h.send(p, finished(alloc, id, "n2", "completed", 0, 2));
  h.send(p, finished(alloc, id, "n2", "failed", 1, 3));  // a late, contradicting report changes nothing
  EXPECT_EQ(h.job(id).state, JobState::kCompleted);
  EXPECT_EQ(h.job(id).exit_code, 0);
  EXPECT_EQ(p->of("ack").size(), 4u) << "every report is acknowledged, duplicates too";
  EXPECT_TRUE(p->of("kill").empty());
  auto events = h.service->store().events("job:" + std::to_string(id), 100);
  ASSERT_TRUE(events);
  int running = 0, completed = 0;
  for (const auto& e : *events) {
    running += e.what == "running as " + alloc;
    completed += e.what.rfind("COMPLETED", 0) == 0;
  }
  EXPECT_EQ(running, 1);
  EXPECT_EQ(completed, 1);
  EXPECT_EQ(h.hub->stats().bad_messages_total, 0);
}

TEST(AgentHub, ReorderedReportsFinishBeforeLaunchedAndMetricsForUnknownAllocations) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  const auto id = h.submit(8);
  const std::string node = h.job(id).nodes[0], alloc = std::to_string(id) + ".1";
  // alloc_finished overtakes launched (a job that exits at once): the job completes from STARTING.
  h.send(p, finished(alloc, id, node, "completed", 0, 1));
  EXPECT_EQ(h.job(id).state, JobState::kCompleted);
  ASSERT_EQ(p->of("ack").size(), 1u);
  // The late launched is for an allocation that is no longer live: the node is told to kill it.
  h.send(p, launched(alloc, id, node));
  EXPECT_EQ(h.job(id).state, JobState::kCompleted);
  ASSERT_EQ(p->of("kill").size(), 1u);
  EXPECT_EQ(p->of("kill")[0]["reason"], "fenced: allocation " + alloc + " is not live");
  // Metrics for an allocation the scheduler never made, and for the ended one, are dropped.
  for (const std::string& a : {std::string("99.1"), std::string("x"), alloc})
    h.send(p, {{"type", "metrics"},
               {"v", 1},
               {"alloc", a},
               {"job", 99},
               {"node", node},
               {"events", json::array({{{"key", "run_start"}, {"t", 1.0}}})}});
  auto samples = h.service->store().metrics(id, 100);
  ASSERT_TRUE(samples);
  EXPECT_TRUE(samples->empty());
  EXPECT_TRUE(p->of("error").empty());
  EXPECT_FALSE(p->closed);
  // Nothing holds the GPUs: a job needing both nodes starts.
  const auto both = h.submit(16);
  EXPECT_EQ(h.job(both).state, JobState::kStarting);
}

TEST(AgentHub, ReportsForANodeOfAnotherConnectionOrOutsideTheAllocationAreRefused) {
  testing::TempDir dir;
  Harness h(dir);
  auto a = h.connect({"n1"});
  auto b = register_nodes(h, json::array({{{"name", "n2"}, {"inventory", {{"gpus", 8}}}}}));
  ASSERT_EQ(b->of("registered").size(), 1u);
  const auto id = h.submit(16);
  const std::string alloc = std::to_string(id) + ".1";
  // b speaks for n1, which is a's: refused, and the job does not count n1 as launched.
  h.send(b, launched(alloc, id, "n1"));
  ASSERT_EQ(b->of("error").size(), 1u);
  EXPECT_EQ(b->of("error")[0]["code"], "bad_message");
  h.send(b, launched(alloc, id, "n2"));
  EXPECT_EQ(h.job(id).state, JobState::kStarting);
  h.send(a, launched(alloc, id, "n1"));
  EXPECT_EQ(h.job(id).state, JobState::kRunning);
  // A failure and metrics for n1 from b change nothing and are not acknowledged.
  h.send(b, finished(alloc, id, "n1", "failed", 9, 5));
  h.send(b, {{"type", "metrics"},
             {"v", 1},
             {"alloc", alloc},
             {"job", id},
             {"node", "n1"},
             {"events", json::array({{{"key", "time_to_train"}, {"value", 1.0}}})}});
  EXPECT_EQ(h.job(id).state, JobState::kRunning);
  EXPECT_FALSE(h.job(id).time_to_train_s);
  EXPECT_TRUE(b->of("ack").empty());
  EXPECT_EQ(h.hub->stats().bad_messages_total, 3);
  EXPECT_FALSE(b->closed) << "a good message in between resets the count of bad ones in a row";

  // One agent, two nodes, a one-node job: reports from the node outside the allocation count for nothing.
  testing::TempDir dir2;
  Harness g(dir2);
  auto p = g.connect({"n1", "n2"});
  const auto one = g.submit(8);
  const std::string in = g.job(one).nodes[0], out = in == "n1" ? "n2" : "n1";
  const std::string alloc1 = std::to_string(one) + ".1";
  g.send(p, launched(alloc1, one, out));
  EXPECT_EQ(g.job(one).state, JobState::kStarting);
  ASSERT_EQ(p->of("kill").size(), 1u);
  EXPECT_EQ(p->of("kill")[0]["node"], out);
  EXPECT_EQ(p->of("kill")[0]["reason"], "fenced: allocation " + alloc1 + " does not include " + out);
  g.send(p, launched(alloc1, one, in));
  EXPECT_EQ(g.job(one).state, JobState::kRunning);
  g.send(p, finished(alloc1, one, out, "completed", 0, 1));
  EXPECT_EQ(g.job(one).state, JobState::kRunning) << "its own node still runs it";
  EXPECT_EQ(p->of("ack").size(), 1u) << "acknowledged like any stale report";
  g.send(p, {{"type", "launch_failed"},
             {"v", 1},
             {"alloc", alloc1},
             {"job", one},
             {"node", out},
             {"message", "x"}});
  EXPECT_EQ(g.job(one).state, JobState::kRunning);
  g.send(p, finished(alloc1, one, in, "completed", 0, 2));
  EXPECT_EQ(g.job(one).state, JobState::kCompleted);
}

TEST(AgentHub, AgentClaimingGpusOrAllocationsItDoesNotHaveNeverDoublesAnAllocation) {
  testing::TempDir dir;
  Harness h(dir);
  // n1 claims 16 GPUs (the cluster says 8: placements keep to 8), n2 claims 4 (drained).
  auto p = register_nodes(h, json::array({{{"name", "n1"}, {"inventory", {{"gpus", 16}}}},
                                          {{"name", "n2"}, {"inventory", {{"gpus", 4}}}}}));
  ASSERT_EQ(p->of("registered").size(), 1u);
  EXPECT_EQ(h.health("n1"), sched::NodeHealth::kUp);
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kDrain);
  const auto& table = h.service->table();
  EXPECT_EQ(table.health_reason(table.cluster().find_node("n2")), "inventory: 4 GPUs, cluster says 8");
  const auto first = h.submit(8), second = h.submit(8), big = h.submit(16);
  EXPECT_EQ(h.job(first).state, JobState::kStarting);
  EXPECT_EQ(h.job(second).state, JobState::kPending) << "n1 has 8 GPUs whatever its agent says";
  EXPECT_EQ(h.job(big).state, JobState::kPending);
  const auto launches = p->of("launch");
  ASSERT_EQ(launches.size(), 1u);
  for (const auto& g : launches[0]["nodes"][0]["gpus"]) {
    EXPECT_GE(g.get<int>(), 0);
    EXPECT_LT(g.get<int>(), 8);
  }
  // A new connection takes n1 over claiming allocations it was never given: each is fenced (killed),
  // the live one stays where the scheduler put it.
  const std::string alloc = std::to_string(first) + ".1";
  auto liar = register_nodes(h, json::array({{{"name", "n1"},
                                              {"inventory", {{"gpus", 8}}},
                                              {"running",
                                               {{{"alloc", "77.1"}, {"job", 77}},
                                                {{"alloc", std::to_string(second) + ".1"}, {"job", second}},
                                                {{"alloc", alloc}, {"job", first}}}}}}));
  auto reg = liar->of("registered");
  ASSERT_EQ(reg.size(), 1u);
  ASSERT_EQ(reg[0]["kill"].size(), 2u);
  EXPECT_EQ(reg[0]["kill"][0]["reason"], "fenced: job 77 is not running");
  EXPECT_EQ(reg[0]["kill"][1]["reason"], "fenced: job " + std::to_string(second) + " is PENDING");
  EXPECT_TRUE(p->closed) << "the older connection of n1 is superseded";
  h.send(liar, launched(alloc, first, "n1"));
  EXPECT_EQ(h.job(first).state, JobState::kRunning);
  EXPECT_EQ(h.job(second).state, JobState::kPending);
  expect_no_gpu_twice(h);
}

}  // namespace
}  // namespace railyard::daemon
