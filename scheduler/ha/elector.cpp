#include "scheduler/ha/elector.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "scheduler/ha/etcd.hpp"

namespace railyard::ha {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

int64_t wall_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

// Requests to etcd wait at most this long: a keepalive must not outlast the margin.
milliseconds request_timeout(const ElectorOptions& o) {
  return std::min(milliseconds(1000), std::max(milliseconds(100), o.margin / 2));
}

std::optional<LeaderInfo> parse_leader(const KeyValue& kv) {
  auto j = json::parse(kv.value, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  return LeaderInfo{j.value("name", ""), j.value("address", ""), kv.create_revision, j.value("since_ms", int64_t{0})};
}

}  // namespace

std::vector<MemberInfo> read_members(const std::vector<KeyValue>& list) {
  std::vector<MemberInfo> members;
  for (const auto& kv : list) {
    auto j = json::parse(kv.value, nullptr, false);
    if (j.is_object())
      members.push_back({j.value("name", ""), j.value("address", ""), j.value("since_ms", int64_t{0})});
  }
  return members;
}

Elector::Elector(ElectorOptions options, Lost on_lost)
    : options_(std::move(options)), on_lost_(std::move(on_lost)), started_ms_(wall_ms()) {}

Elector::~Elector() {
  stop();
  for (auto* t : {&keepalive_, &watchdog_, &observer_})
    if (t->joinable()) t->join();
  if (const int64_t lease = lease_.load(); lease != 0 && !lost_.load()) {
    EtcdClient etcd(options_.endpoints, request_timeout(options_), options_.tls);
    if (auto s = etcd.revoke(lease); !s) spdlog::warn("ha: revoking the lease: {}", s.error().message);
  }
}

void Elector::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
}

bool Elector::sleep_for(milliseconds d) {
  std::unique_lock lock(mutex_);
  return !wake_.wait_for(lock, d, [this] { return stopping_; });
}

std::optional<LeaderInfo> Elector::leader() const {
  std::lock_guard lock(mutex_);
  return leader_;
}

std::vector<MemberInfo> Elector::members() const {
  std::lock_guard lock(mutex_);
  return members_;
}

void Elector::lose(const std::string& why) {
  if (lost_.exchange(true)) return;
  leading_ = false;
  on_lost_(why);
}

// Puts <prefix>/members/<name> with the current lease unless that is done. Called every campaign and
// keepalive round, so a put that failed (etcd slow or away for a moment) is retried rather than leaving this
// instance out of the member list for as long as its lease lives.
void Elector::register_member(EtcdClient& etcd) {
  const int64_t lease = lease_.load();
  if (lease == 0 || registered_.load() == lease) return;
  const json me = {{"name", options_.name}, {"address", options_.address}, {"since_ms", started_ms_}};
  if (auto s = etcd.put(member_key(), me.dump(), lease); !s) {
    spdlog::warn("ha: registering as a member: {}", s.error().message);
    return;
  }
  registered_ = lease;
}

Result<int64_t> Elector::campaign() {
  EtcdClient etcd(options_.endpoints, request_timeout(options_), options_.tls);
  const json me = {{"name", options_.name}, {"address", options_.address}, {"since_ms", started_ms_}};
  bool logged_holder = false;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return Error{ErrorCode::kUnavailable, "stopped"};
    }
    if (lease_.load() == 0) {
      const int64_t sent = steady_ns();
      auto lease = etcd.grant(options_.ttl_s);
      if (lease) {
        renewed_at_ns_ = sent;
        lease_ = *lease;
        if (!keepalive_.joinable()) keepalive_ = std::thread([this] { keepalive_loop(); });
      } else {
        spdlog::warn("ha: no lease from etcd yet: {}", lease.error().message);
      }
    }
    register_member(etcd);
    if (const int64_t lease = lease_.load(); lease != 0) {
      // Most rounds find the key held: a read says so without a write through etcd's Raft log, so a standby
      // can look often (it notices an expired leader within `poll`) at little cost to etcd.
      auto held = etcd.get(leader_key());
      if (held && *held && (*held)->lease == lease) {
        // Created with this lease by a try whose answer was lost: this instance won then.
        auto info = parse_leader(**held);
        return win((*held)->create_revision, info ? info->since_ms : wall_ms());
      }
      if (held && *held) {
        note_holder(**held, logged_holder);
        refresh_members(etcd);
        if (!sleep_for(options_.poll)) return Error{ErrorCode::kUnavailable, "stopped"};
        continue;
      }
      json value = me;
      value["since_ms"] = wall_ms();
      auto r = etcd.create(leader_key(), value.dump(), lease);
      if (r && r->created) return win(r->revision, value["since_ms"].get<int64_t>());
      if (r && r->holder)
        note_holder(*r->holder, logged_holder);
      else if (!r)
        spdlog::warn("ha: campaign: {}", r.error().message);
      refresh_members(etcd);
    }
    if (!sleep_for(options_.poll)) return Error{ErrorCode::kUnavailable, "stopped"};
  }
}

int64_t Elector::win(int64_t epoch, int64_t since_ms) {
  {
    std::lock_guard lock(mutex_);
    leader_ = LeaderInfo{options_.name, options_.address, epoch, since_ms};
  }
  leading_ = true;
  watchdog_ = std::thread([this] { watchdog_loop(); });
  observer_ = std::thread([this] { observe_loop(); });
  spdlog::info("ha: {} leads, epoch {}", options_.name, epoch);
  return epoch;
}

void Elector::note_holder(const KeyValue& holder, bool& logged) {
  auto info = parse_leader(holder);
  std::lock_guard lock(mutex_);
  if (info && (!leader_ || leader_->epoch != info->epoch || !logged)) {
    spdlog::info("ha: standby; {} at {} leads (epoch {})", info->name, info->address, info->epoch);
    logged = true;
  }
  leader_ = info;
}

void Elector::refresh_members(EtcdClient& etcd) {
  const int64_t now = steady_ns();
  if (now - members_read_ns_ < 1'000'000'000) return;  // once a second is fresh enough for GET /leader
  members_read_ns_ = now;
  if (auto list = etcd.list(options_.prefix + "/members/")) {
    auto members = read_members(*list);
    std::lock_guard lock(mutex_);
    members_ = std::move(members);
  }
}

void Elector::keepalive_loop() {
  EtcdClient etcd(options_.endpoints, request_timeout(options_), options_.tls);
  const milliseconds interval = std::max(milliseconds(200), milliseconds(options_.ttl_s * 1000 / 3));
  milliseconds next = interval;
  while (sleep_for(next)) {
    next = interval;
    const int64_t lease = lease_.load();
    const int64_t sent = steady_ns();
    auto ttl = etcd.keepalive(lease);
    if (!ttl) {
      spdlog::warn("ha: keepalive: {}", ttl.error().message);
      next = std::min(interval, milliseconds(250));  // soon again; the watchdog decides when it is too late
      continue;
    }
    if (*ttl > 0) {
      renewed_at_ns_ = sent;
      register_member(etcd);  // after the keepalive, which it must not delay
      continue;
    }
    if (leading_.load()) return lose("the lease expired in etcd");
    // A standby whose lease expired (etcd was away longer than the TTL) takes a new one.
    auto fresh = etcd.grant(options_.ttl_s);
    if (!fresh) continue;
    renewed_at_ns_ = sent;
    lease_ = *fresh;
    register_member(etcd);
  }
}

void Elector::watchdog_loop() {
  const auto limit = std::chrono::nanoseconds(std::chrono::seconds(options_.ttl_s) - options_.margin).count();
  while (sleep_for(milliseconds(50))) {
    const int64_t since = steady_ns() - renewed_at_ns_.load();
    if (since >= limit) {
      return lose("no keepalive confirmed by etcd for " + std::to_string(since / 1000000) +
                  " ms (TTL " + std::to_string(options_.ttl_s) + " s)");
    }
  }
}

void Elector::observe_loop() {
  EtcdClient etcd(options_.endpoints, request_timeout(options_), options_.tls);
  while (sleep_for(milliseconds(1000))) {
    auto kv = etcd.get(leader_key());
    if (kv && (!*kv || (*kv)->lease != lease_.load()))
      return lose(*kv ? "the leader key is held by another lease" : "the leader key is gone");
    if (auto list = etcd.list(options_.prefix + "/members/")) {
      auto members = read_members(*list);
      std::lock_guard lock(mutex_);
      members_ = std::move(members);
    }
  }
}

}  // namespace railyard::ha
