// Unit tests of the daemon's state: the SQLite store (migrations, reload, atomic commits, tokens), the job
// table (plans into changes), the service's group commit, and passes whose table changes while they run.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "jobs/spec_json.hpp"
#include "scheduler/api/auth.hpp"
#include "scheduler/core/cycle.hpp"
#include "scheduler/daemon/service.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "tests/daemon_client.hpp"
#include "topology/generator.hpp"
#include "topology/io_json.hpp"

namespace railyard {
namespace {

using jobs::JobState;
using store::JobRecord;
using store::SqliteStateStore;

JobRecord make_job(jobs::JobId id, int gpus) {
  JobRecord r;
  r.id = id;
  r.spec.user = "ada";
  r.spec.project = "ada";
  r.spec.gpus = gpus;
  r.submit_time = 1000 + id;
  return r;
}

int count_rows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
  int n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

TEST(SqliteStore, CreatesTheLatestSchemaInWalMode) {
  testing::TempDir dir;
  auto s = SqliteStateStore::open(dir.file("a.db"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ((*s)->schema_version(), store::latest_schema_version());
  EXPECT_EQ(count_rows(dir.file("a.db"), "SELECT version FROM schema_version"),
            store::latest_schema_version());
  EXPECT_EQ(count_rows(dir.file("a.db"),
                       "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                       "('jobs','events','nodes','tokens')"),
            4);
  sqlite3* db = nullptr;
  sqlite3_open(dir.file("a.db").c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(SqliteStore, MigratesAnOlderDatabaseForward) {
  testing::TempDir dir;
  {
    auto v1 = SqliteStateStore::open(dir.file("m.db"), 1);
    ASSERT_TRUE(v1);
    EXPECT_EQ((*v1)->schema_version(), 1);
  }
  {
    // A row as version 1 wrote it (today's code writes columns that version 1 lacks).
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir.file("m.db").c_str(), &db), SQLITE_OK);
    const std::string spec = jobs::to_json(make_job(1, 8).spec).dump();
    const std::string sql = "INSERT INTO jobs(id, spec, state, user, submit_time) VALUES (1, '" + spec +
                            "', 'PENDING', 'ada', 100)";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  EXPECT_EQ(count_rows(dir.file("m.db"),
                       "SELECT count(*) FROM sqlite_master WHERE type='index' AND name='events_by_subject'"),
            0);
  auto latest = SqliteStateStore::open(dir.file("m.db"));
  ASSERT_TRUE(latest);
  EXPECT_EQ((*latest)->schema_version(), store::latest_schema_version());
  EXPECT_EQ(count_rows(dir.file("m.db"),
                       "SELECT count(*) FROM sqlite_master WHERE type='index' AND name='events_by_subject'"),
            1);
  auto state = (*latest)->load();
  ASSERT_TRUE(state);
  ASSERT_EQ(state->jobs.size(), 1u);  // data kept across the migration
  EXPECT_EQ(state->jobs[0].attempt, 0);
}

// Version 5 rebuilt events and metrics without AUTOINCREMENT: rows keep their seq, and new ones go on above.
TEST(SqliteStore, EventsAndMetricsKeepTheirNumbersWithoutAutoincrement) {
  testing::TempDir dir;
  const std::string file = dir.file("e.db");
  auto batch = [](int first) {
    store::WriteBatch b;
    for (int i = first; i < first + 3; ++i) {
      b.events.push_back({"job:" + std::to_string(i), 5, "ada", "submitted", 5000});
      b.metrics.push_back({i, std::to_string(i) + ".1", "run_start", 1.5, "{}"});
    }
    return b;
  };
  ASSERT_TRUE(SqliteStateStore::open(file, 4));
  {
    // Rows as version 4 wrote them (today's store writes columns version 4 lacks), numbered by AUTOINCREMENT;
    // then a gap at the start, as after rows were added and rolled back.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    for (int i = 1; i <= 3; ++i) {
      const std::string sql =
          "INSERT INTO events(subject, time, actor, what, time_ms) VALUES ('job:" + std::to_string(i) +
          "', 5, 'ada', 'submitted', 5000); INSERT INTO metrics(job, alloc, key, time, data) VALUES (" +
          std::to_string(i) + ", '" + std::to_string(i) + ".1', 'run_start', 1.5, '{}')";
      ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    }
    ASSERT_EQ(sqlite3_exec(db, "UPDATE events SET seq = seq + 10; UPDATE metrics SET seq = seq + 20", nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto latest = SqliteStateStore::open(file);
  ASSERT_TRUE(latest);
  ASSERT_TRUE((*latest)->commit(batch(4)));
  EXPECT_EQ(count_rows(file, "SELECT count(*) FROM sqlite_master WHERE sql LIKE '%AUTOINCREMENT%'"), 0);
  EXPECT_EQ(count_rows(file, "SELECT count(*) FROM sqlite_sequence"), 0);
  EXPECT_EQ(count_rows(file, "SELECT seq FROM events WHERE subject = 'job:1'"), 11);  // kept
  EXPECT_EQ(count_rows(file, "SELECT min(seq) FROM events WHERE subject >= 'job:4'"), 14);  // above
  EXPECT_EQ(count_rows(file, "SELECT seq FROM metrics WHERE job = 3"), 23);
  EXPECT_EQ(count_rows(file, "SELECT min(seq) FROM metrics WHERE job >= 4"), 24);
  EXPECT_EQ(count_rows(file, "SELECT count(*) FROM events WHERE time_ms = 5000"), 6);
  EXPECT_EQ(count_rows(file, "SELECT count(*) FROM sqlite_master WHERE name IN "
                             "('events_by_subject', 'metrics_by_job')"),
            2);
}

// commit_all (the service's deferred agent reports with the commit that follows them): the batches in
// order, as one transaction: a later batch's update and release win over an earlier one's, a failure writes
// none of them, and the log grows once for the pages they share.
TEST(SqliteStore, CommitAllWritesItsBatchesInOrderInOneTransaction) {
  testing::TempDir dir;
  const std::string file = dir.file("a.db");
  auto s = SqliteStateStore::open(file);
  ASSERT_TRUE(s);
  store::WriteBatch submit;
  submit.inserts = {make_job(1, 8), make_job(2, 8)};
  ASSERT_TRUE((*s)->commit(submit));
  const auto update = [](jobs::JobId id, JobState state) {
    store::WriteBatch b;
    JobRecord r = make_job(id, 8);
    r.state = state;
    r.attempt = 1;
    b.updates = {r};
    b.events.push_back({"job:" + std::to_string(id), 10, "agent:n1", std::string(jobs::to_string(state))});
    b.durability = store::Durability::kDeferred;
    return b;
  };
  store::WriteBatch running = update(1, JobState::kRunning);
  running.holds.push_back({"1.1", 1, {0, 1}, {"n1"}});
  store::WriteBatch ended = update(1, JobState::kCompleted);
  ended.released.push_back("1.1");
  const auto wal_size = [&] { return std::filesystem::file_size(file + "-wal"); };
  const auto before = wal_size();
  const store::WriteBatch* both[] = {&running, &ended};
  ASSERT_TRUE((*s)->commit_all(both));
  const auto one_transaction = wal_size() - before;
  auto st = (*s)->load();
  ASSERT_TRUE(st);
  EXPECT_EQ(st->jobs[0].state, JobState::kCompleted) << "the later update wins";
  EXPECT_TRUE(st->holds.empty()) << "the later release wins";
  auto ev = (*s)->events("job:1", 10);
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 2u);
  EXPECT_EQ((*ev)[0].what, "RUNNING");
  EXPECT_EQ((*ev)[1].what, "COMPLETED");
  // The same two written one commit each log their shared pages twice.
  store::WriteBatch running2 = update(2, JobState::kRunning), ended2 = update(2, JobState::kCompleted);
  const auto before2 = wal_size();
  ASSERT_TRUE((*s)->commit(running2));
  ASSERT_TRUE((*s)->commit(ended2));
  EXPECT_LT(one_transaction, wal_size() - before2);
  // One failing batch (a duplicate insert) fails them all.
  store::WriteBatch bad;
  bad.inserts = {make_job(2, 8)};
  store::WriteBatch requeued = update(1, JobState::kPending);
  const store::WriteBatch* failing[] = {&requeued, &bad};
  EXPECT_FALSE((*s)->commit_all(failing));
  EXPECT_EQ((*s)->load()->jobs[0].state, JobState::kCompleted);
}

// Version 8 rebuilt runs WITHOUT ROWID: the runs of a version 7 database come through.
TEST(SqliteStore, RunsSurviveTheirTablesRebuild) {
  testing::TempDir dir;
  const std::string file = dir.file("r7.db");
  {
    auto v7 = SqliteStateStore::open(file, 7);
    ASSERT_TRUE(v7);
    store::WriteBatch b;
    b.inserts = {make_job(1, 8)};
    for (int attempt : {1, 2}) {
      store::RunRecord run;
      run.job = 1;
      run.attempt = attempt;
      run.nodes = {"dgx000" + std::to_string(attempt)};
      run.gpus = {0, 1, 2, 3, 4, 5, 6, 7};
      run.start = 100 * attempt;
      if (attempt == 1) run.end = 150, run.outcome = "REQUEUED";
      b.runs.push_back(run);
    }
    ASSERT_TRUE((*v7)->commit(b));
  }
  auto latest = SqliteStateStore::open(file);
  ASSERT_TRUE(latest);
  EXPECT_EQ((*latest)->schema_version(), store::latest_schema_version());
  EXPECT_EQ(count_rows(
                file, "SELECT count(*) FROM sqlite_master WHERE name = 'runs' AND sql LIKE '%WITHOUT ROWID'"),
            1);
  auto state = (*latest)->load();
  ASSERT_TRUE(state) << state.error().message;
  ASSERT_EQ(state->runs.size(), 2u);
  EXPECT_EQ(state->runs[0].attempt, 1);
  EXPECT_EQ(state->runs[0].end, 150);
  EXPECT_EQ(state->runs[0].outcome, "REQUEUED");
  EXPECT_EQ(state->runs[1].nodes, std::vector<std::string>{"dgx0002"});
  EXPECT_FALSE(state->runs[1].end.has_value());
}

TEST(SqliteStore, ReloadsEverythingItCommitted) {
  testing::TempDir dir;
  {
    auto s = SqliteStateStore::open(dir.file("r.db"));
    ASSERT_TRUE(s);
    store::WriteBatch b;
    b.inserts = {make_job(1, 16), make_job(2, 1)};
    b.inserts[1].spec.mig = "1g.10gb";
    b.nodes.push_back({"dgx001", sched::NodeHealth::kDrain, "fan"});
    b.events.push_back({"job:1", 5, "ada", "submitted"});
    ASSERT_TRUE((*s)->commit(b));
    JobRecord placed = make_job(1, 16);
    placed.state = JobState::kStarting;
    placed.gpus = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    placed.nodes = {"dgx001", "dgx002"};
    placed.leaves_spanned = 1;
    placed.min_leaves = 1;
    placed.start_time = 77;
    JobRecord mig = make_job(2, 1);
    mig.slices = {{3, 2, 1, "1g.10gb"}};
    mig.estimated_start = 99;
    mig.time_to_train_s = 12.5;
    store::WriteBatch update;
    update.updates = {placed, mig};
    ASSERT_TRUE((*s)->commit(update));
  }
  auto s = SqliteStateStore::open(dir.file("r.db"));
  ASSERT_TRUE(s);
  auto st = (*s)->load();
  ASSERT_TRUE(st) << st.error().message;
  ASSERT_EQ(st->jobs.size(), 2u);
  const JobRecord& a = st->jobs[0];
  EXPECT_EQ(a.state, JobState::kStarting);
  EXPECT_EQ(a.gpus.size(), 16u);
  EXPECT_EQ(a.nodes, (std::vector<std::string>{"dgx001", "dgx002"}));
  EXPECT_EQ(a.start_time, 77);
  EXPECT_EQ(a.spec.gpus, 16);
  EXPECT_EQ(a.submit_time, 1001);
  EXPECT_FALSE(a.end_time);
  const JobRecord& b = st->jobs[1];
  ASSERT_EQ(b.slices.size(), 1u);
  EXPECT_EQ(b.slices[0].gpu, 3);
  EXPECT_EQ(b.slices[0].profile, "1g.10gb");
  EXPECT_EQ(b.spec.mig, "1g.10gb");
  EXPECT_EQ(b.estimated_start, 99);
  EXPECT_EQ(b.time_to_train_s, 12.5);
  ASSERT_EQ(st->nodes.size(), 1u);
  EXPECT_EQ(st->nodes[0].health, sched::NodeHealth::kDrain);
  auto ev = (*s)->events("job:1", 10);
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 1u);
  EXPECT_EQ((*ev)[0].what, "submitted");
}

TEST(SqliteStore, AFailedCommitWritesNothing) {
  testing::TempDir dir;
  auto s = SqliteStateStore::open(dir.file("f.db"));
  ASSERT_TRUE(s);
  store::WriteBatch b;
  b.inserts = {make_job(1, 1)};
  ASSERT_TRUE((*s)->commit(b));
  b.inserts = {make_job(2, 1), make_job(1, 1)};  // the second collides
  EXPECT_FALSE((*s)->commit(b));
  EXPECT_EQ((*s)->load()->jobs.size(), 1u);
}

TEST(SqliteStore, TokensAreStoredByHash) {
  testing::TempDir dir;
  auto s = SqliteStateStore::open(dir.file("t.db"));
  ASSERT_TRUE(s);
  auto token = api::generate_token();
  ASSERT_TRUE(token);
  ASSERT_TRUE((*s)->add_token({api::sha256_hex(*token), "ada", store::Role::kAdmin}));
  auto found = (*s)->find_token(api::sha256_hex(*token));
  ASSERT_TRUE(found && *found);
  EXPECT_EQ((*found)->user, "ada");
  EXPECT_EQ((*found)->role, store::Role::kAdmin);
  EXPECT_FALSE(*(*s)->find_token(*token));  // the plain token is not a key
  EXPECT_EQ(count_rows(dir.file("t.db"), "SELECT count(*) FROM tokens WHERE hash LIKE 'ry_%'"), 0);
  EXPECT_EQ(api::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// Schema 10 (issue 32): a token's times, its revocation and last use written with a batch, and audit rows in
// the batch's transaction, read back newest-last and by actor.
TEST(SqliteStore, TokenTimesAndAuditRowsCommitWithABatch) {
  testing::TempDir dir;
  auto s = SqliteStateStore::open(dir.file("t.db"));
  ASSERT_TRUE(s);
  store::TokenRecord t("ab12cd34ef56" + std::string(52, '0'), "ada", store::Role::kUser);
  t.created = 100;
  t.expires = 200;
  store::WriteBatch b;
  b.tokens.push_back(t);
  b.audit.push_back({1000, "root", "127.0.0.1", "POST", "/api/v1/tokens", 201});
  b.audit.push_back({1001, "ada", "10.0.0.2", "POST", "/api/v1/jobs", 403});
  ASSERT_TRUE((*s)->commit(b));
  store::WriteBatch later;
  later.token_uses.push_back({t.hash, 150});
  later.token_uses.push_back({t.hash, 120});  // never moves back
  later.token_revokes.push_back({t.hash, 160});
  ASSERT_TRUE((*s)->commit(later));
  auto found = (*s)->find_token(t.hash);
  ASSERT_TRUE(found && *found);
  EXPECT_EQ((*found)->id(), "ab12cd34ef56");
  EXPECT_EQ((*found)->created, 100);
  EXPECT_EQ((*found)->expires, 200);
  EXPECT_EQ((*found)->last_used, 150);
  EXPECT_EQ((*found)->revoked, 160);
  EXPECT_EQ((*s)->tokens()->size(), 1u);
  auto all = (*s)->audit({});
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].source, "10.0.0.2");
  EXPECT_EQ((*all)[1].status, 403);
  auto ada = (*s)->audit({"ada", 0, 10});
  ASSERT_EQ(ada->size(), 1u);
  EXPECT_EQ((*ada)[0].target, "/api/v1/jobs");
  EXPECT_EQ((*s)->audit({"", 1001, 10})->size(), 1u);
}

// A loop that runs posted work only when told, so a test controls what arrives "together".
struct FakeLoop {
  std::deque<std::function<void()>> work;
  void run() {
    while (!work.empty()) {
      auto fn = std::move(work.front());
      work.pop_front();
      fn();
    }
  }
};

// A service of a one-SU cluster on a new database, over a FakeLoop whose delayed work (post_after) waits in
// `timers` until the test runs it: fire() runs the first, settle() everything posted, delayed or not.
struct TimedService {
  testing::TempDir dir;
  Result<topology::Cluster> cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  FakeLoop loop;
  std::deque<std::function<void()>> timers;
  std::unique_ptr<daemon::Service> svc;
  TimedService() {
    auto st = SqliteStateStore::open(dir.file("s.db"));
    if (!cluster || !st) return;
    daemon::Loop fake{
        [this](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
        [this](std::chrono::milliseconds, std::function<void()> fn) { timers.push_back(std::move(fn)); }};
    svc = std::make_unique<daemon::Service>(*cluster, std::move(*st), std::move(fake),
                                            [] { return int64_t{5000}; });
  }
  void fire() {
    auto fn = std::move(timers.front());
    timers.pop_front();
    fn();
    loop.run();
  }
  void settle() {
    for (loop.run(); !timers.empty();) fire();
  }
  // Drains node i through Service::commit with the given durability.
  Status drain(int i, store::Durability d) {
    store::WriteBatch b;
    b.nodes.push_back({cluster->node(i).name, sched::NodeHealth::kDrain, "test"});
    b.durability = d;
    return svc->commit(std::move(b));
  }
};

// The delayed sync of kWritten commits (service.hpp, "Durability"): it runs kLazySyncDelay after the first
// unsynced commit, unless a synced commit came in between; then what is unsynced is younger than that, and
// it waits one more delay (a stream of submits syncs the scheduler's own commits with its own fsyncs).
// Pass pacing on the injected monotonic clock, without sleeping: a pass requested right after one ends waits
// kMinPassInterval counted from that end (a pass this short), what is left of it later, nothing once over.
TEST(Service, PassPacingCountsFromTheLastPassOnTheMonotonicClock) {
  testing::TempDir dir;
  auto cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  auto st = SqliteStateStore::open(dir.file("s.db"));
  ASSERT_TRUE(cluster && st);
  FakeLoop loop;
  std::vector<std::pair<std::chrono::milliseconds, std::function<void()>>> timers;
  daemon::Loop fake{[&](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
                    [&](std::chrono::milliseconds d, std::function<void()> fn) { timers.emplace_back(d, std::move(fn)); }};
  daemon::Service svc(*cluster, std::move(*st), std::move(fake), [] { return int64_t{5000}; });
  std::chrono::steady_clock::time_point t{std::chrono::seconds(100)};
  svc.set_monotonic_clock([&] { return t; });
  ASSERT_TRUE(svc.open());
  loop.run();
  // Two jobs of the whole cluster: one runs, the other keeps every later pass busy.
  const daemon::Caller ada{"ada", store::Role::kUser};
  for (int i = 0; i < 2; ++i) {
    jobs::JobSpec spec;
    spec.gpus = cluster->gpu_count();
    ASSERT_TRUE(svc.prepare(spec, ada));
    svc.submit({spec}, ada, [](Result<std::vector<jobs::JobId>> ids) { ASSERT_TRUE(ids); });
  }
  loop.run();
  for (; !timers.empty(); loop.run()) {  // the submits' own passes, paced or not
    auto fn = std::move(timers.front().second);
    timers.erase(timers.begin());
    fn();
  }
  const int64_t passes = svc.stats().passes_total;
  ASSERT_GE(passes, 1);
  ASSERT_EQ(svc.table().find(1)->state, jobs::JobState::kStarting);
  svc.request_pass();  // the clock has not moved since that pass ended
  loop.run();
  ASSERT_EQ(timers.size(), 1u) << "paced, not posted at once";
  EXPECT_EQ(timers.front().first, daemon::kMinPassInterval);
  EXPECT_EQ(svc.stats().passes_total, passes);
  t += std::chrono::milliseconds(5);
  timers.front().second();  // fires early (a loop may): the pass runs, and the next is paced from its end
  loop.run();
  EXPECT_EQ(svc.stats().passes_total, passes + 1);
  timers.clear();
  t += std::chrono::milliseconds(15);
  svc.request_pass();
  loop.run();
  ASSERT_EQ(timers.size(), 1u);
  EXPECT_EQ(timers.front().first, std::chrono::milliseconds(5)) << "20 ms from the last end, 15 of them gone";
  svc.request_pass();  // a second request while one is paced adds nothing
  loop.run();
  EXPECT_EQ(timers.size(), 1u);
  t += std::chrono::milliseconds(5);
  timers.front().second();
  loop.run();
  EXPECT_EQ(svc.stats().passes_total, passes + 2);
  timers.clear();
  t += std::chrono::seconds(1);  // long after: the next request runs at once
  svc.request_pass();
  loop.run();
  EXPECT_TRUE(timers.empty());
  EXPECT_EQ(svc.stats().passes_total, passes + 3);
}

TEST(Service, TheDelayedSyncWaitsAgainAfterASyncedCommit) {
  TimedService h;
  ASSERT_TRUE(h.svc);
  daemon::Service& svc = *h.svc;
  ASSERT_TRUE(svc.open());
  h.loop.run();
  bool durable = false;
  ASSERT_TRUE(h.drain(0, store::Durability::kWritten));
  svc.when_durable([&] { durable = true; });
  ASSERT_EQ(h.timers.size(), 1u);
  ASSERT_TRUE(h.drain(1, store::Durability::kSynced));
  EXPECT_TRUE(durable) << "the synced commit made the first durable";
  ASSERT_TRUE(h.drain(2, store::Durability::kWritten));
  durable = false;
  svc.when_durable([&] { durable = true; });
  EXPECT_EQ(h.timers.size(), 1u) << "one sync posted at a time";
  h.fire();
  EXPECT_EQ(svc.stats().log_syncs_total, 0) << "a synced commit came in between: wait again";
  EXPECT_FALSE(durable);
  ASSERT_EQ(h.timers.size(), 1u);
  h.fire();
  EXPECT_EQ(svc.stats().log_syncs_total, 1);
  EXPECT_TRUE(durable);
  EXPECT_TRUE(h.timers.empty());
}

// --submit-durability written: a submit is answered once its commit is in the log (another connection reads
// the job then), before any sync; the delayed sync makes it durable (a waiter on durability hears then). By
// default the commit is synced: durable when answered. A deferred submit is refused.
TEST(Service, WrittenSubmitsAreAnsweredBeforeTheirSyncAndSyncedWithinTheDelay) {
  for (const auto mode : {store::Durability::kWritten, store::Durability::kSynced}) {
    SCOPED_TRACE(mode == store::Durability::kWritten ? "written" : "synced");
    TimedService h;
    ASSERT_TRUE(h.svc);
    daemon::Service& svc = *h.svc;
    EXPECT_FALSE(svc.set_submit_durability(store::Durability::kDeferred));
    ASSERT_TRUE(svc.set_submit_durability(mode));
    EXPECT_EQ(svc.stats().submits_synced, mode == store::Durability::kSynced);
    ASSERT_TRUE(svc.open());
    h.settle();
    const int64_t syncs_before = svc.stats().log_syncs_total;
    const daemon::Caller ada{"ada", store::Role::kUser};
    jobs::JobSpec spec;
    spec.gpus = 8;
    ASSERT_TRUE(svc.prepare(spec, ada));
    std::vector<jobs::JobId> acked;
    svc.submit({spec}, ada, [&](Result<std::vector<jobs::JobId>> ids) {
      ASSERT_TRUE(ids) << ids.error().message;
      acked = *ids;
    });
    while (acked.empty() && !h.loop.work.empty()) {  // up to the answer (the pass it requests comes after)
      auto fn = std::move(h.loop.work.front());
      h.loop.work.pop_front();
      fn();
    }
    ASSERT_EQ(acked, std::vector<jobs::JobId>{1});
    EXPECT_EQ(count_rows(h.dir.file("s.db"), "SELECT count(*) FROM jobs WHERE id = 1"), 1)
        << "in the log when answered";
    bool durable = false;
    svc.when_durable([&] { durable = true; });
    EXPECT_EQ(svc.stats().log_syncs_total, syncs_before);
    if (mode == store::Durability::kSynced) {
      EXPECT_TRUE(durable) << "a synced submit is durable when answered";
      EXPECT_TRUE(h.timers.empty()) << "nothing for a delayed sync";
      continue;
    }
    EXPECT_FALSE(durable) << "written, not synced yet";
    EXPECT_EQ(h.timers.size(), 1u) << "the delayed sync is posted";
    h.settle();
    EXPECT_EQ(svc.stats().log_syncs_total, syncs_before + 1)
        << "one delayed sync for the submit and its pass";
    EXPECT_TRUE(durable);
  }
}

// The delayed sync off the loop (sync_log_on_thread in the daemon; a test-controlled executor here): the loop
// goes on while the fsync runs; a waiter for what was committed before it hears when it comes back, one for a
// commit made meanwhile only after the next sync; a synced commit meanwhile releases both at once.
TEST(Service, TheDelayedSyncOffTheLoopReleasesOnlyWhatItCovers) {
  TimedService h;
  ASSERT_TRUE(h.svc);
  daemon::Service& svc = *h.svc;
  std::deque<std::function<void()>> syncs;
  svc.set_sync_executor([&](std::function<void()> fn) { syncs.push_back(std::move(fn)); });
  ASSERT_TRUE(svc.open());
  h.loop.run();
  auto run_sync = [&] {
    auto fn = std::move(syncs.front());
    syncs.pop_front();
    fn();
    h.loop.run();
  };
  bool first = false, second = false;
  ASSERT_TRUE(h.drain(0, store::Durability::kWritten));
  svc.when_durable([&] { first = true; });
  ASSERT_EQ(h.timers.size(), 1u);
  h.fire();  // the delayed sync: its fsync goes to the executor
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_FALSE(first) << "not before the fsync is done";
  ASSERT_TRUE(h.drain(1, store::Durability::kWritten));  // while it runs
  svc.when_durable([&] { second = true; });
  run_sync();
  EXPECT_TRUE(first);
  EXPECT_FALSE(second) << "committed after the fsync began: the next sync";
  EXPECT_EQ(svc.stats().log_syncs_total, 1);
  ASSERT_EQ(h.timers.size(), 1u);
  h.fire();
  ASSERT_EQ(syncs.size(), 1u);
  run_sync();
  EXPECT_TRUE(second);
  EXPECT_EQ(svc.stats().log_syncs_total, 2);

  // A synced commit while a sync is in flight makes everything durable at once.
  bool third = false;
  ASSERT_TRUE(h.drain(2, store::Durability::kWritten));
  h.fire();
  ASSERT_EQ(syncs.size(), 1u);
  svc.when_durable([&] { third = true; });  // covered by the sync in flight
  EXPECT_FALSE(third);
  ASSERT_TRUE(h.drain(3, store::Durability::kSynced));
  EXPECT_TRUE(third);
  run_sync();
  EXPECT_EQ(svc.stats().log_syncs_total, 3);
  EXPECT_TRUE(h.timers.empty());
}

// The log's sync through a descriptor of its own, from another thread while the store commits.
TEST(SqliteStore, SyncsElsewhereWhileItCommits) {
  testing::TempDir dir;
  auto s = SqliteStateStore::open(dir.file("e.db"));
  ASSERT_TRUE(s);
  auto sync = (*s)->sync_elsewhere();
  ASSERT_TRUE(sync);
  store::WriteBatch b;
  b.durability = store::Durability::kWritten;
  b.inserts = {make_job(1, 1)};
  ASSERT_TRUE((*s)->commit(b));
  std::atomic<bool> stop = false;
  std::atomic<int> synced = 0;
  std::thread t([&] {
    while (!stop) {
      ASSERT_TRUE(sync()) << "sync failed";
      ++synced;
    }
  });
  for (int i = 2; i < 50; ++i) {
    b.inserts = {make_job(i, 1)};
    ASSERT_TRUE((*s)->commit(b));
  }
  while (synced < 3) std::this_thread::yield();
  stop = true;
  t.join();
  ASSERT_TRUE(sync());
  EXPECT_EQ(count_rows(dir.file("e.db"), "SELECT count(*) FROM jobs"), 49);
  // A log that is not where it was (removed under the scheduler): an error, not a sync that did nothing.
  std::filesystem::remove(dir.file("e.db-wal"));
  auto gone = sync();
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().message.find("e.db-wal"), std::string::npos) << gone.error().message;
}

// SQLite checkpoints in the commit that fills the log to 1,000 frames: it copies the log into the database
// and syncs both, tens of ms on the scheduler's loop. With checkpoint_on that commit hands the checkpoint
// to the executor instead, once while one is pending, and it runs on a connection of its own; the log
// starts over after it, and nothing committed is missed.
TEST(SqliteStore, CheckpointsRunOnTheExecutorNotInTheCommitThatFillsTheLog) {
  testing::TempDir dir;
  const std::string file = dir.file("c.db");
  auto s = SqliteStateStore::open(file);
  ASSERT_TRUE(s);
  std::vector<std::function<void()>> handed;
  (*s)->checkpoint_on([&](std::function<void()> fn) { handed.push_back(std::move(fn)); },
                      [](const Error& e) { ADD_FAILURE() << e.message; });
  const auto page = static_cast<uintmax_t>(count_rows(file, "PRAGMA page_size"));
  jobs::JobId next = 1;
  auto commit = [&](SqliteStateStore& st) {  // ~10 pages of rows
    store::WriteBatch b;
    b.durability = store::Durability::kWritten;
    for (int i = 0; i < 10; ++i) {
      b.inserts.push_back(make_job(next++, 1));
      b.inserts.back().spec.command = {"sh", "-c", std::string(3000, 'x')};
    }
    return st.commit(b);
  };
  const auto db_size = [&] { return std::filesystem::file_size(file); };
  const auto empty_size = db_size();
  int to_fill = 0;
  while (handed.empty() && to_fill < 1000) {
    ASSERT_TRUE(commit(**s));
    ++to_fill;
  }
  ASSERT_EQ(handed.size(), 1u) << "no checkpoint handed over after " << to_fill << " commits";
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(commit(**s));  // the log still full: none more while one waits
  EXPECT_EQ(handed.size(), 1u);
  EXPECT_EQ(db_size(), empty_size) << "a commit copied the log into the database";

  handed.front()();
  EXPECT_GT(db_size(), empty_size + 500 * page) << "the checkpoint copied nothing";
  EXPECT_EQ(count_rows(file, "SELECT count(*) FROM jobs"), static_cast<int>(next - 1));
  // The log starts over: the next checkpoint comes once it is full again, not with the next commit.
  int to_refill = 0;
  while (handed.size() == 1 && to_refill < 1000) {
    ASSERT_TRUE(commit(**s));
    ++to_refill;
  }
  EXPECT_EQ(handed.size(), 2u);
  EXPECT_GT(to_refill, to_fill / 2);
  s->reset();
  auto again = SqliteStateStore::open(file);
  ASSERT_TRUE(again);
  auto loaded = (*again)->load();
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->jobs.size(), static_cast<size_t>(next - 1));

  // Without checkpoint_on, SQLite's own: the commit that fills the log copies it into the database.
  const std::string plain_file = dir.file("p.db");
  auto plain = SqliteStateStore::open(plain_file);
  ASSERT_TRUE(plain);
  const auto plain_empty = std::filesystem::file_size(plain_file);
  for (int i = 0; i < to_fill; ++i) ASSERT_TRUE(commit(**plain));
  EXPECT_GT(std::filesystem::file_size(plain_file), plain_empty + 500 * page);
}

TEST(Service, SubmitsThatArriveTogetherShareOneCommitAndAreScheduled) {
  testing::TempDir dir;
  auto cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  ASSERT_TRUE(cluster);
  auto st = SqliteStateStore::open(dir.file("s.db"));
  ASSERT_TRUE(st);
  FakeLoop loop;
  daemon::Loop fake{
      [&](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
      [&](std::chrono::milliseconds, std::function<void()> fn) { loop.work.push_back(std::move(fn)); }};
  daemon::Service svc(*cluster, std::move(*st), std::move(fake), [] { return int64_t{5000}; });
  ASSERT_TRUE(svc.open());
  loop.run();
  const daemon::Caller ada{"ada", store::Role::kUser};
  std::vector<jobs::JobId> acked;
  for (int i = 0; i < 3; ++i) {
    jobs::JobSpec spec;
    spec.gpus = 8;
    ASSERT_TRUE(svc.prepare(spec, ada));
    svc.submit({spec}, ada, [&](Result<std::vector<jobs::JobId>> ids) {
      ASSERT_TRUE(ids);
      acked.push_back(ids->front());
    });
  }
  EXPECT_TRUE(acked.empty()) << "acknowledged before the commit";
  loop.run();
  EXPECT_EQ(acked, (std::vector<jobs::JobId>{1, 2, 3}));
  EXPECT_EQ(svc.stats().submit_commits_total, 1);
  EXPECT_EQ(svc.stats().submits_total, 3);
  for (jobs::JobId id : acked) {
    const JobRecord* r = svc.table().find(id);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->state, JobState::kStarting);
    EXPECT_EQ(r->nodes.size(), 1u);
    EXPECT_EQ(r->start_time, 5000);
  }
  jobs::JobSpec bad;
  bad.nodes = 1;
  bad.gpus_per_node = 9;
  EXPECT_FALSE(svc.prepare(bad, ada));
  jobs::JobSpec other;
  other.gpus = 1;
  other.user = "bob";
  auto denied = svc.prepare(other, ada);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kPermission);
}

// Epoch fencing (issue 30): a leader that fenced the database with its epoch may write until a newer leader
// claims it; then its commits fail (nothing written) and it hears of it; an older epoch cannot claim it.
TEST(SqliteStore, AWriterWithAnOlderEpochIsFencedOff) {
  testing::TempDir dir;
  auto old_leader = SqliteStateStore::open(dir.file("s.db"));
  auto new_leader = SqliteStateStore::open(dir.file("s.db"));
  ASSERT_TRUE(old_leader && new_leader);
  ASSERT_TRUE((*old_leader)->fence(5, true));
  store::WriteBatch b;
  b.inserts.push_back(make_job(1, 8));
  ASSERT_TRUE((*old_leader)->commit(b));
  ASSERT_TRUE((*new_leader)->fence(9, true));
  std::string fenced;
  (*old_leader)->set_on_fenced([&](const std::string& why) { fenced = why; });
  store::WriteBatch late;
  late.inserts.push_back(make_job(2, 8));
  auto s = (*old_leader)->commit(late);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kConflict);
  EXPECT_NE(fenced.find("epoch 9"), std::string::npos) << fenced;
  EXPECT_EQ(count_rows(dir.file("s.db"), "SELECT count(*) FROM jobs"), 1);
  EXPECT_FALSE((*old_leader)->fence(7, true));
  EXPECT_EQ((*new_leader)->stored_epoch(), 9);
  ASSERT_TRUE((*new_leader)->commit(late));
  EXPECT_EQ(count_rows(dir.file("s.db"), "SELECT count(*) FROM jobs"), 2);
}

// Idempotent submits (issue 30): a submit repeated with its key, before or after its commit and after a
// restart on the same database, makes no second job and gets the first one's ids; keys are per user.
TEST(Service, ASubmitRepeatedWithItsIdempotencyKeyGetsTheSameIds) {
  testing::TempDir dir;
  auto cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  ASSERT_TRUE(cluster);
  const daemon::Caller ada{"ada", store::Role::kUser}, bob{"bob", store::Role::kUser};
  std::vector<std::vector<jobs::JobId>> answers;
  auto record = [&](Result<std::vector<jobs::JobId>> ids) {
    ASSERT_TRUE(ids) << ids.error().message;
    answers.push_back(*ids);
  };
  auto specs = [](int n) {
    std::vector<jobs::JobSpec> out(static_cast<size_t>(n));
    for (auto& s : out) {
      s.gpus = 1;
      s.user = "";
    }
    return out;
  };
  {
    auto st = SqliteStateStore::open(dir.file("s.db"));
    ASSERT_TRUE(st);
    FakeLoop loop;
    daemon::Loop fake{[&](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
                      [&](std::chrono::milliseconds, std::function<void()> fn) { loop.work.push_back(std::move(fn)); }};
    daemon::Service svc(*cluster, std::move(*st), std::move(fake), [] { return int64_t{5000}; });
    ASSERT_TRUE(svc.open());
    loop.run();
    auto batch = specs(3);
    for (auto& s : batch) ASSERT_TRUE(svc.prepare(s, ada));
    svc.submit(batch, ada, record, "k1");
    svc.submit(batch, ada, record, "k1");  // a retry while the first is not committed yet
    loop.run();
    svc.submit(batch, ada, record, "k1");  // a retry after
    auto one = specs(1);
    ASSERT_TRUE(svc.prepare(one[0], bob));
    svc.submit(one, bob, record, "k1");  // another user's key
    loop.run();
    ASSERT_EQ(answers.size(), 4u);
    EXPECT_EQ(answers[0], (std::vector<jobs::JobId>{1, 2, 3}));
    EXPECT_EQ(answers[1], answers[0]);
    EXPECT_EQ(answers[2], answers[0]);
    EXPECT_EQ(answers[3], (std::vector<jobs::JobId>{4}));
    EXPECT_EQ(svc.stats().submits_total, 4);
  }
  auto st = SqliteStateStore::open(dir.file("s.db"));
  ASSERT_TRUE(st);
  FakeLoop loop;
  daemon::Loop fake{[&](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
                    [&](std::chrono::milliseconds, std::function<void()> fn) { loop.work.push_back(std::move(fn)); }};
  daemon::Service svc(*cluster, std::move(*st), std::move(fake), [] { return int64_t{5000}; });
  ASSERT_TRUE(svc.open());  // a new leader on the same database
  loop.run();
  auto one = specs(1);
  ASSERT_TRUE(svc.prepare(one[0], bob));
  svc.submit(one, bob, record, "k1");
  loop.run();
  ASSERT_EQ(answers.size(), 5u);
  EXPECT_EQ(answers[4], (std::vector<jobs::JobId>{4}));
  EXPECT_EQ(svc.table().jobs().size(), 4u);
}

// Submits committed through a second connection on a test-controlled executor: the loop keeps going while
// a commit is in flight, submits that arrive meanwhile form the next commit, and nobody hears back (nor
// does the table know the job) before the commit that holds the job is done.
// A one-SU cluster and two connections to one new database: the service's and the submit committer's.
struct TwoConnections {
  testing::TempDir dir;
  Result<topology::Cluster> cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  Result<std::unique_ptr<SqliteStateStore>> st = SqliteStateStore::open(dir.file("s.db"));
  Result<std::unique_ptr<SqliteStateStore>> second = SqliteStateStore::open(dir.file("s.db"));
  bool ok() const { return cluster && st && second; }
  std::string file() const { return dir.file("s.db"); }
};

TEST(Service, SubmitCommitsOffTheLoopAreOrderedAndAckedOnlyOnceOnDisk) {
  TwoConnections db;
  ASSERT_TRUE(db.ok());
  FakeLoop loop;
  daemon::Loop fake{
      [&](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
      [&](std::chrono::milliseconds, std::function<void()> fn) { loop.work.push_back(std::move(fn)); }};
  daemon::Service svc(*db.cluster, std::move(*db.st), std::move(fake), [] { return int64_t{5000}; });
  std::deque<std::function<void()>> committer;
  svc.set_submit_committer(
      std::move(*db.second), [&](std::function<void()> fn) { committer.push_back(std::move(fn)); }, 2);
  ASSERT_TRUE(svc.open());
  loop.run();
  const daemon::Caller ada{"ada", store::Role::kUser};
  std::vector<std::vector<jobs::JobId>> acked;
  auto submit = [&](int n) {
    jobs::JobSpec spec;
    spec.gpus = 8;
    EXPECT_TRUE(svc.prepare(spec, ada));
    svc.submit(std::vector<jobs::JobSpec>(static_cast<size_t>(n), spec), ada, [&](Result<std::vector<jobs::JobId>> ids) {
      ASSERT_TRUE(ids) << ids.error().message;
      acked.push_back(*ids);
    });
  };
  const std::string jobs_on_disk = "SELECT count(*) FROM jobs";
  submit(2);
  loop.run();
  ASSERT_EQ(committer.size(), 1u) << "the first submit's commit is handed to the committer";
  submit(1);
  submit(3);
  loop.run();
  EXPECT_EQ(committer.size(), 1u) << "one commit in flight at a time";
  EXPECT_EQ(count_rows(db.file(), jobs_on_disk), 0);
  auto run_commit = [&] {
    auto fn = std::move(committer.front());
    committer.pop_front();
    fn();
  };
  run_commit();
  EXPECT_EQ(count_rows(db.file(), jobs_on_disk), 2);
  EXPECT_TRUE(acked.empty()) << "acknowledged on the committer's thread";
  EXPECT_EQ(svc.table().find(1), nullptr);
  loop.run();  // the first commit is applied and acked; the two that waited form the next commit
  ASSERT_EQ(acked.size(), 1u);
  EXPECT_EQ(acked[0], (std::vector<jobs::JobId>{1, 2}));
  ASSERT_NE(svc.table().find(2), nullptr);
  EXPECT_EQ(svc.table().find(3), nullptr);
  ASSERT_EQ(committer.size(), 1u);
  // The loop's own commits use the first connection meanwhile.
  ASSERT_TRUE(svc.act(2, jobs::JobEvent::kCancelled, ada));
  run_commit();
  loop.run();
  ASSERT_EQ(acked.size(), 3u);
  EXPECT_EQ(acked[1], (std::vector<jobs::JobId>{3}));
  EXPECT_EQ(acked[2], (std::vector<jobs::JobId>{4, 5, 6}));
  EXPECT_EQ(svc.stats().submit_commits_total, 2);
  EXPECT_EQ(svc.stats().submits_total, 6);
  EXPECT_EQ(count_rows(db.file(), jobs_on_disk), 6);
  EXPECT_EQ(count_rows(db.file(), "SELECT count(*) FROM events WHERE what = 'submitted'"), 6);
  EXPECT_EQ(svc.table().find(2)->state, JobState::kCancelled);
  EXPECT_TRUE(committer.empty());
  // Fewer jobs than the committer's minimum (2) commit on the loop.
  submit(1);
  loop.run();
  EXPECT_TRUE(committer.empty());
  ASSERT_EQ(acked.size(), 4u);
  EXPECT_EQ(acked[3], (std::vector<jobs::JobId>{7}));
  EXPECT_EQ(count_rows(db.file(), jobs_on_disk), 7);
}

// The daemon's form: a real thread and a loop that other threads post to.
TEST(Service, SubmitCommitsOnTheirOwnThreadLoseAndReorderNothing) {
  TwoConnections db;
  ASSERT_TRUE(db.ok());
  std::mutex mutex;
  std::deque<std::function<void()>> posted;
  daemon::Loop loop{[&](std::function<void()> fn) {
                      std::lock_guard lock(mutex);
                      posted.push_back(std::move(fn));
                    },
                    [&](std::chrono::milliseconds, std::function<void()> fn) {
                      std::lock_guard lock(mutex);
                      posted.push_back(std::move(fn));
                    }};
  auto run_one = [&] {
    std::function<void()> fn;
    {
      std::lock_guard lock(mutex);
      if (posted.empty()) return false;
      fn = std::move(posted.front());
      posted.pop_front();
    }
    fn();
    return true;
  };
  daemon::Service svc(*db.cluster, std::move(*db.st), std::move(loop), [] { return int64_t{5000}; });
  svc.commit_submits_on_thread(std::move(*db.second), 1);
  ASSERT_TRUE(svc.open());
  const daemon::Caller ada{"ada", store::Role::kUser};
  jobs::JobSpec spec;
  spec.gpus = 1;
  ASSERT_TRUE(svc.prepare(spec, ada));
  std::vector<jobs::JobId> acked;
  constexpr int kRequests = 200;
  for (int i = 0; i < kRequests; ++i) {
    svc.submit({spec, spec}, ada, [&](Result<std::vector<jobs::JobId>> ids) {
      ASSERT_TRUE(ids) << ids.error().message;
      acked.insert(acked.end(), ids->begin(), ids->end());
    });
    run_one();
  }
  for (int spins = 0; acked.size() < 2 * kRequests && spins < 200'000; ++spins)
    if (!run_one()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  ASSERT_EQ(acked.size(), 2u * kRequests);
  for (size_t i = 0; i < acked.size(); ++i) EXPECT_EQ(acked[i], static_cast<jobs::JobId>(i + 1));
  EXPECT_EQ(count_rows(db.file(), "SELECT count(*) FROM jobs"), 2 * kRequests);
  EXPECT_EQ(svc.stats().submits_total, 2 * kRequests);
  EXPECT_LT(svc.stats().submit_commits_total, kRequests) << "submits that queued meanwhile share commits";
  while (run_one()) {
  }
}

// A service whose passes run on a fake executor: a pass's snapshot is taken on the loop, and its plan is
// computed only when the test says so, so the test can change the table while the pass is in flight.
class InFlight {
 public:
  InFlight(const testing::TempDir& dir, std::unique_ptr<topology::Cluster> cluster)
      : cluster_(std::move(cluster)) {
    auto st = SqliteStateStore::open(dir.file("s.db"));
    if (!st) throw std::runtime_error(st.error().message);
    daemon::Loop fake{
        [this](std::function<void()> fn) { loop_.work.push_back(std::move(fn)); },
        [this](std::chrono::milliseconds, std::function<void()> fn) { loop_.work.push_back(std::move(fn)); }};
    svc = std::make_unique<daemon::Service>(*cluster_, std::move(*st), std::move(fake),
                                            [] { return int64_t{5000}; });
    svc->set_pass_executor([this](std::function<void()> fn) { worker.push_back(std::move(fn)); });
    if (!svc->open()) throw std::runtime_error("open failed");
    loop_.run();
  }
  // Submits whole-node jobs and runs the loop: committed, and a pass is in flight.
  std::vector<jobs::JobId> submit(const std::vector<int>& gpus) {
    std::vector<jobs::JobSpec> specs;
    for (int g : gpus) {
      jobs::JobSpec spec;
      spec.gpus = g;
      EXPECT_TRUE(svc->prepare(spec, kAdmin));
      specs.push_back(spec);
    }
    std::vector<jobs::JobId> ids;
    svc->submit(specs, kAdmin, [&](Result<std::vector<jobs::JobId>> r) { ids = *r; });
    loop_.run();
    return ids;
  }
  // Runs what the loop holds, then computes the pass in flight and applies its plan.
  void finish_pass() {
    loop_.run();
    ASSERT_EQ(worker.size(), 1u) << "one pass in flight";
    auto fn = std::move(worker.front());
    worker.pop_front();
    fn();
    loop_.run();
  }
  const JobRecord& job(jobs::JobId id) const { return *svc->table().find(id); }
  topology::NodeId node_of(jobs::JobId id) const { return cluster_->find_node(job(id).nodes.at(0)); }

  static inline const daemon::Caller kAdmin{"root", store::Role::kAdmin};
  std::unique_ptr<daemon::Service> svc;
  std::deque<std::function<void()>> worker;

 private:
  std::unique_ptr<topology::Cluster> cluster_;
  FakeLoop loop_;
};

std::unique_ptr<topology::Cluster> two_nodes() {
  auto c =
      topology::read_cluster_json(R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}],
    "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n1"}, {"name": "leaf2", "level": "leaf", "nodes": "n2"},
                 {"name": "spine", "level": "spine", "children": ["leaf1", "leaf2"]}]})");
  if (!c) throw std::runtime_error(c.error().message);
  return std::make_unique<topology::Cluster>(std::move(*c));
}

TEST(ServicePass, StartsOfJobsCancelledOrHeldDuringThePassAreNotCommitted) {
  testing::TempDir dir;
  auto cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  ASSERT_TRUE(cluster);
  InFlight f(dir, std::make_unique<topology::Cluster>(std::move(*cluster)));
  const auto ids = f.submit({8, 8, 8});
  ASSERT_EQ(ids.size(), 3u);
  ASSERT_EQ(f.worker.size(), 1u);  // snapshot taken with all three pending
  ASSERT_TRUE(f.svc->act(ids[0], jobs::JobEvent::kCancelled, InFlight::kAdmin));
  ASSERT_TRUE(f.svc->act(ids[1], jobs::JobEvent::kHeld, InFlight::kAdmin));
  f.finish_pass();
  EXPECT_EQ(f.job(ids[0]).state, JobState::kCancelled);
  EXPECT_TRUE(f.job(ids[0]).nodes.empty());
  EXPECT_EQ(f.job(ids[0]).attempt, 0);
  EXPECT_EQ(f.job(ids[1]).state, JobState::kHeld);
  EXPECT_TRUE(f.job(ids[1]).nodes.empty());
  EXPECT_EQ(f.job(ids[2]).state, JobState::kStarting);  // still valid: committed
  EXPECT_EQ(f.svc->stats().stale_starts_total, 2);
  EXPECT_EQ(f.svc->stats().passes_total, 1);
  // The cancel and hold asked for a pass while this one ran: it follows, and finds nothing to start.
  f.finish_pass();
  EXPECT_EQ(f.job(ids[1]).state, JobState::kHeld);
  EXPECT_TRUE(f.worker.empty());
}

TEST(ServicePass, StartsOnNodesDrainedOrGpusTakenDuringThePassAreRetriedInTheNextPass) {
  testing::TempDir dir;
  InFlight f(dir, two_nodes());
  const auto ids = f.submit({8, 8});
  ASSERT_EQ(f.worker.size(), 1u);
  // While the pass runs: n1 is drained, and n2's first GPU is held by an allocation being killed.
  ASSERT_TRUE(f.svc->set_node_health("n1", sched::NodeHealth::kDrain, "maintenance", InFlight::kAdmin));
  f.svc->table().hold_gpus({"99.1", ids[0], {8}, {"n2"}});
  f.finish_pass();
  for (auto id : ids) {
    EXPECT_EQ(f.job(id).state, JobState::kPending) << id;
    EXPECT_TRUE(f.job(id).nodes.empty()) << id;
  }
  EXPECT_EQ(f.svc->stats().stale_starts_total, 2);
  // The next pass sees n1 drained and GPU 8 held: nothing fits, and each job says why (in memory).
  f.finish_pass();
  EXPECT_EQ(f.job(ids[0]).state, JobState::kPending);
  EXPECT_EQ(f.job(ids[0]).reason.rfind("resources", 0), 0u) << f.job(ids[0]).reason;
  EXPECT_EQ(f.job(ids[1]).state, JobState::kPending);
  EXPECT_TRUE(f.worker.empty());
  // GPU 8 freed and n1 resumed: both start, one per node.
  f.svc->table().release_gpus("99.1");
  ASSERT_TRUE(f.svc->set_node_health("n1", sched::NodeHealth::kUp, "", InFlight::kAdmin));
  f.finish_pass();
  EXPECT_EQ(f.job(ids[0]).state, JobState::kStarting);
  EXPECT_EQ(f.job(ids[1]).state, JobState::kStarting);
  EXPECT_NE(f.node_of(ids[0]), f.node_of(ids[1]));
  EXPECT_EQ(f.svc->stats().stale_starts_total, 2);
}

TEST(ServicePass, AStartIsKeptWhenOnlyOtherNodesChanged) {
  testing::TempDir dir;
  InFlight f(dir, two_nodes());
  const auto ids = f.submit({8});
  ASSERT_EQ(f.worker.size(), 1u);
  f.finish_pass();  // learn where the job goes, then replay the same situation with the other node drained
  const std::string used = f.job(ids[0]).nodes.at(0);
  ASSERT_TRUE(f.svc->act(ids[0], jobs::JobEvent::kCancelled, InFlight::kAdmin));
  const auto next = f.submit({8});  // freed GPUs come back in this pass's snapshot
  ASSERT_EQ(f.worker.size(), 1u);
  const std::string other = used == "n1" ? "n2" : "n1";
  ASSERT_TRUE(f.svc->set_node_health(other, sched::NodeHealth::kDrain, "", InFlight::kAdmin));
  f.finish_pass();
  EXPECT_EQ(f.job(next[0]).state, JobState::kStarting);
  EXPECT_EQ(f.job(next[0]).nodes.at(0), used);
  EXPECT_EQ(f.svc->stats().stale_starts_total, 0);
}

// --- Arrays: one record at submit, tasks created a window at a time by the passes ---

// A one-SU cluster, a service on a fake loop over a database that outlives it (reopen() is a restart).
struct ArrayWorld {
  testing::TempDir dir;
  Result<topology::Cluster> cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  FakeLoop loop;
  std::unique_ptr<daemon::Service> svc;
  int64_t now = 5000;
  const daemon::Caller ada{"ada", store::Role::kUser};

  // `before_open`: what a test sets on the new service before open() (a submit committer).
  void reopen(const std::function<void(daemon::Service&)>& before_open = {}) {
    svc.reset();
    loop.work.clear();
    auto st = SqliteStateStore::open(dir.file("a.db"));
    ASSERT_TRUE(st);
    daemon::Loop fake{
        [this](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
        [this](std::chrono::milliseconds, std::function<void()> fn) { loop.work.push_back(std::move(fn)); }};
    svc =
        std::make_unique<daemon::Service>(*cluster, std::move(*st), std::move(fake), [this] { return now; });
    if (before_open) before_open(*svc);
    ASSERT_TRUE(svc->open());
    loop.run();
  }
  jobs::JobId submit(jobs::JobSpec spec) {
    if (auto s = svc->prepare(spec, ada); !s) {
      ADD_FAILURE() << s.error().message;
      return 0;
    }
    jobs::JobId id = 0;
    svc->submit({spec}, ada, [&](Result<std::vector<jobs::JobId>> ids) {
      if (ids) id = ids->front();
    });
    loop.run();
    return id;
  }
  jobs::JobId submit_array(const std::string& array, int gpus = 8) {
    jobs::JobSpec spec;
    spec.gpus = gpus;
    spec.command = {"true"};
    spec.array = jobs::parse_array_spec(array).value();
    return submit(spec);
  }
  const JobRecord& job(jobs::JobId id) { return *svc->table().find(id); }
  const daemon::ArrayProgress& progress(jobs::JobId id) { return *svc->table().array(id); }
  std::vector<jobs::JobId> tasks(jobs::JobId array) { return progress(array).tasks; }
  // Ends tasks as the agent hub would (one commit), then lets the passes run.
  void end(const std::vector<jobs::JobId>& ids, JobState state, std::optional<int> exit_code = {}) {
    store::WriteBatch b;
    b.durability = store::Durability::kWritten;
    for (jobs::JobId id : ids) {
      JobRecord r = job(id);
      r.state = state;
      r.end_time = now;
      r.exit_code = exit_code;
      b.updates.push_back(r);
    }
    ASSERT_TRUE(svc->commit(b));
    loop.run();
  }
  std::vector<int> indexes(jobs::JobId array) {
    std::vector<int> out;
    for (jobs::JobId t : tasks(array)) out.push_back(job(t).spec.array_task);
    return out;
  }
  size_t count(jobs::JobId array, JobState state) {
    size_t n = 0;
    for (jobs::JobId t : tasks(array)) n += job(t).state == state;
    return n;
  }
};

TEST(ServiceArrays, AnArrayIsOneRecordAndItsTasksComeAWindowAtATime) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId a = w.submit_array("10-19%3");
  ASSERT_EQ(a, 1);
  EXPECT_EQ(w.svc->stats().submits_total, 1);  // the submit stored one record
  EXPECT_EQ(w.job(a).state, JobState::kPending);
  // The first pass created the first three tasks (the "%3") and placed them; the array itself is never
  // placed.
  ASSERT_EQ(w.tasks(a), (std::vector<jobs::JobId>{2, 3, 4}));
  EXPECT_EQ(w.indexes(a), (std::vector<int>{10, 11, 12}));
  EXPECT_EQ(w.count(a, JobState::kStarting), 3u);
  EXPECT_TRUE(w.job(a).nodes.empty());
  const JobRecord& t = w.job(3);
  EXPECT_EQ(t.spec.array_job, a);
  EXPECT_FALSE(t.spec.array);
  EXPECT_EQ(t.spec.env.at("RAILYARD_ARRAY_JOB_ID"), "1");
  EXPECT_EQ(t.spec.env.at("RAILYARD_ARRAY_TASK_ID"), "11");
  EXPECT_EQ(t.submit_time, w.job(a).submit_time);
  EXPECT_EQ(w.svc->stats().array_tasks_total, 3);

  w.end({2}, JobState::kCompleted);  // one ends: one more is created
  EXPECT_EQ(w.indexes(a), (std::vector<int>{10, 11, 12, 13}));
  EXPECT_EQ(w.progress(a).active, 3);
  w.end({3}, JobState::kFailed, 3);
  EXPECT_EQ(w.progress(a).failed, 1);
  EXPECT_EQ(w.progress(a).completed, 1);
  while (w.progress(a).active > 0) {
    std::vector<jobs::JobId> live;
    for (jobs::JobId id : w.tasks(a))
      if (!jobs::is_terminal(w.job(id).state)) live.push_back(id);
    EXPECT_LE(live.size(), 3u);
    w.end(live, JobState::kCompleted);
  }
  EXPECT_EQ(w.indexes(a), (std::vector<int>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(w.job(a).state, JobState::kFailed);  // one task failed
  EXPECT_EQ(w.job(a).reason, "1 of 10 tasks did not complete");
  EXPECT_EQ(w.job(a).exit_code, 3);  // the highest of its tasks', as sbatch --wait gives
  EXPECT_EQ(w.job(a).end_time, w.now);
  EXPECT_FALSE(w.svc->table().has_open_arrays());

  const jobs::JobId b = w.submit_array("0-1");
  w.end(w.tasks(b), JobState::kCompleted, 0);
  EXPECT_EQ(w.job(b).state, JobState::kCompleted);
  EXPECT_EQ(w.job(b).exit_code, 0);
  EXPECT_EQ(w.job(b).reason, "");
}

TEST(ServiceArrays, WithoutACapTheWindowFillsTheClusterAndLaterTasksWait) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const int64_t gpus = w.cluster->gpu_count();
  const jobs::JobId a = w.submit_array("0-999", 8);
  const int64_t window = std::max<int64_t>(lifecycle::kMinArrayWindow, gpus / 8);
  EXPECT_EQ(w.svc->table().array_window(w.job(a).spec), window);
  EXPECT_EQ(w.progress(a).created(), window);
  EXPECT_EQ(static_cast<int64_t>(w.count(a, JobState::kStarting)), gpus / 8);
  EXPECT_EQ(static_cast<int64_t>(w.count(a, JobState::kPending)), window - gpus / 8);
}

TEST(ServiceArrays, ARestartGoesOnFromTheTasksOnDiskWithoutRepeatingAnIndex) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId a = w.submit_array("0-7%2");
  w.end(w.tasks(a), JobState::kCompleted);
  ASSERT_EQ(w.progress(a).created(), 4);
  ASSERT_TRUE(w.svc->store().sync());
  w.reopen();
  const auto& p = w.progress(a);
  EXPECT_EQ(p.total, 8);
  EXPECT_EQ(p.created(), 4);
  EXPECT_EQ(p.completed, 2);
  EXPECT_EQ(p.active, 2);
  while (w.progress(a).active > 0) {
    std::vector<jobs::JobId> live;
    for (jobs::JobId id : w.tasks(a))
      if (!jobs::is_terminal(w.job(id).state)) live.push_back(id);
    w.end(live, JobState::kCompleted);
  }
  EXPECT_EQ(w.indexes(a), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(w.job(a).state, JobState::kCompleted);
}

TEST(ServiceArrays, CancelHoldAndReleaseOfAnArrayReachItsTasks) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const int per_gpus = static_cast<int>(w.cluster->gpu_count() / 2);  // two tasks fill the cluster
  const jobs::JobId a = w.submit_array("0-9%4", per_gpus);
  EXPECT_EQ(w.count(a, JobState::kStarting), 2u);
  EXPECT_EQ(w.count(a, JobState::kPending), 2u);

  auto held = w.svc->act(a, jobs::JobEvent::kHeld, w.ada);
  ASSERT_TRUE(held) << held.error().message;
  w.loop.run();
  EXPECT_EQ(w.job(a).state, JobState::kHeld);
  EXPECT_EQ(w.count(a, JobState::kHeld), 2u);  // the pending ones
  w.end({w.tasks(a)[0], w.tasks(a)[1]}, JobState::kCompleted);
  EXPECT_EQ(w.progress(a).created(), 4);  // a held array creates nothing
  EXPECT_EQ(w.count(a, JobState::kHeld), 2u);

  ASSERT_TRUE(w.svc->act(a, jobs::JobEvent::kReleased, w.ada));
  w.loop.run();
  EXPECT_EQ(w.job(a).state, JobState::kPending);
  EXPECT_EQ(w.count(a, JobState::kStarting), 2u);
  EXPECT_EQ(w.progress(a).created(), 6);

  auto cancelled = w.svc->act(a, jobs::JobEvent::kCancelled, w.ada);
  ASSERT_TRUE(cancelled) << cancelled.error().message;
  w.loop.run();
  EXPECT_EQ(w.job(a).state, JobState::kCancelled);
  EXPECT_EQ(w.progress(a).active, 0);
  EXPECT_EQ(w.count(a, JobState::kCancelled), 4u);  // two started, two pending
  EXPECT_EQ(w.progress(a).created(), 6);
  const daemon::Caller bob{"bob", store::Role::kUser};
  EXPECT_EQ(w.svc->act(a, jobs::JobEvent::kCancelled, bob).error().code, ErrorCode::kPermission);
  EXPECT_EQ(w.svc->act(a, jobs::JobEvent::kCancelled, w.ada).error().code, ErrorCode::kConflict);
}

TEST(ServiceArrays, AfterokOnAnArrayWaitsForAllItsTasksAndUsersCannotMakeTasks) {
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId a = w.submit_array("0-2");
  jobs::JobSpec after;
  after.gpus = 8;
  after.command = {"true"};
  after.afterok = {a};
  const jobs::JobId b = w.submit(after);
  EXPECT_EQ(w.job(b).state, JobState::kPending);
  w.end({w.tasks(a)[0], w.tasks(a)[1]}, JobState::kCompleted);
  EXPECT_EQ(w.job(b).state, JobState::kPending);
  w.end({w.tasks(a)[2]}, JobState::kCompleted);
  EXPECT_EQ(w.job(a).state, JobState::kCompleted);
  EXPECT_EQ(w.job(b).state, JobState::kStarting);

  // An array that depends on a job creates no task before that job completed, and fails without any when
  // it cannot complete.
  jobs::JobSpec blocker;
  blocker.gpus = 8;
  blocker.command = {"true"};
  const jobs::JobId x = w.submit(blocker);
  const jobs::JobId y = w.submit(blocker);
  auto waiting_array = [&](jobs::JobId dep) {
    jobs::JobSpec spec;
    spec.gpus = 8;
    spec.command = {"true"};
    spec.afterok = {dep};
    spec.array = jobs::parse_array_spec("0-3").value();
    return w.submit(spec);
  };
  const jobs::JobId after_x = waiting_array(x), after_y = waiting_array(y);
  EXPECT_EQ(w.progress(after_x).created(), 0);
  EXPECT_EQ(w.job(after_x).reason, "dependency: waits for job " + std::to_string(x));
  w.end({x}, JobState::kCompleted);
  EXPECT_EQ(w.progress(after_x).created(), 4);
  EXPECT_EQ(w.job(after_x).reason, "");
  w.end({y}, JobState::kFailed);
  EXPECT_EQ(w.progress(after_y).created(), 0);
  EXPECT_EQ(w.job(after_y).state, JobState::kFailed);
  EXPECT_EQ(w.job(after_y).reason, "dependency: job " + std::to_string(y) + " did not complete successfully");

  jobs::JobSpec forged;
  forged.gpus = 1;
  forged.array_job = a;
  forged.array_task = 7;
  auto refused = w.svc->prepare(forged, w.ada);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("set by the scheduler"), std::string::npos);
}

// --- Dependencies besides afterok: afterany, afternotok, one task of an array, aftercorr ---

jobs::JobSpec eight_gpus(std::vector<jobs::Dependency> after = {}) {
  jobs::JobSpec spec;
  spec.gpus = 8;
  spec.command = {"true"};
  spec.after = std::move(after);
  return spec;
}

TEST(ServiceDependencies, AfteranyAndAfternotokStartOnTheEndsTheyName) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId x = w.submit(eight_gpus()), y = w.submit(eight_gpus());
  const jobs::JobId any_x = w.submit(eight_gpus({{T::kAfterAny, x}}));
  const jobs::JobId notok_x = w.submit(eight_gpus({{T::kAfterNotOk, x}}));
  const jobs::JobId notok_y = w.submit(eight_gpus({{T::kAfterNotOk, y}}));
  // A job that names itself or a later one would wait forever: refused at submit.
  const jobs::JobId next = w.svc->table().next_id();
  for (jobs::JobId id : {next, next + 5}) {
    jobs::JobSpec later = eight_gpus({{T::kAfterAny, id}});
    auto st = w.svc->prepare(later, w.ada);
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().message, "dependency afterany:" + std::to_string(id) + ": job " +
                                      std::to_string(id) + " is not an earlier job (this one will be job " +
                                      std::to_string(next) +
                                      "; a job can wait only for jobs submitted before it)");
    later = eight_gpus();
    later.afterok = {id};
    EXPECT_FALSE(w.svc->prepare(later, w.ada));
  }
  // In one batch, a job may name an earlier job of that batch (the ids are given in order).
  jobs::JobSpec second = eight_gpus({{T::kAfterAny, next}});
  const jobs::JobSpec first = eight_gpus();
  EXPECT_TRUE(w.svc->prepare(second, w.ada, std::span(&first, 1)));
  EXPECT_FALSE(w.svc->prepare(second, w.ada));

  w.end({x}, JobState::kFailed, 1);  // ended, not completed: both of x's dependents start
  EXPECT_EQ(w.job(any_x).state, JobState::kStarting);
  EXPECT_EQ(w.job(notok_x).state, JobState::kStarting);
  EXPECT_EQ(w.job(notok_y).state, JobState::kPending);
  w.end({y}, JobState::kCompleted, 0);  // completed: afternotok can never be met
  EXPECT_EQ(w.job(notok_y).state, JobState::kFailed);
  EXPECT_EQ(w.job(notok_y).reason,
            "dependency: job " + std::to_string(y) + " completed successfully (afternotok)");
}

TEST(ServiceDependencies, ADependencyOnOneTaskWaitsForThatTaskAlone) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId a = w.submit_array("0-5%2");  // two tasks at a time: index 4 is created late
  const jobs::JobId on_1 = w.submit(eight_gpus({{T::kAfterOk, a, 1}}));
  const jobs::JobId on_4 = w.submit(eight_gpus({{T::kAfterAny, a, 4}}));
  EXPECT_EQ(w.job(on_1).reason, "dependency: waits for task 1 of array " + std::to_string(a));
  EXPECT_EQ(w.job(on_4).reason, "dependency: waits for task 4 of array " + std::to_string(a) + " to end");
  w.end({w.tasks(a)[0]}, JobState::kCompleted, 0);  // index 0: nothing of on_1's
  EXPECT_EQ(w.job(on_1).state, JobState::kPending);
  w.end({w.tasks(a)[1]}, JobState::kCompleted, 0);  // index 1, with the rest of the array still to come
  EXPECT_EQ(w.job(on_1).state, JobState::kStarting);
  EXPECT_EQ(w.job(on_4).state, JobState::kPending);  // index 4 not even created yet
  EXPECT_EQ(w.progress(a).created(), 4);
  // Cancelling the array before it created index 4: that task never runs, which afterany accepts.
  ASSERT_TRUE(w.svc->act(a, jobs::JobEvent::kCancelled, w.ada));
  w.loop.run();
  EXPECT_EQ(w.progress(a).created(), 4);
  EXPECT_EQ(w.job(on_4).state, JobState::kStarting);

  // What cannot name a task is refused at submit, with the reason.
  const jobs::JobId plain = w.submit(eight_gpus());
  auto refused = [&](jobs::Dependency d) {
    jobs::JobSpec spec = eight_gpus({d});
    if (d.type == T::kAfterCorr) spec.array = jobs::parse_array_spec("0-1").value();
    auto st = w.svc->prepare(spec, w.ada);
    return st ? std::string("accepted") : st.error().message;
  };
  EXPECT_EQ(refused({T::kAfterOk, a, 9}), "dependency afterok:" + std::to_string(a) + "_9: array " +
                                              std::to_string(a) + " (0-5%2) has no task 9");
  EXPECT_EQ(refused({T::kAfterOk, plain, 0}), "dependency afterok:" + std::to_string(plain) + "_0: job " +
                                                  std::to_string(plain) + " is not an array");
  EXPECT_EQ(refused({T::kAfterCorr, plain}), "dependency aftercorr:" + std::to_string(plain) + ": job " +
                                                 std::to_string(plain) + " is not an array");
  EXPECT_EQ(refused({T::kAfterAny, 999, 1}).substr(0, 56),
            "dependency afterany:999_1: job 999 is not an earlier job");
  EXPECT_EQ(refused({T::kAfterAny, a, 5}), "accepted");
}

// Parking (JobTable::park): jobs a pass found held or waiting on a dependency sit out the passes until they,
// or what they wait for, change; they still start when it does.
TEST(ServiceDependencies, HeldAndDependentJobsSitOutThePassesUntilWhatTheyWaitForChanges) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const daemon::JobTable& table = w.svc->table();
  auto in_passes = [&](jobs::JobId id) {
    const auto snap = table.snapshot(w.now);
    return std::any_of(snap.pending.begin(), snap.pending.end(), [&](const auto& p) { return p.id == id; });
  };
  const jobs::JobId x = w.submit(eight_gpus());
  const jobs::JobId a = w.submit_array("0-3");
  const jobs::JobId on_x = w.submit(eight_gpus({{T::kAfterOk, x}}));
  const jobs::JobId on_task = w.submit(eight_gpus({{T::kAfterOk, a, 2}}));
  const jobs::JobId held = w.submit(eight_gpus({{T::kAfterOk, x}}));
  EXPECT_EQ(table.parked_count(), 3u);  // parked by the passes that followed their submits
  ASSERT_TRUE(w.svc->act(held, jobs::JobEvent::kHeld, w.ada));
  EXPECT_EQ(table.parked_count(), 2u);  // its own change takes it back into the passes...
  w.loop.run();
  EXPECT_EQ(table.parked_count(), 3u);  // ...where it is found held
  EXPECT_EQ(w.job(held).state, JobState::kHeld);
  EXPECT_EQ(w.job(on_x).reason, "dependency: waits for job " + std::to_string(x));
  EXPECT_EQ(w.job(on_task).reason, "dependency: waits for task 2 of array " + std::to_string(a));
  for (jobs::JobId id : {on_x, on_task, held}) EXPECT_FALSE(in_passes(id)) << id;
  EXPECT_EQ(table.active_count(), 8u);  // x, 4 tasks (the array itself is not a job to place) and 3 parked

  // x starting to run changes nothing for its dependents; a task of the array ending wakes the job that
  // names one of its tasks, which the next pass parks again.
  store::WriteBatch running;
  running.durability = store::Durability::kWritten;
  running.updates.push_back(w.job(x));
  running.updates.back().state = JobState::kRunning;
  ASSERT_TRUE(w.svc->commit(running));
  EXPECT_EQ(table.parked_count(), 3u);
  w.loop.run();
  ASSERT_TRUE(w.svc->commit([&] {
    store::WriteBatch b;
    b.durability = store::Durability::kWritten;
    b.updates.push_back(w.job(w.tasks(a)[1]));
    b.updates.back().state = JobState::kCompleted;
    return b;
  }()));
  EXPECT_EQ(table.parked_count(), 2u);
  EXPECT_TRUE(in_passes(on_task));
  w.loop.run();
  EXPECT_EQ(table.parked_count(), 3u);
  EXPECT_EQ(w.job(on_task).reason, "dependency: waits for task 2 of array " + std::to_string(a));

  // Released, the held job waits for x again; each starts once what it waits for is met.
  ASSERT_TRUE(w.svc->act(held, jobs::JobEvent::kReleased, w.ada));
  w.loop.run();
  EXPECT_EQ(w.job(held).state, JobState::kPending);
  EXPECT_EQ(w.job(held).reason, "dependency: waits for job " + std::to_string(x));
  EXPECT_EQ(table.parked_count(), 3u);
  w.end({w.tasks(a)[2]}, JobState::kCompleted, 0);
  EXPECT_EQ(w.job(on_task).state, JobState::kStarting);
  w.end({x}, JobState::kCompleted, 0);
  EXPECT_EQ(w.job(on_x).state, JobState::kStarting);
  EXPECT_EQ(w.job(held).state, JobState::kStarting);
  EXPECT_EQ(table.parked_count(), 0u);

  // A job waiting for GPUs is never parked: what it waits for is not a job.
  jobs::JobSpec whole = eight_gpus();
  whole.gpus = static_cast<int>(w.cluster->gpu_count());
  const jobs::JobId big = w.submit(whole);
  EXPECT_EQ(w.job(big).state, JobState::kPending);
  EXPECT_TRUE(in_passes(big));
  EXPECT_EQ(table.parked_count(), 0u);
}

// The plan park() gets was computed on another thread from an older snapshot: a verdict is kept only while
// it still holds, and was written as the job's reason.
TEST(ServiceDependencies, ParkingKeepsOnlyVerdictsThatStillHold) {
  using T = jobs::Dependency::Type;
  Result<topology::Cluster> cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  ASSERT_TRUE(cluster);
  daemon::JobTable table(*cluster);
  auto record = [](jobs::JobId id, JobState state, std::vector<jobs::Dependency> after, std::string reason) {
    JobRecord r;
    r.id = id;
    r.state = state;
    r.spec = eight_gpus(std::move(after));
    r.reason = std::move(reason);
    return r;
  };
  const std::string held = "held: held";
  store::StoredState stored;
  stored.jobs = {
      record(1, JobState::kStarting, {}, ""),
      record(2, JobState::kCompleted, {}, ""),
      record(3, JobState::kPending, {{T::kAfterOk, 1}}, "dependency: waits for job 1"),
      record(4, JobState::kPending, {{T::kAfterOk, 2}}, "dependency: waits for job 2"),  // 2 ended since
      record(5, JobState::kHeld, {}, held),
      record(6, JobState::kPending, {}, held),                // released since
      record(7, JobState::kPending, {{T::kAfterOk, 1}}, ""),  // its reason not written
      record(8, JobState::kPending, {{T::kAfterAny, 2}, {T::kAfterOk, 1}},
             "dependency: waits for job 2 to end"),                     // now waits for 1
      record(9, JobState::kPending, {{T::kAfterOk, 1}}, "dependency"),  // a pass without messages
      record(10, JobState::kPending, {{T::kAfterOk, 1}, {T::kAfterOk, 11}},
             "dependency: waits for job 1"),  // 11's end is not looked at
      record(11, JobState::kStarting, {}, "")};
  table.load(std::move(stored));
  using R = sched::PendingReason;
  auto verdict = [](jobs::JobId id, R reason, std::string message) {
    sched::PendingInfo info;
    info.job = id;
    info.reason = reason;
    info.message = std::move(message);
    return info;
  };
  table.park(
      {verdict(3, R::kDependency, "waits for job 1"), verdict(4, R::kDependency, "waits for job 2"),
       verdict(5, R::kHeld, "held"), verdict(6, R::kHeld, "held"),
       verdict(7, R::kDependency, "waits for job 1"), verdict(8, R::kDependency, "waits for job 2 to end"),
       verdict(10, R::kDependency, "waits for job 1")},
      true);
  // Without explanations a pass's message is empty: the gate's kind must still hold.
  table.park({verdict(9, R::kDependency, ""), verdict(4, R::kDependency, ""), verdict(6, R::kHeld, "")},
             false);
  auto in_passes = [&] {  // the snapshot's pending jobs, by id (a snapshot has no order of its own)
    std::vector<jobs::JobId> ids;
    for (const auto& p : table.snapshot(0).pending) ids.push_back(p.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  };
  EXPECT_EQ(in_passes(), (std::vector<jobs::JobId>{4, 6, 7, 8}));
  EXPECT_EQ(table.parked_count(), 4u);
  EXPECT_EQ(table.active_count(), 10u);

  // Job 1 running is no end; its end wakes 3, 9 and 10 (11's did not: 10 waits for 1 first). A job's own
  // change wakes it.
  auto update = [&](jobs::JobId id, JobState state) {
    store::WriteBatch b;
    b.updates.push_back(*table.find(id));
    b.updates.back().state = state;
    table.apply(b);
  };
  update(1, JobState::kRunning);
  update(11, JobState::kCompleted);
  EXPECT_EQ(in_passes(), (std::vector<jobs::JobId>{4, 6, 7, 8}));
  update(1, JobState::kCompleted);
  EXPECT_EQ(in_passes(), (std::vector<jobs::JobId>{3, 4, 6, 7, 8, 9, 10}));
  update(5, JobState::kPending);
  EXPECT_EQ(in_passes(), (std::vector<jobs::JobId>{3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(table.parked_count(), 0u);
  EXPECT_EQ(table.active_count(), 8u);  // 3 to 10: jobs 1 and 11 ended
}

// The array a task dependency names may not be in the table yet: earlier in the same batch, or submitted
// by another call whose commit has not happened.
TEST(ServiceDependencies, ATaskOfAnArrayNotOnDiskYetCanBeNamed) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId next = w.svc->table().next_id();
  jobs::JobSpec batch[2] = {eight_gpus(), eight_gpus({{T::kAfterOk, next, 3}})};
  batch[0].array = jobs::parse_array_spec("0-3").value();
  ASSERT_TRUE(w.svc->prepare(batch[0], w.ada));
  auto st = w.svc->prepare(batch[1], w.ada, std::span(batch, 1));
  ASSERT_TRUE(st) << st.error().message;
  jobs::JobSpec no_task = eight_gpus({{T::kAfterOk, next, 4}});
  st = w.svc->prepare(no_task, w.ada, std::span(batch, 1));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "dependency afterok:" + std::to_string(next) + "_4: array " +
                                    std::to_string(next) + " (0-3) has no task 4");
  std::vector<jobs::JobId> ids;
  w.svc->submit({batch[0], batch[1]}, w.ada, [&](Result<std::vector<jobs::JobId>> r) { ids = r.value(); });
  // Not committed yet (the fake loop has not run): another call may already name a task of the array,
  // and aftercorr on it.
  ASSERT_EQ(w.svc->table().find(next), nullptr);
  jobs::JobSpec corr = eight_gpus({{T::kAfterCorr, next}});
  corr.array = jobs::parse_array_spec("2-3").value();
  st = w.svc->prepare(corr, w.ada);
  ASSERT_TRUE(st) << st.error().message;
  jobs::JobSpec on_plain = eight_gpus({{T::kAfterOk, next + 1, 0}});
  st = w.svc->prepare(on_plain, w.ada);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "dependency afterok:" + std::to_string(next + 1) + "_0: job " +
                                    std::to_string(next + 1) + " is not an array");
  w.loop.run();
  ASSERT_EQ(ids, (std::vector<jobs::JobId>{next, next + 1}));
  EXPECT_EQ(w.job(next + 1).reason, "dependency: waits for task 3 of array " + std::to_string(next));
  const jobs::JobId c = w.submit(corr);
  EXPECT_EQ(w.job(w.tasks(c)[0]).spec.after, (std::vector<jobs::Dependency>{{T::kAfterOk, next, 2}}));
  w.end({w.tasks(next)[3]}, JobState::kCompleted, 0);
  EXPECT_EQ(w.job(next + 1).state, JobState::kStarting);
}

// The same while the array's commit runs on the submit thread (held here until the test lets it run).
TEST(ServiceDependencies, ATaskOfAnArrayInTheSubmitCommitInFlightCanBeNamed) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  std::vector<std::function<void()>> held;
  w.reopen([&](daemon::Service& s) {
    auto second = SqliteStateStore::open(w.dir.file("a.db"));
    ASSERT_TRUE(second);
    s.set_submit_committer(
        std::move(*second), [&](std::function<void()> fn) { held.push_back(std::move(fn)); }, 1);
  });
  jobs::JobSpec array = eight_gpus();
  array.array = jobs::parse_array_spec("0-3").value();
  ASSERT_TRUE(w.svc->prepare(array, w.ada));
  const jobs::JobId a = w.svc->table().next_id();
  std::vector<jobs::JobId> ids;
  w.svc->submit({array}, w.ada, [&](Result<std::vector<jobs::JobId>> r) { ids = r.value(); });
  w.loop.run();  // the flush hands the commit to the submit thread
  ASSERT_EQ(held.size(), 1u);
  ASSERT_EQ(w.svc->table().find(a), nullptr);
  jobs::JobSpec on_task = eight_gpus({{T::kAfterOk, a, 2}});
  auto st = w.svc->prepare(on_task, w.ada);
  EXPECT_TRUE(st) << st.error().message;
  jobs::JobSpec no_task = eight_gpus({{T::kAfterOk, a, 7}});
  st = w.svc->prepare(no_task, w.ada);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "dependency afterok:" + std::to_string(a) + "_7: array " + std::to_string(a) +
                                    " (0-3) has no task 7");
  held.front()();
  held.clear();
  w.loop.run();
  EXPECT_EQ(ids, (std::vector<jobs::JobId>{a}));
  EXPECT_NE(w.svc->table().find(a), nullptr);
}

TEST(ServiceDependencies, AftercorrMakesEachTaskFollowTheTaskWithItsIndexAcrossARestart) {
  using T = jobs::Dependency::Type;
  ArrayWorld w;
  ASSERT_TRUE(w.cluster);
  w.reopen();
  const jobs::JobId a = w.submit_array("0-3");
  jobs::JobSpec spec = eight_gpus({{T::kAfterCorr, a}});
  spec.array = jobs::parse_array_spec("1-5").value();
  const jobs::JobId b = w.submit(spec);
  ASSERT_EQ(w.indexes(b), (std::vector<int>{1, 2, 3, 4, 5}));    // aftercorr does not hold the array back
  auto task_of_b = [&](size_t i) { return w.tasks(b)[i - 1]; };  // b's index i
  auto task_of_a = [&](size_t i) { return w.tasks(a)[i]; };
  EXPECT_EQ(w.job(task_of_b(1)).spec.after, (std::vector<jobs::Dependency>{{T::kAfterOk, a, 1}}));
  EXPECT_EQ(w.job(task_of_b(1)).reason, "dependency: waits for task 1 of array " + std::to_string(a));
  EXPECT_EQ(w.job(task_of_b(3)).state, JobState::kPending);
  // a has no index 4 or 5: those tasks of b wait for nothing.
  EXPECT_TRUE(w.job(task_of_b(4)).spec.after.empty());
  EXPECT_EQ(w.job(task_of_b(4)).state, JobState::kStarting);
  EXPECT_EQ(w.job(task_of_b(5)).state, JobState::kStarting);

  w.end({task_of_a(2)}, JobState::kCompleted, 0);
  EXPECT_EQ(w.job(task_of_b(2)).state, JobState::kStarting);
  EXPECT_EQ(w.job(task_of_b(3)).state, JobState::kPending);
  w.end({task_of_a(1)}, JobState::kFailed, 2);
  EXPECT_EQ(w.job(task_of_b(1)).state, JobState::kFailed);
  EXPECT_EQ(w.job(task_of_b(1)).reason,
            "dependency: task 1 of array " + std::to_string(a) + " did not complete successfully");

  ASSERT_TRUE(w.svc->store().sync());
  w.reopen();  // the tasks' dependencies are in their specs on disk
  EXPECT_EQ(w.job(task_of_b(3)).state, JobState::kPending);
  EXPECT_EQ(w.job(task_of_b(3)).spec.after, (std::vector<jobs::Dependency>{{T::kAfterOk, a, 3}}));
  w.end({task_of_a(3)}, JobState::kCompleted, 0);
  EXPECT_EQ(w.job(task_of_b(3)).state, JobState::kStarting);
}

}  // namespace
}  // namespace railyard
