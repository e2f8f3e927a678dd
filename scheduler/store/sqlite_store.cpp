#include "scheduler/store/sqlite_store.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "jobs/spec_json.hpp"
#include "scheduler/store/sqlite_auth.hpp"
#include "scheduler/store/sqlite_util.hpp"

namespace railyard::store {
namespace {

using nlohmann::json;

// gpus column (jobs, runs): whole GPUs as numbers, MIG slices as objects.
std::string gpus_to_text(const std::vector<topology::GpuId>& gpus,
                         const std::vector<sched::MigSlice>& slices) {
  if (slices.empty()) {  // the common case, without building a json value: "[0,1,2]"
    std::string out = "[";
    for (auto g : gpus) out += (out.size() > 1 ? "," : "") + std::to_string(g);
    return out + "]";
  }
  json a = json::array();
  for (auto g : gpus) a.push_back(g);
  for (const auto& s : slices)
    a.push_back({{"gpu", s.gpu}, {"first_slot", s.first_slot}, {"slots", s.slots}, {"profile", s.profile}});
  return a.dump();
}
std::string gpus_to_text(const JobRecord& r) { return gpus_to_text(r.gpus, r.slices); }

void gpus_from_text(const std::string& text, std::vector<topology::GpuId>& gpus,
                    std::vector<sched::MigSlice>& slices) {
  if (text == "[]") return;  // a pending job's (most of a deep queue's): not worth a parse
  for (const json& e : json::parse(text)) {
    if (e.is_number_integer()) {
      gpus.push_back(e.get<topology::GpuId>());
    } else {
      slices.push_back({e.at("gpu").get<topology::GpuId>(), e.at("first_slot").get<int>(),
                        e.at("slots").get<int>(), e.at("profile").get<std::string>()});
    }
  }
}
void gpus_from_text(const std::string& text, JobRecord& r) { gpus_from_text(text, r.gpus, r.slices); }

std::string names_to_text(const std::vector<std::string>& names) {
  return names.empty() ? std::string("[]") : json(names).dump();
}

sched::NodeHealth parse_health(std::string_view s) {
  if (s == "drain") return sched::NodeHealth::kDrain;
  if (s == "down") return sched::NodeHealth::kDown;
  if (s == "removed") return sched::NodeHealth::kRemoved;
  return sched::NodeHealth::kUp;
}

// The columns read_job reads, in its order.
constexpr const char* kJobColumns =
    "id, spec, state, submit_time, start_time, end_time, exit_code, reason, gpus, nodes, leaves_spanned, "
    "min_leaves, estimated_start, time_to_train_s, attempt, compact_since, held_by, held_by_admin";

// A row of kJobColumns; `spec`, when given, is this job's spec already parsed (moved from: a stored spec
// never changes).
JobRecord read_job(const sql::Stmt& q, jobs::JobSpec* spec = nullptr) {
  JobRecord r;
  r.id = q.int64(0);
  r.spec = spec ? std::move(*spec) : SqliteStateStore::parse_stored_spec(r.id, q.text(1));
  auto state = jobs::parse_state(q.text(2));
  if (!state) throw sql::SqlError("job " + std::to_string(r.id) + ": unknown state " + q.text(2));
  r.state = *state;
  r.submit_time = q.int64(3);
  r.start_time = q.opt_int64(4);
  r.end_time = q.opt_int64(5);
  if (auto e = q.opt_int64(6)) r.exit_code = static_cast<int>(*e);
  r.reason = q.text(7);
  gpus_from_text(q.text(8), r);
  if (std::string nodes = q.text(9); nodes != "[]")
    r.nodes = json::parse(nodes).get<std::vector<std::string>>();
  r.leaves_spanned = static_cast<int>(q.int64(10));
  r.min_leaves = static_cast<int>(q.int64(11));
  r.estimated_start = q.opt_int64(12);
  r.time_to_train_s = q.opt_real(13);
  r.attempt = static_cast<int>(q.int64(14));
  r.compact_since = q.opt_int64(15);
  r.held_by = q.text(16);
  r.held_by_admin = q.int64(17) != 0;
  return r;
}

// Binds the mutable columns, from parameter `first` on, in the order of kUpdateJob's SET list.
void bind_mutable(sql::Stmt& st, int first, const JobRecord& r) {
  st.bind(first, jobs::to_string(r.state))
      .bind(first + 1, r.start_time)
      .bind(first + 2, r.end_time)
      .bind(first + 3, r.exit_code ? std::optional<int64_t>(*r.exit_code) : std::nullopt)
      .bind(first + 4, r.reason)
      .bind(first + 5, gpus_to_text(r))
      .bind(first + 6, r.nodes.empty() ? std::string("[]") : json(r.nodes).dump())
      .bind(first + 7, int64_t{r.leaves_spanned})
      .bind(first + 8, int64_t{r.min_leaves})
      .bind(first + 9, r.estimated_start)
      .bind(first + 10, r.time_to_train_s)
      .bind(first + 11, int64_t{r.attempt})
      .bind(first + 12, r.compact_since)
      .bind(first + 13, r.held_by)
      .bind(first + 14, int64_t{r.held_by_admin ? 1 : 0});
}

template <typename F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return internal_error(std::string("state store: ") + e.what());
  }
}

}  // namespace

std::string_view to_string(Role r) { return r == Role::kAdmin ? "admin" : "user"; }

std::optional<Role> parse_role(std::string_view s) {
  if (s == "admin") return Role::kAdmin;
  if (s == "user") return Role::kUser;
  return std::nullopt;
}

Result<std::unique_ptr<SqliteStateStore>> SqliteStateStore::open(const std::string& path,
                                                                 int target_version) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Error{ErrorCode::kUnavailable, path + ": " + msg};
  }
  std::unique_ptr<SqliteStateStore> store(new SqliteStateStore(db));

  // SQLite falls back to read-only when the file system or file refuses writes: a scheduler that could not
  // store what it acknowledges must not start.
  if (sqlite3_db_readonly(db, "main") == 1)
    return Error{ErrorCode::kUnavailable,
                 path + ": read-only (the database file or its file system is not writable)"};
  sqlite3_busy_timeout(db, 5000);
  try {
    sql::exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;");
    store->migrate(target_version < 0 ? latest_schema_version() : target_version);
    // Node keys live here (table node_keys): the file, its log and its shared memory are the owner's only.
    // Only tightens: a wider mode is never set.
    for (const char* suffix : {"", "-wal", "-shm"})
      if (struct stat st{}; ::stat((path + suffix).c_str(), &st) == 0 && (st.st_mode & 077) != 0)
        ::chmod((path + suffix).c_str(), st.st_mode & 0700);
  } catch (const std::exception& e) {
    return Error{ErrorCode::kUnavailable, path + ": " + e.what()};
  }
  return store;
}

SqliteStateStore::~SqliteStateStore() {
  statements_.reset();
  checkpointer_.reset();  // its connection first: the last one to close checkpoints and removes the log
  sqlite3_close(db_);
}

void SqliteStateStore::migrate(int target_version) {
  sql::exec(db_, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
  {
    sql::Stmt q(db_, "SELECT version FROM schema_version");
    version_ = q.step() ? static_cast<int>(q.int64(0)) : 0;
  }
  if (version_ > latest_schema_version())
    throw sql::SqlError("schema version " + std::to_string(version_) + " is newer than this program (" +
                        std::to_string(latest_schema_version()) + ")");
  for (; version_ < target_version; ++version_) {
    sql::Transaction tx(db_);
    sql::exec(db_, std::string(schema_migrations()[static_cast<size_t>(version_)]).c_str());
    sql::exec(db_, "DELETE FROM schema_version");
    sql::Stmt(db_, "INSERT INTO schema_version(version) VALUES (?)").bind(1, int64_t{version_ + 1}).run();
    tx.commit();
  }
}

void configure_sqlite() { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }

jobs::JobSpec SqliteStateStore::parse_stored_spec(JobId id, const std::string& text) {
  auto spec = jobs::parse_job_spec(json::parse(text));
  if (!spec) throw sql::SqlError("job " + std::to_string(id) + ": stored spec: " + spec.error().message);
  return std::move(*spec);
}

Result<StoredState> SqliteStateStore::load() { return load_with(nullptr); }

Result<StoredState> SqliteStateStore::load(WarmJobs& warm) { return load_with(&warm); }

Status SqliteStateStore::warm_jobs(WarmJobs& warm) {
  return guarded([&]() -> Status {
    warm = {};
    sql::Stmt q(db_, std::string("SELECT ") + kJobColumns + " FROM jobs");
    while (q.step()) {
      JobRecord r = read_job(q);
      warm.jobs.emplace(r.id, std::move(r));
    }
    warm.complete = true;
    return ok();
  });
}

void SqliteStateStore::rewarm(const std::vector<JobId>& ids, WarmJobs& warm) {
  if (!warm.complete) return;
  try {
    sql::Stmt q(db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?");
    for (JobId id : ids) {
      q.reset();
      q.bind(1, id);
      auto held = warm.jobs.find(id);
      if (!q.step()) {
        if (held != warm.jobs.end()) warm.jobs.erase(held);
        continue;
      }
      if (held == warm.jobs.end())
        warm.jobs.emplace(id, read_job(q));
      else
        held->second = read_job(q, &held->second.spec);
    }
  } catch (const std::exception&) {
    warm = {};  // not complete: the takeover's load reads the table (and says what does not parse)
  }
}

Result<StoredState> SqliteStateStore::load_with(WarmJobs* warm) {
  return guarded([&]() -> Result<StoredState> {
    StoredState s;
    bool taken = false;
    if (warm && warm->complete) {
      // The warm copy is used only when it has the table's rows (a cheap check on top of its bookkeeping).
      sql::Stmt count(db_, "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM jobs");
      const bool same = count.step() && count.int64(0) == static_cast<int64_t>(warm->jobs.size()) &&
                        count.int64(1) == (warm->jobs.empty() ? 0 : warm->jobs.rbegin()->first);
      if (same) {
        s.jobs.reserve(warm->jobs.size());
        for (auto& [id, job] : warm->jobs) s.jobs.push_back(std::move(job));
        taken = true;
      }
      *warm = {};
    }
    if (!taken) {
      sql::Stmt q(db_, std::string("SELECT ") + kJobColumns + " FROM jobs ORDER BY id");
      while (q.step()) s.jobs.push_back(read_job(q));
    }
    sql::Stmt n(db_, "SELECT name, health, reason FROM nodes ORDER BY name");
    while (n.step()) s.nodes.push_back({n.text(0), parse_health(n.text(1)), n.text(2)});
    sql::Stmt h(db_, "SELECT alloc, job, gpus, nodes FROM gpu_holds ORDER BY alloc");
    while (h.step()) {
      GpuHold hold{h.text(0), h.int64(1), {}, json::parse(h.text(3)).get<std::vector<std::string>>()};
      hold.gpus = json::parse(h.text(2)).get<std::vector<topology::GpuId>>();
      s.holds.push_back(std::move(hold));
    }
    sql::Stmt r(
        db_,
        "SELECT job, attempt, nodes, gpus, start_time, end_time, outcome FROM runs ORDER BY job, attempt");
    while (r.step()) {
      RunRecord run;
      run.job = r.int64(0);
      run.attempt = static_cast<int>(r.int64(1));
      run.nodes = json::parse(r.text(2)).get<std::vector<std::string>>();
      gpus_from_text(r.text(3), run.gpus, run.slices);
      run.start = r.int64(4);
      run.end = r.opt_int64(5);
      run.outcome = r.text(6);
      s.runs.push_back(std::move(run));
    }
    sql::Stmt qs(db_, "SELECT kind, name, gpus, shares FROM quotas ORDER BY kind, name");
    while (qs.step()) {
      lifecycle::QuotaRecord q;
      q.kind = qs.text(0) == "project" ? lifecycle::QuotaRecord::Kind::kProject : lifecycle::QuotaRecord::Kind::kUser;
      q.name = qs.text(1);
      q.gpus = qs.opt_int64(2);
      q.shares = qs.real(3);
      s.quotas.push_back(std::move(q));
    }
    sql::Stmt k(db_, "SELECT key, first_id, count FROM idempotency");
    while (k.step()) s.idempotency.push_back({k.text(0), k.int64(1), k.int64(2)});
    return s;
  });
}

// Prepared on the first commit and reused (reset before each use, so a statement left mid-way by an error
// is usable again). Finalized before the database is closed.
struct SqliteStateStore::Statements {
  explicit Statements(sqlite3* db)
      : ins(db,
            "INSERT INTO jobs(id, spec, user, submit_time, state, start_time, end_time, exit_code, reason, "
            "gpus, nodes, leaves_spanned, min_leaves, estimated_start, time_to_train_s, attempt, "
            "compact_since, held_by, held_by_admin) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
        upd(db,
            "UPDATE jobs SET state=?, start_time=?, end_time=?, exit_code=?, reason=?, gpus=?, nodes=?, "
            "leaves_spanned=?, min_leaves=?, estimated_start=?, time_to_train_s=?, attempt=?, "
            "compact_since=?, held_by=?, held_by_admin=? "
            "WHERE id=?"),
        node(db, "INSERT OR REPLACE INTO nodes(name, health, reason) VALUES (?,?,?)"),
        ev(db, "INSERT INTO events(subject, time, actor, what, time_ms) VALUES (?,?,?,?,?)"),
        metric(db, "INSERT INTO metrics(job, alloc, key, time, data) VALUES (?,?,?,?,?)") {}
  sql::Stmt ins, upd, node, ev, metric;
  // Rarer writes, prepared on first use.
  std::unique_ptr<sql::Stmt> hold, unhold, run, idem, quota, unquota;
  AuthStatements auth;
};

namespace {
sql::Stmt& prepared(sqlite3* db, std::unique_ptr<sql::Stmt>& st, std::string_view sql) {
  if (!st) st = std::make_unique<sql::Stmt>(db, sql);
  st->reset();
  return *st;
}
}  // namespace

SqliteStateStore::SqliteStateStore(sqlite3* db) : db_(db) {}

void SqliteStateStore::write(const WriteBatch& b) {
  if (!statements_) statements_ = std::make_unique<Statements>(db_);
  Statements& st = *statements_;
  sql::Stmt& ins = st.ins;
  ins.reset();
  for (const auto& r : b.inserts) {
    const std::string spec = jobs::to_json(r.spec).dump();
    ins.bind(1, r.id).bind_static(2, spec).bind_static(3, r.spec.user).bind(4, r.submit_time);
    bind_mutable(ins, 5, r);
    ins.run();
  }
  sql::Stmt& upd = st.upd;
  upd.reset();
  for (const auto& r : b.updates) {
    bind_mutable(upd, 1, r);
    upd.bind(16, r.id).run();
  }
  sql::Stmt& node = st.node;
  node.reset();
  for (const auto& n : b.nodes)
    node.bind(1, n.name).bind(2, sched::to_string(n.health)).bind(3, n.reason).run();
  sql::Stmt& ev = st.ev;
  ev.reset();
  for (const auto& e : b.events)
    ev.bind_static(1, e.subject)
        .bind(2, e.time)
        .bind_static(3, e.actor)
        .bind_static(4, e.what)
        .bind(5, e.time_ms ? std::optional<int64_t>(e.time_ms) : std::nullopt)
        .run();
  for (const auto& h : b.holds)
    prepared(db_, st.hold, "INSERT OR REPLACE INTO gpu_holds(alloc, job, gpus, nodes) VALUES (?,?,?,?)")
        .bind(1, h.alloc)
        .bind(2, h.job)
        .bind(3, json(h.gpus).dump())
        .bind(4, names_to_text(h.nodes))
        .run();
  for (const auto& a : b.released)
    prepared(db_, st.unhold, "DELETE FROM gpu_holds WHERE alloc = ?").bind(1, a).run();
  for (const auto& r : b.runs)
    prepared(
        db_, st.run,
        "INSERT OR REPLACE INTO runs(job, attempt, nodes, gpus, gpu_count, start_time, end_time, outcome) "
        "VALUES (?,?,?,?,?,?,?,?)")
        .bind(1, r.job)
        .bind(2, int64_t{r.attempt})
        .bind(3, names_to_text(r.nodes))
        .bind(4, gpus_to_text(r.gpus, r.slices))
        .bind(5, int64_t{r.gpu_count()})
        .bind(6, r.start)
        .bind(7, r.end)
        .bind(8, r.outcome)
        .run();
  for (const auto& q : b.quotas) {
    const std::string kind(lifecycle::to_string(q.kind));
    if (q.lifted)
      prepared(db_, st.unquota, "DELETE FROM quotas WHERE kind = ? AND name = ?").bind(1, kind).bind(2, q.name).run();
    else
      prepared(db_, st.quota, "INSERT OR REPLACE INTO quotas(kind, name, gpus, shares) VALUES (?,?,?,?)")
          .bind(1, kind)
          .bind(2, q.name)
          .bind(3, q.gpus)
          .bind(4, std::optional<double>(q.shares))
          .run();
  }
  for (const auto& k : b.idempotency)
    prepared(db_, st.idem, "INSERT OR REPLACE INTO idempotency(key, first_id, count) VALUES (?,?,?)")
        .bind(1, k.key)
        .bind(2, k.first_id)
        .bind(3, k.count)
        .run();
  write_auth_rows(db_, b, st.auth);
  if (b.metrics.empty()) return;
  sql::Stmt& m = st.metric;
  m.reset();
  for (const auto& s : b.metrics)
    m.bind(1, s.job)
        .bind(2, s.alloc)
        .bind(3, s.key)
        .bind(4, std::optional<double>(s.time))
        .bind(5, s.data)
        .run();
}

Status SqliteStateStore::commit(const WriteBatch& batch) {
  const WriteBatch* one[] = {&batch};
  return commit_all(one);
}

Status SqliteStateStore::commit_all(std::span<const WriteBatch* const> batches) {
  const auto synced = [](const WriteBatch* b) { return b->durability == Durability::kSynced; };
  const auto has_rows = [](const WriteBatch* b) { return !b->empty(); };
  if (std::none_of(batches.begin(), batches.end(), has_rows)) return ok();
  // Replicated, a commit is durable once etcd holds it (a quorum fsynced it): the local log need not be
  // synced, and a database that lost its last commits with its machine catches up from the log.
  const Durability wanted = !replicator_ && std::any_of(batches.begin(), batches.end(), synced)
                                ? Durability::kSynced
                                : Durability::kWritten;
  return guarded([&]() -> Status {
    // In WAL mode FULL fsyncs the log at every commit, NORMAL only before a checkpoint; the log is one file
    // written in order, so a FULL commit's fsync also makes the NORMAL commits before it durable.
    if (wanted != mode_) {
      sql::exec(db_, wanted == Durability::kSynced ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
      mode_ = wanted;
    }
    return replicated_write([&] {
      for (const WriteBatch* b : batches) write(*b);
    });
  });
}

Status SqliteStateStore::check_fence() {
  if (fence_epoch_ == 0) return ok();
  const int64_t stored = stored_epoch();
  if (stored <= fence_epoch_) return ok();
  const std::string why = "fenced: the database belongs to epoch " + std::to_string(stored) +
                          ", this scheduler leads epoch " + std::to_string(fence_epoch_);
  if (on_fenced_) on_fenced_(why);
  return Error{ErrorCode::kConflict, why};
}

int64_t SqliteStateStore::stored_epoch() {
  sql::Stmt q(db_, "SELECT MAX(epoch) FROM ha_epoch");
  return q.step() ? q.int64(0) : 0;
}

Status SqliteStateStore::fence(int64_t epoch, bool claim) {
  return guarded([&]() -> Status {
    sql::Transaction tx(db_);
    const int64_t stored = stored_epoch();
    if (stored > epoch)
      return Error{ErrorCode::kConflict, "fenced: the database belongs to epoch " + std::to_string(stored) +
                                             ", newer than " + std::to_string(epoch)};
    if (claim) sql::Stmt(db_, "UPDATE ha_epoch SET epoch = ?").bind(1, epoch).run();
    tx.commit();
    fence_epoch_ = epoch;
    return ok();
  });
}

Result<std::vector<EventRecord>> SqliteStateStore::events(const std::string& subject, int limit) {
  return guarded([&]() -> Result<std::vector<EventRecord>> {
    sql::Stmt q(db_,
                "SELECT subject, time, actor, what, time_ms FROM (SELECT * FROM events WHERE ?1 = '' OR "
                "subject = ?1 ORDER BY seq DESC LIMIT ?2) ORDER BY seq");
    q.bind(1, subject).bind(2, int64_t{limit});
    std::vector<EventRecord> out;
    while (q.step())
      out.emplace_back(q.text(0), q.int64(1), q.text(2), q.text(3),
                       q.opt_int64(4).value_or(q.int64(1) * 1000));
    return out;
  });
}

Result<std::vector<MetricSample>> SqliteStateStore::metrics(JobId job, int limit) {
  return guarded([&]() -> Result<std::vector<MetricSample>> {
    sql::Stmt q(db_,
                "SELECT job, alloc, key, time, data FROM (SELECT * FROM metrics WHERE job = ?1 "
                "ORDER BY seq DESC LIMIT ?2) ORDER BY seq");
    q.bind(1, job).bind(2, int64_t{limit});
    std::vector<MetricSample> out;
    while (q.step()) out.push_back({q.int64(0), q.text(1), q.text(2), q.real(3), q.text(4)});
    return out;
  });
}

}  // namespace railyard::store
