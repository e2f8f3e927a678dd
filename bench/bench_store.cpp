// What one commit of the scheduler's SQLite store costs: its time, and how many pages it appends to the
// write-ahead log (the counter `wal_pages`). Every logged page is a write, and with synced durability
// part of the fsync, that the scheduler's loop waits for, so a schema change that makes a submit or a start
// touch more pages shows here. Figures in bench/RESULTS.md ("SQLite store: pages per commit").
//
//   submit: a new job and its "submitted" event (the jobs table, the events table, the events' index)
//   start:  the job's new state, its run and a "started" event
//
// Each run is capped below SQLite's automatic checkpoint (1,000 frames), so the log only grows while it is
// measured and its growth counts the pages.
#include <benchmark/benchmark.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "scheduler/lifecycle/job_table.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "topology/generator.hpp"

namespace railyard::store {
namespace {

constexpr int kIterations = 100;  // 100 x (a submit and a start, at most 8 pages): below 1,000 frames

JobRecord job(jobs::JobId id) {
  JobRecord r;
  r.id = id;
  r.spec.user = "ada";
  r.spec.project = "ada";
  r.spec.gpus = 8;
  r.submit_time = 1000 + id;
  return r;
}

WriteBatch submit(jobs::JobId id) {
  WriteBatch b;
  b.inserts = {job(id)};
  b.events.push_back({"job:" + std::to_string(id), 1000 + id, "ada", "submitted", (1000 + id) * 1000});
  b.durability = Durability::kWritten;
  return b;
}

WriteBatch start(jobs::JobId id) {
  WriteBatch b;
  JobRecord r = job(id);
  r.state = jobs::JobState::kStarting;
  r.attempt = 1;
  r.gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  r.nodes = {"dgx0001"};
  r.start_time = 2000 + id;
  b.updates = {r};
  RunRecord run;
  run.job = id;
  run.attempt = 1;
  run.nodes = r.nodes;
  run.gpus = r.gpus;
  run.start = 2000 + id;
  b.runs.push_back(run);
  b.events.push_back({"job:" + std::to_string(id), 2000 + id, "scheduler", "started", (2000 + id) * 1000});
  b.durability = Durability::kWritten;
  return b;
}

struct Db {
  std::filesystem::path dir;
  std::unique_ptr<SqliteStateStore> store;
  Db() {
    static int made = 0;  // a leader's and a standby's at once
    dir = std::filesystem::temp_directory_path() /
          ("railyard-bench-store-" + std::to_string(::getpid()) + "-" + std::to_string(made++));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto s = SqliteStateStore::open((dir / "b.db").string());
    if (!s) {
      std::cerr << s.error().message << "\n";
      std::abort();
    }
    store = std::move(*s);
  }
  ~Db() {
    store.reset();
    std::filesystem::remove_all(dir);
  }
  // A log frame is a page and a 24-byte header.
  uintmax_t frame_size() const {
    sqlite3* db = nullptr;
    sqlite3_stmt* st = nullptr;
    sqlite3_open((dir / "b.db").c_str(), &db);
    sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &st, nullptr);
    const int page = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 4096;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return static_cast<uintmax_t>(page) + 24;
  }
  uintmax_t wal() const { return std::filesystem::file_size(dir / "b.db-wal"); }
  void commit(const WriteBatch& b) {
    if (auto s = store->commit(b); !s) {
      std::cerr << s.error().message << "\n";
      std::abort();
    }
  }
};

// kStart: each iteration starts a job that a submit (not measured) put in first.
enum Kind { kSubmit, kStart };

void commits(benchmark::State& state, Kind kind) {
  Db db;
  // The first commit of each kind also writes the schema's and new tables' first pages: not measured.
  db.commit(submit(1));
  db.commit(start(1));
  jobs::JobId next = 2;
  uintmax_t pages = 0;
  for (auto _ : state) {
    const jobs::JobId id = next++;
    if (kind == kStart) {
      state.PauseTiming();
      db.commit(submit(id));
      state.ResumeTiming();
    }
    const uintmax_t before = db.wal();
    db.commit(kind == kSubmit ? submit(id) : start(id));
    pages += db.wal() - before;
  }
  state.counters["wal_pages"] =
      benchmark::Counter(static_cast<double>(pages) / static_cast<double>(db.frame_size()) / kIterations);
}
void BM_SubmitCommit(benchmark::State& state) { commits(state, kSubmit); }
void BM_StartCommit(benchmark::State& state) { commits(state, kStart); }
BENCHMARK(BM_SubmitCommit)->Iterations(kIterations);
BENCHMARK(BM_StartCommit)->Iterations(kIterations);

// What a scheduler that starts (or takes over as the HA leader) spends reading a state of 100,000 pending
// jobs: load() (the rows, each job's spec parsed), load() as a warm HA standby does it (from the jobs it kept
// while it followed the log) and JobTable::load (the in-memory queue), separately.
void BM_Load100k(benchmark::State& state) {
  constexpr jobs::JobId kJobs = 100'000;
  Db db;
  for (jobs::JobId first = 1; first <= kJobs; first += 1000) {
    WriteBatch b;
    for (jobs::JobId id = first; id < first + 1000; ++id) {
      JobRecord r = job(id);
      r.spec.name = "state";
      r.spec.gpus = 1;
      r.spec.command = {"true"};
      r.spec.time_limit_s = 600;
      b.inserts.push_back(std::move(r));
      b.events.push_back({"job:" + std::to_string(id), 1000 + id, "ada", "submitted", (1000 + id) * 1000});
    }
    db.commit(b);
  }
  auto cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  if (!cluster) std::abort();
  double load_s = 0, warm_s = 0, table_s = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto stored = db.store->load();
    const auto t1 = std::chrono::steady_clock::now();
    if (!stored || stored->jobs.size() != static_cast<size_t>(kJobs)) std::abort();
    lifecycle::JobTable table(*cluster);
    table.load(std::move(*stored));
    const auto t2 = std::chrono::steady_clock::now();
    // As an HA standby that took over loads: from the copy of the jobs it kept while following (not timed).
    state.PauseTiming();
    WarmJobs warm;
    if (!db.store->warm_jobs(warm)) std::abort();
    state.ResumeTiming();
    const auto t3 = std::chrono::steady_clock::now();
    auto warm_loaded = db.store->load(warm);
    const auto t4 = std::chrono::steady_clock::now();
    if (!warm_loaded || warm_loaded->jobs.size() != static_cast<size_t>(kJobs)) std::abort();
    load_s += std::chrono::duration<double>(t1 - t0).count();
    table_s += std::chrono::duration<double>(t2 - t1).count();
    warm_s += std::chrono::duration<double>(t4 - t3).count();
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["load_ms"] = load_s / n * 1000;
  state.counters["warm_load_ms"] = warm_s / n * 1000;
  state.counters["table_ms"] = table_s / n * 1000;
}
BENCHMARK(BM_Load100k)->Iterations(3)->Unit(benchmark::kMillisecond);

// What an HA standby spends per submitted job to follow the leader (issue 46): the leader's submit commits
// (64 jobs each, with their events, idempotency keys and audit rows, as SubmitIntake writes them) recorded
// as changesets, then applied to a fresh database in pages of 8 entries with the copy of the jobs a standby
// keeps (apply_replicated). `leader_us_per_job`: the leader's commits with the changeset recorded;
// `apply_us_per_job`: the standby's apply.
void BM_ApplyReplicated(benchmark::State& state) {
  constexpr int kEntries = 200, kPerEntry = 64, kPage = 8;
  std::vector<ReplicatedEntry> entries;
  Db leader;
  leader.store->replicate_through([&entries](int64_t seq, const std::string& changes) -> Status {
    entries.push_back({seq, changes});
    return ok();
  });
  const auto t0 = std::chrono::steady_clock::now();
  jobs::JobId id = 1;
  for (int e = 0; e < kEntries; ++e) {
    WriteBatch b;
    b.durability = Durability::kWritten;
    for (int k = 0; k < kPerEntry; ++k, ++id) {
      JobRecord r = job(id);
      r.spec.name = "load";
      r.spec.gpus = 1;
      r.spec.time_limit_s = 600;
      b.inserts.push_back(std::move(r));
      b.events.push_back({"job:" + std::to_string(id), 1000 + id, "ada", "submitted", (1000 + id) * 1000});
      b.idempotency.push_back({"k" + std::to_string(id), id, 1});
      b.audit.push_back({(1000 + id) * 1000, "ada", "127.0.0.1", "POST", "/api/v1/jobs", 201});
    }
    leader.commit(b);
  }
  const double leader_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (entries.size() != static_cast<size_t>(kEntries)) std::abort();
  double apply_s = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto standby = std::make_unique<Db>();
    WarmJobs warm;
    if (!standby->store->warm_jobs(warm)) std::abort();
    state.ResumeTiming();
    const auto t1 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < entries.size(); i += kPage) {
      const size_t n = std::min<size_t>(kPage, entries.size() - i);
      if (auto s = standby->store->apply_replicated(std::span(entries).subspan(i, n), &warm); !s) {
        std::cerr << s.error().message << "\n";
        std::abort();
      }
    }
    apply_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    if (warm.jobs.size() != static_cast<size_t>(kEntries * kPerEntry)) std::abort();
    state.PauseTiming();
    standby.reset();
    state.ResumeTiming();
  }
  constexpr double kJobs = kEntries * kPerEntry;
  state.counters["leader_us_per_job"] = leader_s / kJobs * 1e6;
  state.counters["apply_us_per_job"] = apply_s / static_cast<double>(state.iterations()) / kJobs * 1e6;
}
BENCHMARK(BM_ApplyReplicated)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace railyard::store

int main(int argc, char** argv) {
  railyard::store::configure_sqlite();  // as the scheduler does
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
