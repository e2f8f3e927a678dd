// SqliteStateStore's node keys (table node_keys, migration 10): one row per node, written by
// `railyard-scheduler node-key` (another process, through the same WAL database) and read by the daemon's
// AgentHub at every registration, so a key issued or rotated while the daemon runs counts at once.
#include <sqlite3.h>

#include "scheduler/store/sqlite_auth.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "scheduler/store/sqlite_util.hpp"

namespace railyard::store {

void write_node_key(sqlite3* db, const NodeKeyRecord& k) {
  sql::Stmt(db,
            "INSERT OR REPLACE INTO node_keys(node, key, created, rotated_at, previous_key, previous_until) "
            "VALUES (?,?,?,?,?,?)")
      .bind(1, k.node)
      .bind(2, k.key)
      .bind(3, k.created)
      .bind(4, k.rotated_at)
      .bind(5, k.previous_key)
      .bind(6, k.previous_until)
      .run();
}

Status SqliteStateStore::put_node_key(const NodeKeyRecord& k) {
  return replicated_write([&] { write_node_key(db_, k); });
}

Result<std::optional<NodeKeyRecord>> SqliteStateStore::find_node_key(const std::string& node) {
  try {
    sql::Stmt q(db_,
                "SELECT key, created, rotated_at, previous_key, previous_until FROM node_keys WHERE node = ?");
    q.bind(1, node);
    if (!q.step()) return std::optional<NodeKeyRecord>();
    return std::optional<NodeKeyRecord>(
        NodeKeyRecord{node, q.text(0), q.int64(1), q.opt_int64(2), q.text(3), q.opt_int64(4)});
  } catch (const std::exception& e) {
    return internal_error(std::string("state store: ") + e.what());
  }
}

}  // namespace railyard::store
