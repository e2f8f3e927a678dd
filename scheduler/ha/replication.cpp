#include "scheduler/ha/replication.hpp"

#include <spdlog/spdlog.h>

#include <cinttypes>
#include <cstdio>

#include "scheduler/ha/etcd.hpp"

namespace railyard::ha {
namespace {

std::string log_prefix(const std::string& prefix) { return prefix + "/log/"; }

// The first key of entry `seq` (every part key of it sorts after this).
std::string entry_start(const std::string& prefix, int64_t seq) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020" PRId64, seq);
  return log_prefix(prefix) + buf;
}

struct PartKey {
  int64_t seq = 0;
  int part = 0;
  int parts = 0;
};

// "<prefix>/log/<seq>.<part>.<parts>": its numbers; nullopt for anything else.
std::optional<PartKey> parse_part_key(const std::string& prefix, const std::string& key) {
  const std::string head = log_prefix(prefix);
  if (key.compare(0, head.size(), head) != 0) return std::nullopt;
  PartKey k;
  long long seq = 0;
  int part = 0, parts = 0, used = 0;
  if (std::sscanf(key.c_str() + head.size(), "%20lld.%5d.%5d%n", &seq, &part, &parts, &used) != 3 ||
      head.size() + static_cast<size_t>(used) != key.size() || seq <= 0 || parts <= 0 || part < 0 || part >= parts)
    return std::nullopt;
  k.seq = seq;
  k.part = part;
  k.parts = parts;
  return k;
}

std::unique_ptr<EtcdClient> client_of(const LogOptions& o) {
  return std::make_unique<EtcdClient>(o.endpoints, o.timeout);
}

}  // namespace

std::string log_key(const std::string& prefix, int64_t seq, int part, int parts) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ".%05d.%05d", part, parts);
  return entry_start(prefix, seq) + buf;
}

LogWriter::LogWriter(LogOptions options, int64_t epoch)
    : options_(std::move(options)), epoch_(epoch), etcd_(client_of(options_)) {}

LogWriter::~LogWriter() = default;

Status LogWriter::append(int64_t seq, const std::string& changeset) {
  const std::string leader = options_.prefix + "/leader";
  const int parts = static_cast<int>(std::max<size_t>(1, (changeset.size() + kPartBytes - 1) / kPartBytes));
  for (int p = 0; p < parts; ++p) {
    const std::string key = log_key(options_.prefix, seq, p, parts);
    const std::string value = changeset.substr(static_cast<size_t>(p) * kPartBytes, kPartBytes);
    auto r = etcd_->guarded_put(leader, epoch_, key, value);
    if (!r)
      return Error{ErrorCode::kUnavailable,
                   "not stored: the state could not be replicated through etcd (" + r.error().message + ")"};
    if (r->put) continue;
    if (!r->guard || r->guard->create_revision != epoch_)
      return Error{ErrorCode::kConflict,
                   "replication: the term of epoch " + std::to_string(epoch_) + " is over (the leader key is " +
                       (r->guard ? "of epoch " + std::to_string(r->guard->create_revision) : "gone") + ")"};
    // The key was there: an earlier try of this very append reached etcd though its answer did not come.
    if (r->existing && r->existing->value == value) continue;
    return Error{ErrorCode::kConflict, "replication: the log already holds another entry " + std::to_string(seq) +
                                           ": this database is behind the log"};
  }
  return ok();
}

Status LogWriter::clear_after(int64_t applied) {
  auto r = etcd_->guarded_delete(options_.prefix + "/leader", epoch_, entry_start(options_.prefix, applied + 1),
                                 prefix_end(log_prefix(options_.prefix)));
  if (!r) return r.error();
  if (!*r) return Error{ErrorCode::kConflict, "replication: the term of epoch " + std::to_string(epoch_) + " is over"};
  return ok();
}

LogReader::LogReader(LogOptions options) : options_(std::move(options)), etcd_(client_of(options_)) {}

LogReader::~LogReader() = default;

Result<std::vector<LogEntry>> LogReader::read(int64_t after, size_t max_entries) {
  constexpr int64_t kPage = 32;  // parts per request: at most ~43 MB of answer
  std::vector<LogEntry> out;
  std::string start = entry_start(options_.prefix, after + 1);
  const std::string end = prefix_end(log_prefix(options_.prefix));
  int64_t next = after + 1;
  int64_t revision = 0;  // every page at the first one's revision: one view of the log
  LogEntry building;
  int building_parts = 0;
  while (out.size() < max_entries) {
    auto page = etcd_->range(start, end, kPage, revision);
    if (!page) return page.error();
    revision = page->revision;
    for (auto& kv : page->kvs) {
      auto k = parse_part_key(options_.prefix, kv.key);
      if (!k) return Error{ErrorCode::kInternal, "replication: a key in the log that is not an entry's: " + kv.key};
      if (k->seq != next) {
        // Parts of `next` without their last are what a deposed leader left: nothing complete past them yet.
        if (k->seq > next && building_parts == 0 && out.empty() && next == after + 1)
          return Error{ErrorCode::kNotFound, "replication: the log no longer holds entry " + std::to_string(next) +
                                                 " (trimmed): this database needs a snapshot"};
        return out;
      }
      if (k->part != building_parts) return out;  // a part missing: not complete (an unfinished write)
      if (building_parts == 0) building = LogEntry{k->seq, {}};
      building.changeset += kv.value;
      ++building_parts;
      if (building_parts == k->parts) {
        out.push_back(std::move(building));
        building = {};
        building_parts = 0;
        ++next;
        if (out.size() >= max_entries) return out;
      }
    }
    if (!page->more || page->kvs.empty()) return out;
    start = page->kvs.back().key + std::string(1, '\0');
  }
  return out;
}

LogFollower::LogFollower(LogOptions options, std::string name, int64_t applied, Apply apply,
                         std::chrono::milliseconds poll)
    : options_(std::move(options)), name_(std::move(name)), apply_(std::move(apply)), poll_(poll), applied_(applied) {
  thread_ = std::thread([this] { run(); });
}

LogFollower::~LogFollower() { stop(); }

void LogFollower::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string LogFollower::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

Result<size_t> LogFollower::step(LogReader& reader) {
  auto entries = reader.read(applied_.load(), 256);
  if (!entries) return entries.error();
  if (entries->empty()) return size_t{0};
  if (auto s = apply_(*entries); !s) return s.error();
  applied_ = entries->back().seq;
  return entries->size();
}

void LogFollower::publish(EtcdClient& etcd) {
  const int64_t now = applied_.load();
  if (now == published_) return;
  if (etcd.put(options_.prefix + "/applied/" + name_, std::to_string(now), 0)) published_ = now;
}

void LogFollower::run() {
  LogReader reader(options_);
  auto etcd = client_of(options_);
  auto last_publish = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  for (;;) {
    auto n = step(reader);
    if (!n && n.error().code != ErrorCode::kUnavailable) {
      spdlog::critical("ha: following the replicated log stopped at entry {}: {}", applied_.load(), n.error().message);
      std::lock_guard<std::mutex> lock(mutex_);
      failure_ = n.error().message;
      return;
    }
    if (!n) spdlog::warn("ha: reading the replicated log: {}", n.error().message);
    if (std::chrono::steady_clock::now() - last_publish >= std::chrono::seconds(1)) {
      publish(*etcd);
      last_publish = std::chrono::steady_clock::now();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return;
    if (n && *n > 0) continue;  // more may follow at once
    wake_.wait_for(lock, poll_, [this] { return stopping_; });
    if (stopping_) return;
  }
}

Status LogFollower::catch_up() {
  LogReader reader(options_);
  for (;;) {
    auto n = step(reader);
    if (!n) return n.error();
    if (*n == 0) break;
  }
  auto etcd = client_of(options_);
  publish(*etcd);
  return ok();
}

}  // namespace railyard::ha
