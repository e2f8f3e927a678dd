#include "scheduler/daemon/tokens.hpp"

#include <spdlog/spdlog.h>

#include <ctime>
#include <stdexcept>

namespace railyard::daemon {
namespace {

std::string utc_text(int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Result<std::string> generate_token() {
  try {
    return "ry_" + protocol::random_hex(32);
  } catch (const std::runtime_error& e) {
    return internal_error(e.what());
  }
}

Result<Authenticated> Tokens::authenticate(const std::string& token) {
  const std::string hash = sha256_hex(token);
  auto it = cache_.find(hash);
  if (it == cache_.end()) {
    // Not cached: tokens created by `token create` on the database while the daemon runs are found there.
    auto rec = pipeline_.connection().find_token(hash);
    if (!rec) return rec.error();
    if (!*rec) return Authenticated{std::nullopt, "unknown token"};
    it = cache_.emplace(hash, std::move(**rec)).first;
    if (it->second.last_used) use_written_[hash] = *it->second.last_used;
  }
  store::TokenRecord& t = it->second;
  const int64_t now = clock_();
  if (t.revoked)
    return Authenticated{std::nullopt, "token " + t.id() + " was revoked at " + utc_text(*t.revoked) +
                                           "; ask an admin for a new one"};
  if (t.expires && now >= *t.expires)
    return Authenticated{std::nullopt, "token " + t.id() + " expired at " + utc_text(*t.expires) +
                                           "; ask an admin for a new one"};
  t.last_used = now;
  int64_t& written = use_written_[hash];
  if (now - written >= kTokenUseResolutionS) {
    written = now;
    WriteBatch b;
    b.durability = store::Durability::kDeferred;
    b.token_uses.push_back({hash, now});
    pipeline_.defer(std::move(b));
  }
  return Authenticated{Caller{t.user, t.role}, ""};
}

Result<std::pair<std::string, store::TokenRecord>> Tokens::create(const std::string& user, store::Role role,
                                                                  std::optional<int64_t> expires,
                                                                  const Caller& who,
                                                                  const store::AuditRecord* audit) {
  if (auto s = need_admin(who, "creating tokens"); !s) return s.error();
  if (user.empty()) return invalid("user: must not be empty");
  const int64_t now = clock_();
  if (expires && *expires <= now) return invalid("expires: must be in the future");
  auto secret = generate_token();
  if (!secret) return secret.error();
  store::TokenRecord t{sha256_hex(*secret), user, role};
  t.created = now;
  t.expires = expires;
  WriteBatch b;
  b.tokens.push_back(t);
  if (audit) b.audit.push_back(*audit);
  if (auto s = write_(b); !s) return s.error();
  spdlog::info("token {} created for {} ({}) by {}", t.id(), user, store::to_string(role), who.user);
  return std::pair{std::move(*secret), std::move(t)};
}

Result<std::vector<store::TokenRecord>> Tokens::list(const Caller& who) {
  if (auto s = need_admin(who, "listing tokens"); !s) return s.error();
  auto all = pipeline_.store().tokens();
  if (!all) return all.error();
  for (auto& t : *all)
    if (auto it = cache_.find(t.hash); it != cache_.end() && it->second.last_used)
      t.last_used = std::max(t.last_used.value_or(0), *it->second.last_used);
  return all;
}

Status Tokens::revoke(const std::string& id, const Caller& who, const store::AuditRecord* audit) {
  if (auto s = need_admin(who, "revoking tokens"); !s) return s;
  if (id.size() != store::kTokenIdLength)
    return invalid("token id " + id + ": must be the " + std::to_string(store::kTokenIdLength) +
                   " characters `railyard token list` shows");
  auto all = pipeline_.store().tokens();
  if (!all) return all.error();
  const store::TokenRecord* found = nullptr;
  for (const auto& t : *all)
    if (t.id() == id) found = &t;
  if (!found) return not_found("token " + id + " not found");
  WriteBatch b;
  const int64_t now = clock_();
  if (!found->revoked) b.token_revokes.push_back({found->hash, now});
  if (audit) b.audit.push_back(*audit);
  if (auto s = write_(b); !s) return s;
  if (auto it = cache_.find(found->hash); it != cache_.end() && !it->second.revoked) it->second.revoked = now;
  spdlog::info("token {} of {} revoked by {}", id, found->user, who.user);
  return ok();
}

}  // namespace railyard::daemon
