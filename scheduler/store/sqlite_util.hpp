// Thin RAII over the SQLite C API, for the store's own use. Errors are thrown as SqlError and caught at the
// SqliteStateStore boundary, where they become Result errors; nothing here leaves the store module.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace railyard::store::sql {

struct SqlError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void exec(sqlite3* db, const char* sql);

class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, std::string_view v);
  // Without a copy: `v` must stay alive and unchanged until the statement's next run() or reset().
  Stmt& bind_static(int i, std::string_view v);
  Stmt& bind(int i, const std::optional<int64_t>& v);
  Stmt& bind(int i, const std::optional<double>& v);
  // Runs to the next row: true when there is one, false when done.
  bool step();
  // Runs a statement that returns no rows, then resets it for reuse.
  void run();
  void reset();

  bool is_null(int col) const;
  int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  std::optional<int64_t> opt_int64(int col) const;
  std::optional<double> opt_real(int col) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
};

// BEGIN IMMEDIATE .. COMMIT, rolled back when destroyed without commit().
class Transaction {
 public:
  explicit Transaction(sqlite3* db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  sqlite3* db_;
  bool done_ = false;
};

}  // namespace railyard::store::sql
