// A test's look into a database file another process writes: the first column of the first row of `sql` as
// an int, -1 when there is none (or the file does not open).
#pragma once

#include <sqlite3.h>

#include <string>

namespace railyard::testing {

inline int count_rows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
  int n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

}  // namespace railyard::testing
