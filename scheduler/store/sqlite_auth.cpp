// SqliteStateStore's tokens and audit log (schema 10): the rows a WriteBatch carries, and their reads.
#include "scheduler/store/sqlite_auth.hpp"

#include "scheduler/store/sqlite_store.hpp"

namespace railyard::store {
namespace {

// (Names distinct from sqlite_store.cpp's: unity builds join the two files.)
sql::Stmt& auth_stmt(sqlite3* db, std::unique_ptr<sql::Stmt>& st, std::string_view text) {
  if (!st) st = std::make_unique<sql::Stmt>(db, text);
  st->reset();
  return *st;
}

template <typename F>
auto auth_guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return internal_error(std::string("state store: ") + e.what());
  }
}

constexpr std::string_view kInsertToken =
    "INSERT INTO tokens(hash, user, role, created, expires, last_used, revoked) VALUES (?,?,?,?,?,?,?)";
constexpr std::string_view kTokenColumns = "hash, user, role, created, expires, last_used, revoked";

void bind_token(sql::Stmt& st, const TokenRecord& t) {
  st.bind(1, t.hash)
      .bind(2, t.user)
      .bind(3, to_string(t.role))
      .bind(4, t.created)
      .bind(5, t.expires)
      .bind(6, t.last_used)
      .bind(7, t.revoked);
}

TokenRecord read_token(const sql::Stmt& q) {
  TokenRecord t{q.text(0), q.text(1), parse_role(q.text(2)).value_or(Role::kUser)};
  t.created = q.int64(3);
  t.expires = q.opt_int64(4);
  t.last_used = q.opt_int64(5);
  t.revoked = q.opt_int64(6);
  return t;
}

}  // namespace

void write_auth_rows(sqlite3* db, const WriteBatch& b, AuthStatements& st) {
  for (const auto& a : b.audit)
    auth_stmt(db, st.audit,
              "INSERT INTO audit(time_ms, actor, source, method, target, status) VALUES (?,?,?,?,?,?)")
        .bind(1, a.time_ms)
        .bind_static(2, a.actor)
        .bind_static(3, a.source)
        .bind_static(4, a.method)
        .bind_static(5, a.target)
        .bind(6, int64_t{a.status})
        .run();
  for (const auto& t : b.tokens) {
    sql::Stmt& ins = auth_stmt(db, st.token, kInsertToken);
    bind_token(ins, t);
    ins.run();
  }
  // A revocation is kept at its first time; a use never moves last_used back.
  for (const auto& r : b.token_revokes)
    auth_stmt(db, st.revoke, "UPDATE tokens SET revoked = ?2 WHERE hash = ?1 AND revoked IS NULL")
        .bind(1, r.hash)
        .bind(2, r.time)
        .run();
  for (const auto& u : b.token_uses)
    auth_stmt(db, st.use,
              "UPDATE tokens SET last_used = ?2 WHERE hash = ?1 AND (last_used IS NULL OR last_used < ?2)")
        .bind(1, u.hash)
        .bind(2, u.time)
        .run();
  for (const auto& k : b.node_keys) write_node_key(db, k);
}

Status SqliteStateStore::add_token(const TokenRecord& t) {
  return replicated_write([&] {
    sql::Stmt ins(db_, kInsertToken);
    bind_token(ins, t);
    ins.run();
  });
}

Result<std::optional<TokenRecord>> SqliteStateStore::find_token(const std::string& hash) {
  return auth_guarded([&]() -> Result<std::optional<TokenRecord>> {
    sql::Stmt q(db_, "SELECT " + std::string(kTokenColumns) + " FROM tokens WHERE hash = ?");
    q.bind(1, hash);
    if (!q.step()) return std::optional<TokenRecord>();
    return std::optional<TokenRecord>(read_token(q));
  });
}

Result<std::vector<TokenRecord>> SqliteStateStore::tokens() {
  return auth_guarded([&]() -> Result<std::vector<TokenRecord>> {
    sql::Stmt q(db_, "SELECT " + std::string(kTokenColumns) + " FROM tokens ORDER BY created, rowid");
    std::vector<TokenRecord> out;
    while (q.step()) out.push_back(read_token(q));
    return out;
  });
}

Result<std::vector<AuditRecord>> SqliteStateStore::audit(const AuditQuery& query) {
  return auth_guarded([&]() -> Result<std::vector<AuditRecord>> {
    sql::Stmt q(db_,
                "SELECT time_ms, actor, source, method, target, status FROM (SELECT * FROM audit WHERE "
                "(?1 = '' OR actor = ?1) AND time_ms >= ?2 ORDER BY seq DESC LIMIT ?3) ORDER BY seq");
    q.bind(1, query.actor).bind(2, query.since_ms).bind(3, int64_t{query.limit});
    std::vector<AuditRecord> out;
    while (q.step())
      out.push_back({q.int64(0), q.text(1), q.text(2), q.text(3), q.text(4), static_cast<int>(q.int64(5))});
    return out;
  });
}

}  // namespace railyard::store
