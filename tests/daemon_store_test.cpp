// Unit tests of the daemon's SQLite store: schema and migrations, reload, atomic and batched commits, tokens
// and audit rows, the log's sync and checkpoints off the loop, epoch fencing.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <thread>

#include "jobs/spec_json.hpp"
#include "scheduler/daemon/tokens.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "tests/daemon_client.hpp"
#include "tests/service_harness.hpp"

namespace railyard {
namespace {

using namespace service_test;  // NOLINT(google-build-using-namespace): the shared harness

JobRecord make_job(jobs::JobId id, int gpus) {
  JobRecord r;
  r.id = id;
  r.spec.user = "ada";
  r.spec.project = "ada";
  r.spec.gpus = gpus;
  r.submit_time = 1000 + id;
  return r;
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
    ASSERT_TRUE(SqliteStateStore::open(file, 7));
    // Rows as version 7 wrote them (today's store prepares statements for columns version 7 lacks).
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "INSERT INTO runs(job, attempt, nodes, gpus, gpu_count, start_time, end_time, outcome) "
                           "VALUES (1, 1, '[\"dgx0001\"]', '[0,1,2,3,4,5,6,7]', 8, 100, 150, 'REQUEUED'), "
                           "(1, 2, '[\"dgx0002\"]', '[0,1,2,3,4,5,6,7]', 8, 200, NULL, '')",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
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
  auto token = daemon::generate_token();
  ASSERT_TRUE(token);
  ASSERT_TRUE((*s)->add_token({daemon::sha256_hex(*token), "ada", store::Role::kAdmin}));
  auto found = (*s)->find_token(daemon::sha256_hex(*token));
  ASSERT_TRUE(found && *found);
  EXPECT_EQ((*found)->user, "ada");
  EXPECT_EQ((*found)->role, store::Role::kAdmin);
  EXPECT_FALSE(*(*s)->find_token(*token));  // the plain token is not a key
  EXPECT_EQ(count_rows(dir.file("t.db"), "SELECT count(*) FROM tokens WHERE hash LIKE 'ry_%'"), 0);
  EXPECT_EQ(daemon::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
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

}  // namespace
}  // namespace railyard
