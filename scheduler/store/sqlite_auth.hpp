// Internal to store/: the audit, token and node key rows of a WriteBatch (sqlite_auth.cpp), written by
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
// A node's key row (insert or replace), sqlite_node_keys.cpp.
void write_node_key(sqlite3* db, const NodeKeyRecord& key);

}  // namespace railyard::store
