// The store's schema as numbered migrations: open() applies those a database has not seen, in order, each in
// its own transaction; a released migration is never edited, only followed by a new one.
#include <array>
#include <string_view>

#include "scheduler/store/sqlite_store.hpp"

namespace railyard::store {
namespace {

constexpr std::array<std::string_view, 14> kMigrations = {
    // 1: the tables.
    R"(CREATE TABLE jobs (
         id INTEGER PRIMARY KEY, spec TEXT NOT NULL, state TEXT NOT NULL, user TEXT NOT NULL,
         submit_time INTEGER NOT NULL, start_time INTEGER, end_time INTEGER, exit_code INTEGER,
         reason TEXT NOT NULL DEFAULT '', gpus TEXT NOT NULL DEFAULT '[]', nodes TEXT NOT NULL DEFAULT '[]',
         leaves_spanned INTEGER NOT NULL DEFAULT 0, min_leaves INTEGER NOT NULL DEFAULT 0,
         estimated_start INTEGER, time_to_train_s REAL);
       CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, subject TEXT NOT NULL,
         time INTEGER NOT NULL, actor TEXT NOT NULL, what TEXT NOT NULL);
       CREATE TABLE nodes (name TEXT PRIMARY KEY, health TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '');
       CREATE TABLE tokens (hash TEXT PRIMARY KEY, user TEXT NOT NULL, role TEXT NOT NULL);)",
    // 2: indexes for the API's filters and the audit log's per-subject reads.
    R"(CREATE INDEX jobs_by_state ON jobs(state);
       CREATE INDEX jobs_by_user ON jobs(user);
       CREATE INDEX events_by_subject ON events(subject, seq);)",
    // 3: agent protocol: the allocation attempt of each job, and the metric samples agents report.
    R"(ALTER TABLE jobs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
       CREATE TABLE metrics (seq INTEGER PRIMARY KEY AUTOINCREMENT, job INTEGER NOT NULL,
         alloc TEXT NOT NULL, key TEXT NOT NULL, time REAL NOT NULL, data TEXT NOT NULL);
       CREATE INDEX metrics_by_job ON metrics(job, seq);)",
    // 4: GPU holds of ended allocations (kill not confirmed yet), one row per run of a job (a requeued job
    // has several; older databases get their jobs' last runs), nodes may be 'removed', event times in
    // milliseconds too (NULL in older rows: read as time * 1000).
    R"(CREATE TABLE gpu_holds (alloc TEXT PRIMARY KEY, job INTEGER NOT NULL, gpus TEXT NOT NULL,
         nodes TEXT NOT NULL);
       CREATE TABLE runs (job INTEGER NOT NULL, attempt INTEGER NOT NULL, nodes TEXT NOT NULL,
         gpus TEXT NOT NULL, gpu_count INTEGER NOT NULL, start_time INTEGER NOT NULL, end_time INTEGER,
         outcome TEXT NOT NULL DEFAULT '', PRIMARY KEY (job, attempt));
       INSERT INTO runs(job, attempt, nodes, gpus, gpu_count, start_time, end_time, outcome)
         SELECT id, MAX(attempt, 1), nodes, gpus, json_array_length(gpus), start_time, end_time,
                CASE WHEN state IN ('STARTING', 'RUNNING') THEN '' ELSE state END
         FROM jobs WHERE start_time IS NOT NULL;
       ALTER TABLE events ADD COLUMN time_ms INTEGER;)",
    // 5: events and metrics without AUTOINCREMENT. It kept a row of sqlite_sequence up to date in every
    // transaction that adds an event: one more page written to the log and synced per commit (issue 11).
    // A plain INTEGER PRIMARY KEY takes the largest seq + 1, which keeps growing as long as the newest row
    // is never deleted: nothing deletes events or metrics (a pruning feature must keep the newest row).
    R"(CREATE TABLE events_5 (seq INTEGER PRIMARY KEY, subject TEXT NOT NULL, time INTEGER NOT NULL,
         actor TEXT NOT NULL, what TEXT NOT NULL, time_ms INTEGER);
       INSERT INTO events_5(seq, subject, time, actor, what, time_ms)
         SELECT seq, subject, time, actor, what, time_ms FROM events;
       DROP TABLE events;
       ALTER TABLE events_5 RENAME TO events;
       CREATE INDEX events_by_subject ON events(subject, seq);
       CREATE TABLE metrics_5 (seq INTEGER PRIMARY KEY, job INTEGER NOT NULL, alloc TEXT NOT NULL,
         key TEXT NOT NULL, time REAL NOT NULL, data TEXT NOT NULL);
       INSERT INTO metrics_5(seq, job, alloc, key, time, data) SELECT seq, job, alloc, key, time, data FROM metrics;
       DROP TABLE metrics;
       ALTER TABLE metrics_5 RENAME TO metrics;
       CREATE INDEX metrics_by_job ON metrics(job, seq);
       DELETE FROM sqlite_sequence WHERE name IN ('events', 'metrics');)",
    // 6: when a pass first made a pending job wait for a compact placement, so a restart ends the wait when
    // it would have ended (NULL: not waiting, or not since its last start).
    R"(ALTER TABLE jobs ADD COLUMN compact_since INTEGER;)",
    // 7: without the jobs indexes of version 2. The daemon answers every filter from memory and reads the
    // table only whole at start (ORDER BY id), so no statement used them, yet each submit wrote a page of
    // both and each state change one of jobs_by_state: 2 of a submit's 5 logged and synced pages (issue 11).
    R"(DROP INDEX IF EXISTS jobs_by_state;
       DROP INDEX IF EXISTS jobs_by_user;)",
    // 8: runs WITHOUT ROWID. Its (job, attempt) key lived in an index beside a rowid table, so starting or
    // ending a run logged a page of each; now the key's b-tree holds the rows, one page (issue 11).
    R"(CREATE TABLE runs_8 (job INTEGER NOT NULL, attempt INTEGER NOT NULL, nodes TEXT NOT NULL,
         gpus TEXT NOT NULL, gpu_count INTEGER NOT NULL, start_time INTEGER NOT NULL, end_time INTEGER,
         outcome TEXT NOT NULL DEFAULT '', PRIMARY KEY (job, attempt)) WITHOUT ROWID;
       INSERT INTO runs_8(job, attempt, nodes, gpus, gpu_count, start_time, end_time, outcome)
         SELECT job, attempt, nodes, gpus, gpu_count, start_time, end_time, outcome FROM runs;
       DROP TABLE runs;
       ALTER TABLE runs_8 RENAME TO runs;)",
    // 9: controller high availability (issue 30): the newest leader epoch that claimed the database (one row;
    // 0 = never), and the idempotency keys of submits with the jobs each made.
    R"(CREATE TABLE ha_epoch (epoch INTEGER NOT NULL);
       INSERT INTO ha_epoch(epoch) VALUES (0);
       CREATE TABLE idempotency (key TEXT PRIMARY KEY, first_id INTEGER NOT NULL, count INTEGER NOT NULL)
         WITHOUT ROWID;)",
    // 10: a cluster many users share (issue 32): tokens get a creation time, an expiry, the time of their
    // last use and of their revocation (NULL: never); the audit log of mutating API requests. Tokens made
    // before have created 0 and never expire.
    R"(ALTER TABLE tokens ADD COLUMN created INTEGER NOT NULL DEFAULT 0;
       ALTER TABLE tokens ADD COLUMN expires INTEGER;
       ALTER TABLE tokens ADD COLUMN last_used INTEGER;
       ALTER TABLE tokens ADD COLUMN revoked INTEGER;
       CREATE TABLE audit (seq INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL, actor TEXT NOT NULL,
         source TEXT NOT NULL, method TEXT NOT NULL, target TEXT NOT NULL, status INTEGER NOT NULL);)",
    // 11: per-node agent keys (issue 32). The key itself, since HMAC verification recomputes the MAC (the
    // file is 0600); after a rotation the previous key until its grace ends (previous_until, unix seconds).
    R"(CREATE TABLE node_keys (node TEXT PRIMARY KEY, key TEXT NOT NULL, created INTEGER NOT NULL,
         rotated_at INTEGER, previous_key TEXT NOT NULL DEFAULT '', previous_until INTEGER) WITHOUT ROWID;)",
    // 12: what an admin sets on a user (kind 'user') or a project (kind 'project'): at most `gpus` GPUs held
    // at once by its jobs (NULL: no bound), and its fair-share shares.
    R"(CREATE TABLE quotas (kind TEXT NOT NULL, name TEXT NOT NULL, gpus INTEGER, shares REAL NOT NULL DEFAULT 1,
         PRIMARY KEY (kind, name)) WITHOUT ROWID;)",
    // 13: who placed a job's hold, and whether with the admin role (issue 44): only an admin releases an
    // admin's hold. '' and 0 while the job is not held, and for holds placed before.
    R"(ALTER TABLE jobs ADD COLUMN held_by TEXT NOT NULL DEFAULT '';
       ALTER TABLE jobs ADD COLUMN held_by_admin INTEGER NOT NULL DEFAULT 0;)",
    // 14: replicated state (issue 46): the number of the last replicated entry this database wrote (as
    // leader) or applied (as standby); one row, 0 = none.
    R"(CREATE TABLE ha_log (applied INTEGER NOT NULL);
       INSERT INTO ha_log(applied) VALUES (0);)",
};

}  // namespace

std::span<const std::string_view> schema_migrations() { return kMigrations; }

}  // namespace railyard::store
