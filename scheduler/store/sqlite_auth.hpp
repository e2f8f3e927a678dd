// Internal to store/: the audit and token rows of a WriteBatch (sqlite_auth.cpp), written by
// SqliteStateStore::write inside the batch's transaction.
#pragma once

#include <memory>

#include "scheduler/store/sqlite_util.hpp"
#include "scheduler/store/state_store.hpp"

namespace railyard::store {

// Prepared on first use and reused by one connection.
struct AuthStatements {
  std::unique_ptr<sql::Stmt> audit, token, revoke, use;
};

void write_auth_rows(sqlite3* db, const WriteBatch& batch, AuthStatements& st);

}  // namespace railyard::store
