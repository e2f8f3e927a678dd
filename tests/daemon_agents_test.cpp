// Unit tests of the AgentHub (scheduler/daemon/agents.hpp): the agent protocol's scheduler side driven by
// fake peers, a fake loop and a settable clock over a real SQLite store. No sockets. Protocol abuse (slow,
// duplicated, reordered, misdirected and lying agents): daemon_agents_abuse_test.cpp.
#include <gtest/gtest.h>

#include <set>

#include "jobs/spec_json.hpp"
#include "tests/agent_hub_harness.hpp"

namespace railyard::daemon {
namespace {

using jobs::JobState;
using nlohmann::json;

using namespace hub_test;  // NOLINT(google-build-using-namespace): the shared harness

TEST(AgentHub, HandshakeAcceptsTheRightMacAndRefusesBadOnesAndReplays) {
  testing::TempDir dir;
  Harness h(dir);
  auto good = h.connect({"n1", "n2", "x9"});
  auto reg = good->of("registered");
  ASSERT_EQ(reg.size(), 1u);
  EXPECT_EQ(reg[0]["nodes"], json({"n1", "n2"}));
  EXPECT_EQ(reg[0]["rejected"][0]["name"], "x9");
  EXPECT_EQ(h.hub->connected_nodes(), 2u);
  EXPECT_FALSE(good->closed);

  auto bad = h.connect({"n1"}, json::object(), std::string(64, 'a'));
  EXPECT_TRUE(bad->closed);
  ASSERT_EQ(bad->of("error").size(), 1u);
  EXPECT_EQ(bad->of("error")[0]["code"], "unauthorized");
  EXPECT_TRUE(bad->of("registered").empty());

  // A register copied from another connection carries the MAC of the other challenge.
  const std::string old_challenge = good->sent.at(0)["challenge"];
  auto replay = h.connect({"n1"}, json::object(), register_mac(kSecret, old_challenge, "test:1", {"n1"}));
  EXPECT_TRUE(replay->closed);
  EXPECT_EQ(h.hub->stats().refused_total, 2);
  EXPECT_TRUE(h.hub->connected("n1"));  // the good connection still holds it

  auto first = std::make_shared<FakePeer>();
  h.hub->on_open(first);
  h.send(first, {{"type", "heartbeat"}, {"v", 1}, {"nodes", {"n1"}}});
  EXPECT_TRUE(first->closed) << "a first message that is not register";
}

TEST(AgentHub, WithoutASecretEveryAgentIsRefused) {
  testing::TempDir dir;
  Harness h(dir, "");
  auto p = h.connect({"n1"});
  EXPECT_TRUE(p->closed);
  EXPECT_EQ(h.hub->connected_nodes(), 0u);
}

TEST(AgentHub, MasterPortsOfJobsLedByOneNodeNeverCollide) {
  // Jobs 1 and 1876 start probing at the same port (the start wraps every 30,000 / 16 jobs).
  const int first = master_port_for(1, 1, {});
  EXPECT_EQ(master_port_for(1876, 1, {}), first);
  const int second = master_port_for(1876, 1, {first});
  EXPECT_NE(second, first);
  EXPECT_EQ(master_port_for(1876, 1, {first, second}), second + 1);
  // The range wraps: the last port is followed by the first.
  std::set<int> all_but_first;
  for (int p = 20001; p < 50000; ++p) all_but_first.insert(p);
  EXPECT_EQ(master_port_for(1874, 15, all_but_first), 20000);
  for (int job = 1; job < 5000; ++job) {
    const int port = master_port_for(job, 1, {});
    ASSERT_GE(port, 20000);
    ASSERT_LT(port, 50000);
  }
  // Two live jobs led by the same node get different ports in their launch orders.
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  h.submit(1);
  h.submit(1);
  auto launches = p->of("launch");
  ASSERT_EQ(launches.size(), 2u);
  ASSERT_EQ(launches[0]["node"], launches[1]["node"]);
  EXPECT_NE(launches[0]["master_port"], launches[1]["master_port"]);
}

TEST(AgentHub, ArrayTasksAreLaunchedWithTheirIndexInASpecEveryAgentReads) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  const Caller ada{"ada", store::Role::kUser};
  // A job cancelled before any pass placed it (from its submit's answer), launched nowhere; the array waits
  // for it to end (afterany), so its tasks carry a dependency in "after".
  jobs::JobSpec plain;
  plain.gpus = 8;
  plain.command = {"/bin/true"};
  ASSERT_TRUE(h.service->prepare(plain, ada));
  jobs::JobId gone = 0;
  h.service->submit({plain}, ada, [&](Result<std::vector<jobs::JobId>> ids) {
    ASSERT_TRUE(ids);
    gone = ids->front();
    EXPECT_TRUE(h.service->act(gone, jobs::JobEvent::kCancelled, ada));
  });
  h.run();
  ASSERT_EQ(h.job(gone).state, JobState::kCancelled);
  jobs::JobSpec spec;
  spec.gpus = 8;
  spec.command = {"/bin/true"};
  spec.array = jobs::parse_array_spec("5-6").value();
  spec.after = {{jobs::Dependency::Type::kAfterAny, gone}};
  ASSERT_TRUE(h.service->prepare(spec, ada));
  h.service->submit({spec}, ada, [](Result<std::vector<jobs::JobId>>) {});
  h.run();
  auto launches = p->of("launch");
  ASSERT_EQ(launches.size(), 2u);  // one per task, none for the array
  std::set<std::string> indexes;
  for (const auto& l : launches) {
    const json& s = l["spec"];
    indexes.insert(s["env"]["RAILYARD_ARRAY_TASK_ID"].get<std::string>());
    EXPECT_FALSE(s.contains("array_job") || s.contains("array_task") || s.contains("array")) << s.dump();
    EXPECT_FALSE(s.contains("after")) << s.dump();  // the scheduler's business, and newer than some agents
    EXPECT_TRUE(jobs::parse_job_spec(s)) << s.dump();
  }
  EXPECT_EQ(indexes, (std::set<std::string>{"5", "6"}));
}

TEST(AgentHub, LaunchedAndFinishedDriveAJobToCompletedWithAcks) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  const auto id = h.submit(16);
  ASSERT_EQ(h.job(id).state, JobState::kStarting);
  const std::string alloc = std::to_string(id) + ".1";
  auto launches = p->of("launch");
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0]["alloc"], alloc);
  EXPECT_EQ(launches[0]["nodes"].size(), 2u);
  EXPECT_EQ(launches[0]["nodes"][0]["gpus"].size(), 8u);
  EXPECT_EQ(launches[0]["spec"]["gpus"], 16);
  h.send(p, launched(alloc, id, "n1"));
  EXPECT_EQ(h.job(id).state, JobState::kStarting) << "one node of two";
  h.send(p, launched(alloc, id, "n2"));
  EXPECT_EQ(h.job(id).state, JobState::kRunning);
  h.send(p, finished(alloc, id, "n1", "completed", 0, 7));
  EXPECT_EQ(h.job(id).state, JobState::kRunning);
  h.send(p, finished(alloc, id, "n2", "completed", 0, 8));
  EXPECT_EQ(h.job(id).state, JobState::kCompleted);
  EXPECT_EQ(h.job(id).exit_code, 0);
  auto acks = p->of("ack");
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[0]["seq"], 7);
  EXPECT_EQ(acks[1]["seq"], 8);
  // A duplicate (resent after a reconnect) is acknowledged again and changes nothing.
  h.send(p, finished(alloc, id, "n2", "completed", 0, 8));
  EXPECT_EQ(p->of("ack").size(), 3u);
  auto events = h.service->store().events("job:" + std::to_string(id), 100);
  ASSERT_TRUE(events);
  EXPECT_EQ(events->back().actor, "agent:n2");
}

// Agent reports commit kWritten (commit_pipeline.hpp, "Durability"): the outcome is applied at once, but the ack
// that lets the agent forget its report waits until the log is synced, by the delayed sync posted on the
// loop, or sooner by any synced commit (here an API cancel).
TEST(AgentHub, AckOfAnOutcomeWaitsUntilItIsOnDisk) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  const auto a = h.running(p, 8);
  const int64_t syncs = h.service->stats().log_syncs_total;
  h.hub->on_message(p.get(), finished(first_alloc(a), a, h.job(a).nodes.at(0), "completed", 0, 5).dump());
  EXPECT_EQ(h.job(a).state, JobState::kCompleted) << "applied at once";
  EXPECT_TRUE(p->of("ack").empty()) << "not acknowledged before the log is synced";
  h.run();  // the delayed sync
  ASSERT_EQ(p->of("ack").size(), 1u);
  EXPECT_EQ(p->of("ack")[0]["seq"], 5);
  EXPECT_EQ(h.service->stats().log_syncs_total, syncs + 1);

  // A synced commit makes the report durable too: the ack goes out with it, before the delayed sync.
  const auto b = h.running(p, 8);
  const auto waiting = h.submit(16);  // n2 alone cannot hold it while b runs
  ASSERT_EQ(h.job(waiting).state, JobState::kPending);
  const int64_t synced_before = h.service->stats().log_syncs_total;
  h.hub->on_message(p.get(), finished(first_alloc(b), b, h.job(b).nodes.at(0), "completed", 0, 6).dump());
  EXPECT_EQ(p->of("ack").size(), 1u);
  ASSERT_TRUE(h.service->act(waiting, jobs::JobEvent::kCancelled, {"ada", store::Role::kUser}));
  ASSERT_EQ(p->of("ack").size(), 2u) << "the cancel's commit synced the log";
  EXPECT_EQ(p->of("ack")[1]["seq"], 6);
  h.run();
  EXPECT_EQ(h.service->stats().log_syncs_total, synced_before) << "nothing left for the delayed sync";
  // And the outcomes are in the database, seen from another connection.
  auto other = store::SqliteStateStore::open(dir.file("s.db"));
  ASSERT_TRUE(other);
  auto state = (*other)->load();
  ASSERT_TRUE(state);
  int completed = 0;
  for (const auto& j : state->jobs) completed += j.state == JobState::kCompleted;
  EXPECT_EQ(completed, 2);
}

// A launch and an end report are kDeferred (store::Durability): applied at once, written in the loop's
// next transaction (here an API cancel's) instead of one each, and read back by events() at once.
TEST(AgentHub, LaunchAndEndReportsAreWrittenWithTheNextTransaction) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  const auto id = h.submit(8);
  const auto other = h.submit(16);  // waits for id's GPUs
  ASSERT_EQ(h.job(other).state, JobState::kPending);
  const std::string node = h.job(id).nodes.at(0);
  const auto on_disk = [&] { return state_on_disk(dir, id); };
  ASSERT_EQ(on_disk(), JobState::kStarting);
  const int64_t syncs = h.service->stats().log_syncs_total;
  h.hub->on_message(p.get(), launched(first_alloc(id), id, node).dump());
  EXPECT_EQ(h.job(id).state, JobState::kRunning) << "applied at once";
  EXPECT_EQ(on_disk(), JobState::kStarting) << "not written by itself";
  h.hub->on_message(p.get(), finished(first_alloc(id), id, node, "completed", 0, 4).dump());
  EXPECT_EQ(h.job(id).state, JobState::kCompleted);
  EXPECT_EQ(on_disk(), JobState::kStarting);
  EXPECT_EQ(h.service->stats().deferred_batches_total, 0);
  ASSERT_TRUE(h.service->act(other, jobs::JobEvent::kCancelled, {"ada", store::Role::kUser}));
  EXPECT_EQ(on_disk(), JobState::kCompleted) << "written (and synced) with the cancel";
  EXPECT_EQ(h.service->stats().deferred_batches_total, 2);
  ASSERT_EQ(p->of("ack").size(), 1u) << "durable with the cancel's sync";
  h.run();
  EXPECT_EQ(h.service->stats().log_syncs_total, syncs) << "nothing left for the delayed sync";

  // Reading events writes what is deferred first; the ack still waits for the sync.
  const auto next = h.submit(8);  // its start's delayed sync runs here
  const std::string n2 = h.job(next).nodes.at(0);
  const int64_t syncs2 = h.service->stats().log_syncs_total;
  h.hub->on_message(p.get(), launched(first_alloc(next), next, n2).dump());
  h.hub->on_message(p.get(), finished(first_alloc(next), next, n2, "failed", 3, 5).dump());
  auto ev = h.service->store().events("job:" + std::to_string(next), 10);
  ASSERT_TRUE(ev);
  ASSERT_GE(ev->size(), 2u);
  EXPECT_EQ((*ev)[ev->size() - 2].what, "running as " + first_alloc(next));
  EXPECT_EQ(ev->back().what.rfind("FAILED", 0), 0u) << ev->back().what;
  EXPECT_EQ(p->of("ack").size(), 1u);
  h.run();  // the delayed sync
  ASSERT_EQ(p->of("ack").size(), 2u);
  EXPECT_EQ(h.service->stats().log_syncs_total, syncs2 + 1);
}

// Every synced commit of the loop writes the deferred reports first, so none is acked before it is on disk:
// here an admin's drain and removal of nodes (which commit without a job in them).
TEST(AgentHub, NodeChangesWriteTheDeferredReportsBeforeTheirSyncAcksThem) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  const Caller root{"root", store::Role::kAdmin};
  const auto on_disk = [&](jobs::JobId id) { return state_on_disk(dir, id); };
  int seq = 10;
  for (const bool remove : {false, true}) {
    const auto id = h.running(p, 8);
    const std::string node = h.job(id).nodes.at(0), other = node == "n1" ? "n2" : "n1";
    const size_t acks = p->of("ack").size();
    h.hub->on_message(p.get(), finished(first_alloc(id), id, node, "completed", 0, ++seq).dump());
    ASSERT_EQ(h.job(id).state, JobState::kCompleted);
    ASSERT_NE(on_disk(id), JobState::kCompleted);
    ASSERT_TRUE(remove ? h.service->remove_node(other, root)
                       : h.service->set_node_health(other, sched::NodeHealth::kDrain, "fan", root));
    EXPECT_EQ(p->of("ack").size(), acks + 1) << "acked with the node change's sync";
    EXPECT_EQ(on_disk(id), JobState::kCompleted) << "and on disk before that";
    h.run();
    if (!remove) {
      ASSERT_TRUE(h.service->set_node_health(other, sched::NodeHealth::kUp, "", root));
    }
  }
}

// A launch report lost with a restart (written only with a later transaction): the job stays STARTING on
// disk, and the agent's registration, which names it running, moves it to RUNNING.
TEST(AgentHub, AJobStartingOnDiskThatAnAgentReportsRunningIsRunning) {
  testing::TempDir dir;
  jobs::JobId id = 0;
  std::string node;
  {
    Harness h(dir);
    auto p = h.connect({"n1", "n2"});
    id = h.submit(8);
    node = h.job(id).nodes.at(0);
    ASSERT_EQ(h.job(id).state, JobState::kStarting);
  }
  Harness h(dir);
  ASSERT_EQ(h.job(id).state, JobState::kStarting);
  json running = {{node, {{{"alloc", first_alloc(id)}, {"job", id}}}}};
  auto p = h.connect({"n1", "n2"}, running);
  EXPECT_TRUE(p->of("registered")[0]["kill"].empty());
  EXPECT_EQ(h.job(id).state, JobState::kRunning);
  EXPECT_TRUE(p->of("launch").empty());
}

TEST(AgentHub, OneFailedNodeFailsTheJobAndKillsTheOthers) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  const auto id = h.running(p, 16);
  const std::string alloc = first_alloc(id);
  h.send(p, finished(alloc, id, "n1", "failed", 3, 1));
  EXPECT_EQ(h.job(id).state, JobState::kFailed);
  EXPECT_EQ(h.job(id).exit_code, 3);
  auto kills = p->of("kill");
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0]["node"], "n2");
  // n2's GPUs stay held until it confirms: a new 8-GPU job fits only on n1.
  const auto next = h.submit(16);
  EXPECT_EQ(h.job(next).state, JobState::kPending);
  h.send(p, finished(alloc, id, "n2", "cancelled", 143, 2));
  h.run();
  EXPECT_EQ(h.job(next).state, JobState::kStarting);
}

TEST(AgentHub, CancelKillsEveryNodeAndHoldsTheGpusUntilConfirmed) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  const auto id = h.submit(16);
  const std::string alloc = std::to_string(id) + ".1";
  h.send(p, launched(alloc, id, "n1"));
  h.send(p, launched(alloc, id, "n2"));
  ASSERT_TRUE(h.service->act(id, jobs::JobEvent::kCancelled, {"ada", store::Role::kUser}));
  h.run();
  EXPECT_EQ(h.job(id).state, JobState::kCancelled);
  EXPECT_EQ(p->of("kill").size(), 2u);
  const auto next = h.submit(8);
  EXPECT_EQ(h.job(next).state, JobState::kPending);
  h.send(p, finished(alloc, id, "n1", "cancelled", 143, 1));
  h.run();
  EXPECT_EQ(h.job(next).state, JobState::kPending) << "held until every node confirmed";
  h.send(p, finished(alloc, id, "n2", "cancelled", 143, 2));
  h.run();
  EXPECT_EQ(h.job(next).state, JobState::kStarting);
  EXPECT_EQ(h.job(id).state, JobState::kCancelled);
}

TEST(AgentHub, SilentNodeGoesDownAndItsJobIsRequeuedThenFenced) {
  testing::TempDir dir;
  Harness h(dir);
  auto a = h.connect({"n1"});
  auto b = h.connect({"n2"});
  const auto id = h.submit(8, /*requeue=*/true);
  const auto& r = h.job(id);
  ASSERT_EQ(r.nodes.size(), 1u);
  const std::string node = r.nodes[0], other = node == "n1" ? "n2" : "n1";
  auto& runs = node == "n1" ? a : b;
  auto& stays = node == "n1" ? b : a;
  h.send(runs, launched(std::to_string(id) + ".1", id, node));
  ASSERT_EQ(h.job(id).state, JobState::kRunning);
  h.now += 20;
  h.send(stays, {{"type", "heartbeat"}, {"v", 1}, {"nodes", {other}}});
  h.now += 15;  // 35 s since `node` was last heard of, 15 s for `other`
  h.hub->tick();
  h.run();
  EXPECT_EQ(h.health(node), sched::NodeHealth::kDown);
  EXPECT_EQ(h.health(other), sched::NodeHealth::kUp);
  // Requeued (attempt kept) and placed again on the other node as attempt 2.
  EXPECT_EQ(h.job(id).state, JobState::kStarting);
  EXPECT_EQ(h.job(id).attempt, 2);
  EXPECT_EQ(h.job(id).nodes[0], other);
  auto events = h.service->store().events("job:" + std::to_string(id), 100);
  ASSERT_TRUE(events);
  bool requeued = false;
  for (const auto& e : *events) requeued |= e.what.find("requeued after NODE_FAIL") != std::string::npos;
  EXPECT_TRUE(requeued);
  // The silent agent comes back still running attempt 1: it is told to kill it, and the node is UP.
  auto back = h.connect({node}, {{node, {{{"alloc", std::to_string(id) + ".1"}, {"job", id}}}}});
  auto reg = back->of("registered");
  ASSERT_EQ(reg.size(), 1u);
  ASSERT_EQ(reg[0]["kill"].size(), 1u);
  EXPECT_EQ(reg[0]["kill"][0]["reason"],
            "fenced: job " + std::to_string(id) + " runs as " + std::to_string(id) + ".2");
  EXPECT_EQ(h.health(node), sched::NodeHealth::kUp);
}

TEST(AgentHub, FinishedResultsCarriedInRegisterAreAppliedAndAcked) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  const auto id = h.submit(8);
  const std::string node = h.job(id).nodes[0], alloc = std::to_string(id) + ".1";
  h.send(p, launched(alloc, id, node));
  h.hub->on_close(p.get());
  auto again = h.connect({"n1", "n2"}, json::object(), "",
                         json::array({finished(alloc, id, node, "completed", 0, 42)}));
  EXPECT_EQ(h.job(id).state, JobState::kCompleted);
  ASSERT_EQ(again->of("ack").size(), 1u);
  EXPECT_EQ(again->of("ack")[0]["seq"], 42);
}

TEST(AgentHub, RestartReconcileKeepsReportedJobsAndFailsLostOnes) {
  testing::TempDir dir;
  jobs::JobId kept = 0, lost = 0;
  {
    Harness h(dir);
    auto p = h.connect({"n1", "n2"});
    kept = h.submit(8);
    lost = h.submit(8);
    for (auto id : {kept, lost}) h.send(p, launched(std::to_string(id) + ".1", id, h.job(id).nodes[0]));
    ASSERT_EQ(h.job(kept).state, JobState::kRunning);
    ASSERT_EQ(h.job(lost).state, JobState::kRunning);
  }
  Harness h(dir);  // the scheduler restarts on the same database
  EXPECT_EQ(h.job(kept).state, JobState::kRunning);
  const std::string kn = h.job(kept).nodes[0], ln = h.job(lost).nodes[0];
  json running = {{kn, {{{"alloc", std::to_string(kept) + ".1"}, {"job", kept}}}}};
  auto p = h.connect({"n1", "n2"}, running);
  EXPECT_TRUE(p->of("registered")[0]["kill"].empty());
  EXPECT_EQ(h.job(kept).state, JobState::kRunning);
  EXPECT_EQ(h.job(lost).state, JobState::kFailed);
  EXPECT_EQ(h.job(lost).reason, "lost: not running on any node after scheduler restart");
  EXPECT_TRUE(p->of("launch").empty()) << "restored allocations are never launched twice";
  h.send(p, finished(std::to_string(kept) + ".1", kept, kn, "completed", 0, 1));
  EXPECT_EQ(h.job(kept).state, JobState::kCompleted);
  (void)ln;
}

TEST(AgentHub, NodesThatNeverRegisterAreDownAfterTheGrace) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1"});
  h.now += 29;
  h.send(p, {{"type", "heartbeat"}, {"v", 1}});
  h.hub->tick();
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kUp);
  h.now += 2;
  h.hub->tick();
  h.run();
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kDown);
  EXPECT_EQ(h.health("n1"), sched::NodeHealth::kUp);
}

TEST(AgentHub, MetricsAreStoredAndTimeToTrainIsSet) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  const auto id = h.submit(8);
  const std::string node = h.job(id).nodes[0], alloc = std::to_string(id) + ".1";
  h.send(p, launched(alloc, id, node));
  json events = json::array({{{"key", "run_start"}, {"t", 100.0}},
                             {{"key", "eval_accuracy"}, {"t", 110.0}, {"value", 0.9}, {"epoch", 1}},
                             {{"key", "run_stop"}, {"t", 112.5}, {"status", "success"}},
                             {{"key", "time_to_train"}, {"value", 12.5}}});
  h.send(p, {{"type", "metrics"},
             {"v", 1},
             {"alloc", alloc},
             {"job", id},
             {"node", node},
             {"events", events},
             {"telemetry", {{"cpu_s", 1.5}}}});
  ASSERT_TRUE(h.job(id).time_to_train_s);
  EXPECT_DOUBLE_EQ(*h.job(id).time_to_train_s, 12.5);
  auto samples = h.service->store().metrics(id, 100);
  ASSERT_TRUE(samples);
  EXPECT_EQ(samples->size(), 5u);
  // A bad message is answered with an error and counted; three in a row close the connection.
  for (int i = 0; i < 3; ++i) h.send(p, {{"type", "launched"}, {"v", 1}});
  EXPECT_EQ(h.hub->stats().bad_messages_total, 3);
  EXPECT_TRUE(p->closed);
}

// A failing health check drains the node with its reason, so the scheduler stops placing there; passing
// again resumes it. An admin's drain is never lifted by a passing check.
TEST(AgentHub, FailingHealthCheckDrainsTheNodeAndPassingResumesIt) {
  testing::TempDir dir;
  Harness h(dir);
  auto p = h.connect({"n1", "n2"});
  auto health = [&](const std::string& node, bool ok, const std::string& reason) {
    h.send(p, {{"type", "health"}, {"v", 1}, {"node", node}, {"ok", ok}, {"reason", reason}});
  };
  health("n1", false, "disk: 12 MB free in /var/lib/railyard-agent");
  EXPECT_EQ(h.health("n1"), sched::NodeHealth::kDrain);
  EXPECT_EQ(h.service->table().health_reason(h.service->table().cluster().find_node("n1")),
            "health: disk: 12 MB free in /var/lib/railyard-agent");
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kUp);
  const auto id = h.submit(16);  // needs both nodes
  EXPECT_EQ(h.job(id).state, JobState::kPending) << "nothing is placed on a drained node";
  health("n1", true, "");
  EXPECT_EQ(h.health("n1"), sched::NodeHealth::kUp);
  EXPECT_EQ(h.job(id).state, JobState::kStarting);

  const Caller admin{"root", store::Role::kAdmin};
  ASSERT_TRUE(h.service->set_node_health("n2", sched::NodeHealth::kDrain, "maintenance", admin));
  h.run();
  health("n2", true, "");
  EXPECT_EQ(h.health("n2"), sched::NodeHealth::kDrain) << "an admin's drain stays";
  health("n9", false, "x");  // not registered on this connection: an error frame, no change
  EXPECT_FALSE(p->of("error").empty());
}

// Mutual authentication (issue 44; PROTOCOL.md "Handshake and authentication"): `registered` and every later
// message to an agent carry a counter and a MAC made with the connection's session key, over the exact
// bytes sent, which the agent's verifier accepts once each and in order.
TEST(AgentHub, RegisteredAndEveryLaterMessageAreSealedWithTheSessionKey) {
  struct RawPeer : FakePeer {
    void send(std::string text) override {
      raw.push_back(text);
      FakePeer::send(std::move(text));
    }
    std::vector<std::string> raw;
  };
  testing::TempDir dir;
  Harness h(dir);
  auto p = std::make_shared<RawPeer>();
  h.hub->on_open(p);
  const std::string challenge = p->sent.at(0).at("challenge");
  EXPECT_FALSE(p->sent.at(0).contains("mac"));  // hello: nothing to prove yet
  const std::string ours(64, 'b');
  h.hub->on_message(p.get(), json{{"type", "register"},
                                  {"v", 1},
                                  {"agent", "test:1"},
                                  {"agent_challenge", ours},
                                  {"nodes", {{{"name", "n1"}, {"inventory", {{"gpus", 8}}}}}},
                                  {"mac", register_mac(kSecret, challenge, "test:1", {"n1"})}}
                                 .dump());
  h.run();
  const auto id = h.submit(8);  // -> launch to n1
  h.send(std::static_pointer_cast<FakePeer>(p), {{"type", "dance"}, {"v", 1}});  // -> error unknown_type
  ASSERT_EQ(p->raw.size(), 4u);
  ASSERT_EQ(p->sent[1]["type"], "registered");
  ASSERT_EQ(p->sent[2]["type"], "launch");
  EXPECT_EQ(p->sent[2]["job"], id);
  protocol::OrderVerifier verifier(protocol::session_key(kSecret, challenge, ours, "test:1"));
  for (size_t i = 1; i < p->raw.size(); ++i) {
    auto s = verifier.verify(p->raw[i], p->sent[i]);
    EXPECT_TRUE(s) << p->raw[i] << ": " << s.error().message;
    EXPECT_EQ(p->sent[i]["n"], static_cast<int64_t>(i));
  }
  protocol::OrderVerifier other(protocol::session_key(kSecret, challenge, std::string(64, 'c'), "test:1"));
  EXPECT_FALSE(other.verify(p->raw[1], p->sent[1]));  // another agent challenge, another key
}

// An agent that is not root reports runs_as {switch_users: false}; while every connected agent is such, a job
// of any other user is refused at submit (it would be refused on every node), and its own user's is not.
TEST(AgentHub, JobsOfUsersNoAgentCanRunAsAreRefusedAtSubmit) {
  testing::TempDir dir;
  Harness h(dir);
  jobs::JobSpec spec;
  spec.gpus = 1;
  spec.command = {"/bin/true"};
  const Caller admin{"root", store::Role::kAdmin};
  auto as = [&](const std::string& user) {
    jobs::JobSpec s = spec;
    s.user = user;
    return h.service->prepare(s, admin);
  };
  EXPECT_TRUE(as("bob")) << "no agent connected: nothing known";
  auto p = std::make_shared<FakePeer>();
  h.hub->on_open(p);
  const std::string challenge = p->sent.at(0).at("challenge");
  const json runs_as = {{"uid", 1000}, {"user", "alice"}, {"switch_users", false}};
  h.send(p, {{"type", "register"}, {"v", 1}, {"agent", "test:1"},
             {"nodes", {{{"name", "n1"}, {"runs_as", runs_as}}, {{"name", "n2"}, {"runs_as", runs_as}}}},
             {"mac", register_mac(kSecret, challenge, "test:1", {"n1", "n2"})}});
  ASSERT_EQ(p->of("registered").size(), 1u);
  auto bob = as("bob");
  ASSERT_FALSE(bob);
  EXPECT_NE(bob.error().message.find("every connected agent runs as 'alice' and cannot switch users"),
            std::string::npos) << bob.error().message;
  EXPECT_TRUE(as("alice"));
  auto root_agent = h.connect({"n2"});  // takes n2 over; its agent (no runs_as) can switch users
  EXPECT_TRUE(as("bob"));
}

}  // namespace
}  // namespace railyard::daemon
