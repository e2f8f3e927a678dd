#include "scheduler/store/sqlite_util.hpp"

namespace railyard::store::sql {
namespace {

[[noreturn]] void fail(sqlite3* db, std::string_view what) {
  throw SqlError(std::string(what) + ": " + sqlite3_errmsg(db));
}

}  // namespace

void exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw SqlError(msg);
  }
}

Stmt::Stmt(sqlite3* db, std::string_view sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &st_, nullptr) != SQLITE_OK)
    fail(db, "prepare");
}

Stmt::~Stmt() { sqlite3_finalize(st_); }

Stmt& Stmt::bind(int i, int64_t v) {
  if (sqlite3_bind_int64(st_, i, v) != SQLITE_OK) fail(db_, "bind");
  return *this;
}

Stmt& Stmt::bind(int i, std::string_view v) {
  if (sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT) != SQLITE_OK)
    fail(db_, "bind");
  return *this;
}

Stmt& Stmt::bind_static(int i, std::string_view v) {
  if (sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC) != SQLITE_OK)
    fail(db_, "bind");
  return *this;
}

Stmt& Stmt::bind(int i, const std::optional<int64_t>& v) {
  if (v) return bind(i, *v);
  if (sqlite3_bind_null(st_, i) != SQLITE_OK) fail(db_, "bind");
  return *this;
}

Stmt& Stmt::bind(int i, const std::optional<double>& v) {
  const int rc = v ? sqlite3_bind_double(st_, i, *v) : sqlite3_bind_null(st_, i);
  if (rc != SQLITE_OK) fail(db_, "bind");
  return *this;
}

bool Stmt::step() {
  const int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, "step");
}

void Stmt::run() {
  step();
  reset();
}

void Stmt::reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

bool Stmt::is_null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
int64_t Stmt::int64(int col) const { return sqlite3_column_int64(st_, col); }
double Stmt::real(int col) const { return sqlite3_column_double(st_, col); }

std::string Stmt::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(st_, col))) : std::string();
}

std::optional<int64_t> Stmt::opt_int64(int col) const {
  return is_null(col) ? std::nullopt : std::optional<int64_t>(int64(col));
}

std::optional<double> Stmt::opt_real(int col) const {
  return is_null(col) ? std::nullopt : std::optional<double>(real(col));
}

Transaction::Transaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  exec(db_, "COMMIT");
  done_ = true;
}

}  // namespace railyard::store::sql
