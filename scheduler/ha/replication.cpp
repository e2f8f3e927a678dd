#include "scheduler/ha/replication.hpp"

#include <spdlog/spdlog.h>
#include <zlib.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <random>

#include "common/net/http_client.hpp"
#include "scheduler/ha/elector.hpp"
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
  long long seq = 0;
  int part = 0, parts = 0, used = 0;
  if (std::sscanf(key.c_str() + head.size(), "%20lld.%5d.%5d%n", &seq, &part, &parts, &used) != 3 ||
      head.size() + static_cast<size_t>(used) != key.size() || seq <= 0 || parts <= 0 || part < 0 || part >= parts)
    return std::nullopt;
  return PartKey{seq, part, parts};
}

std::unique_ptr<EtcdClient> client_of(const LogOptions& o) {
  return std::make_unique<EtcdClient>(o.endpoints, o.timeout, o.tls);
}

// An encoded entry's first byte says how the rest holds the changeset.
constexpr char kRaw = 'r';      // as it is (deflate would not make it smaller)
constexpr char kDeflate = 'z';  // 8 bytes of its length (little-endian), then a zlib stream
constexpr char kLegacy = 'T';   // no tag: a changeset as the first version of the log wrote it (its own
                                // first byte is a table header, 'T')

}  // namespace

std::string encode_entry(const std::string& changeset) {
  uLongf room = compressBound(static_cast<uLong>(changeset.size()));
  std::string out(1 + 8 + room, '\0');
  out[0] = kDeflate;
  for (int i = 0; i < 8; ++i)
    out[1 + static_cast<size_t>(i)] = static_cast<char>((changeset.size() >> (8 * i)) & 0xff);
  // Level 1: most of what deflate saves on these rows (JSON specs, names repeated from row to row) at a few
  // microseconds per job, on the leader's commit path.
  if (compress2(reinterpret_cast<Bytef*>(out.data() + 9), &room,
                reinterpret_cast<const Bytef*>(changeset.data()), static_cast<uLong>(changeset.size()),
                1) == Z_OK &&
      9 + room < 1 + changeset.size()) {
    out.resize(9 + room);
    return out;
  }
  return kRaw + changeset;
}

Result<std::string> decode_entry(std::string_view stored) {
  if (stored.empty()) return Error{ErrorCode::kInternal, "an empty entry"};
  if (stored[0] == kLegacy) return std::string(stored);
  if (stored[0] == kRaw) return std::string(stored.substr(1));
  if (stored[0] != kDeflate || stored.size() < 9)
    return Error{ErrorCode::kInternal,
                 "an entry of an encoding this scheduler does not know (a newer version's?)"};
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i)
    size |= uint64_t{static_cast<unsigned char>(stored[1 + static_cast<size_t>(i)])} << (8 * i);
  if (size > kMaxEntryBytes)
    return Error{ErrorCode::kInternal, "an entry that says it holds " + std::to_string(size) +
                                           " bytes, over the " + std::to_string(kMaxEntryBytes) +
                                           " an entry may"};
  // Deflate expands at most ~1032:1; a larger claim is not a stream zlib wrote (and allocates nothing).
  if (size > (stored.size() - 9) * 1032 + 64)
    return Error{ErrorCode::kInternal, "an entry that claims " + std::to_string(size) + " bytes from " +
                                           std::to_string(stored.size() - 9) + " deflated ones"};
  std::string out(size, '\0');
  uLongf got = static_cast<uLongf>(size);
  if (uncompress(reinterpret_cast<Bytef*>(out.data()), &got,
                 reinterpret_cast<const Bytef*>(stored.data() + 9),
                 static_cast<uLong>(stored.size() - 9)) != Z_OK ||
      got != size)
    return Error{ErrorCode::kInternal, "an entry whose compressed changeset does not inflate to its length"};
  return out;
}

std::string log_key(const std::string& prefix, int64_t seq, int part, int parts) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ".%05d.%05d", part, parts);
  return entry_start(prefix, seq) + buf;
}

LogWriter::LogWriter(LogOptions options, int64_t epoch)
    : options_(std::move(options)), epoch_(epoch), etcd_(client_of(options_)) {}

LogWriter::~LogWriter() = default;

Status LogWriter::append(int64_t seq, const std::string& changes) {
  const std::string leader = options_.prefix + "/leader";
  const std::string changeset = encode_entry(changes);
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

Result<int64_t> log_base(EtcdClient& etcd, const std::string& prefix) {
  auto kv = etcd.get(prefix + "/log-base");
  if (!kv) return kv.error();
  if (!*kv) return int64_t{0};
  try {
    return static_cast<int64_t>(std::stoll((*kv)->value));
  } catch (const std::exception&) {
    return Error{ErrorCode::kInternal, "replication: log-base holds " + (*kv)->value};
  }
}

Result<std::vector<LogEntry>> LogReader::read(int64_t after, size_t max_entries) {
  constexpr int64_t kPage = 32;  // parts per request: at most ~43 MB of answer
  std::vector<LogEntry> out;
  std::string start = entry_start(options_.prefix, after + 1);
  const std::string end = prefix_end(log_prefix(options_.prefix));
  int64_t next = after + 1;
  // The base first, and every page at the base's revision: one view of the log, in which a trim between two
  // requests cannot look like a gap.
  const std::string base_key = options_.prefix + "/log-base";
  auto base_read = etcd_->range(base_key, base_key + std::string(1, '\0'), 1);
  if (!base_read) return base_read.error();
  int64_t revision = base_read->revision;
  if (!base_read->kvs.empty()) {
    int64_t base = 0;
    try {
      base = std::stoll(base_read->kvs.front().value);
    } catch (const std::exception&) {
      return Error{ErrorCode::kInternal, "replication: log-base holds " + base_read->kvs.front().value};
    }
    if (after < base)
      return Error{ErrorCode::kNotFound, "replication: the log is trimmed up to entry " + std::to_string(base) +
                                             ", this database holds " + std::to_string(after) +
                                             ": it needs a snapshot"};
  }
  LogEntry building;
  int building_parts = 0;
  while (out.size() < max_entries) {
    auto page = etcd_->range(start, end, kPage, revision);
    if (!page) return page.error();
    revision = page->revision;
    for (auto& kv : page->kvs) {
      auto k = parse_part_key(options_.prefix, kv.key);
      if (!k) return Error{ErrorCode::kInternal, "replication: a key in the log that is not an entry's: " + kv.key};
      // A gap (parts of `next` without their last, which a deposed leader left): nothing complete past it.
      if (k->seq != next) return out;
      if (k->part != building_parts) return out;  // a part missing: not complete (an unfinished write)
      if (building_parts == 0) building = LogEntry{k->seq, {}};
      building.changeset += kv.value;
      ++building_parts;
      if (building_parts == k->parts) {
        auto decoded = decode_entry(building.changeset);
        if (!decoded)
          return Error{decoded.error().code,
                       "replication: entry " + std::to_string(building.seq) + ": " + decoded.error().message};
        building.changeset = std::move(*decoded);
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

int64_t trim_floor(int64_t head, const std::vector<std::string>& live, const std::string& self,
                   const std::vector<std::pair<std::string, int64_t>>& applied, const TrimOptions& options) {
  int64_t floor = head - options.keep;
  for (const auto& name : live) {
    if (name == self) continue;
    int64_t theirs = 0;
    for (const auto& [n, seq] : applied)
      if (n == name) theirs = seq;
    floor = std::min(floor, theirs);
  }
  return std::max({floor, head - options.keep_max, int64_t{0}});
}

LogTrimmer::LogTrimmer(LogOptions options, int64_t epoch, std::string self, std::function<int64_t()> head,
                       TrimOptions trim)
    : options_(std::move(options)),
      epoch_(epoch),
      self_(std::move(self)),
      head_(std::move(head)),
      trim_(trim),
      etcd_(client_of(options_)) {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, trim_.every, [this] { return stopping_; })) {
      lock.unlock();
      if (auto r = trim_once(); !r) spdlog::warn("ha: trimming the replicated log: {}", r.error().message);
      lock.lock();
    }
  });
}

LogTrimmer::~LogTrimmer() { stop(); }

void LogTrimmer::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<int64_t> LogTrimmer::trim_once() {
  auto members = etcd_->list(options_.prefix + "/members/");
  if (!members) return members.error();
  auto published = etcd_->list(options_.prefix + "/applied/");
  if (!published) return published.error();
  std::vector<std::string> live;
  for (const auto& m : read_members(*members)) live.push_back(m.name);
  std::vector<std::pair<std::string, int64_t>> applied;
  const std::string applied_prefix = options_.prefix + "/applied/";
  for (const auto& kv : *published) {
    try {
      applied.emplace_back(kv.key.substr(applied_prefix.size()), std::stoll(kv.value));
    } catch (const std::exception&) {
      // not a number: counts as nothing applied
    }
  }
  auto base = log_base(*etcd_, options_.prefix);
  if (!base) return base.error();
  const int64_t floor = trim_floor(head_(), live, self_, applied, trim_);
  if (floor <= *base) return *base;
  auto done = etcd_->guarded_put_delete(options_.prefix + "/leader", epoch_, options_.prefix + "/log-base",
                                        std::to_string(floor), entry_start(options_.prefix, 1),
                                        entry_start(options_.prefix, floor + 1));
  if (!done) return done.error();
  if (!*done) return Error{ErrorCode::kConflict, "replication: the term of epoch " + std::to_string(epoch_) + " is over"};
  spdlog::info("ha: replicated log trimmed up to entry {} (head {})", floor, head_());
  // etcd keeps every revision of every key until compacted: the deleted entries' space comes back only then.
  const std::string base_key = options_.prefix + "/log-base";
  if (auto now = etcd_->range(base_key, base_key + std::string(1, '\0'), 1); now) {
    if (auto s = etcd_->compact(now->revision); !s) spdlog::warn("ha: etcd compaction: {}", s.error().message);
  }
  for (const auto& endpoint : options_.endpoints) {
    EtcdClient member({endpoint}, options_.timeout * 10, options_.tls);  // a defragmentation takes its time
    auto st = member.status();
    if (!st || st->db_size - st->db_size_in_use < trim_.defrag_slack_bytes) continue;
    spdlog::info("ha: defragmenting etcd member {} ({} bytes, {} in use)", endpoint, st->db_size, st->db_size_in_use);
    if (auto s = member.defragment(); !s) spdlog::warn("ha: defragmenting {}: {}", endpoint, s.error().message);
  }
  return floor;
}

constexpr size_t kFollowPage = 256;  // entries per read of the log

LogFollower::LogFollower(LogOptions options, std::string name, int64_t applied, Apply apply,
                         std::chrono::milliseconds poll, std::function<void(const Error&)> failed,
                         std::function<void()> first)
    : options_(std::move(options)),
      name_(std::move(name)),
      apply_(std::move(apply)),
      poll_(poll),
      failed_(std::move(failed)),
      applied_(applied) {
  thread_ = std::thread([this, first = std::move(first)] {
    if (first) first();
    run();
  });
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
  auto entries = reader.read(applied_.load(), kFollowPage);
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
  auto last_warning = last_publish - std::chrono::seconds(5);
  for (;;) {
    auto n = step(reader);
    if (!n && n.error().code != ErrorCode::kUnavailable) {
      spdlog::critical("ha: following the replicated log stopped at entry {}: {}", applied_.load(), n.error().message);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        failure_ = n.error().message;
      }
      if (failed_) failed_(n.error());
      return;
    }
    if (!n && std::chrono::steady_clock::now() - last_warning >= std::chrono::seconds(5)) {
      spdlog::warn("ha: reading the replicated log: {}", n.error().message);  // etcd away: once per 5 s
      last_warning = std::chrono::steady_clock::now();
    }
    if (std::chrono::steady_clock::now() - last_publish >= std::chrono::seconds(1)) {
      publish(*etcd);
      last_publish = std::chrono::steady_clock::now();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return;
    // A full page: more is waiting now. Otherwise the next read waits a poll, so a busy leader's entries
    // are read and applied a poll's worth at a time (two etcd reads and one transaction per poll, not per
    // entry: a standby's cost stays small beside the leader's); a takeover reads what is left (catch_up).
    if (n && *n >= kFollowPage) continue;
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

Result<std::string> snapshot_key(const LogOptions& options) {
  EtcdClient etcd(options.endpoints, options.timeout, options.tls);
  const std::string key = options.prefix + "/snapshot-key";
  std::string fresh(32, '\0');
  std::random_device rd;
  for (auto& c : fresh) c = static_cast<char>(rd() & 0xff);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : fresh) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  auto r = etcd.create(key, hex, 0);
  if (!r) return r.error();
  if (r->created) return hex;
  if (!r->holder) return Error{ErrorCode::kUnavailable, "replication: " + key + " neither created nor found"};
  return r->holder->value;
}

Result<std::string> fetch_snapshot(const LogOptions& options, const std::string& self, const std::string& key) {
  EtcdClient etcd(options.endpoints, options.timeout, options.tls);
  auto members = etcd.list(options.prefix + "/members/");
  if (!members) return members.error();
  std::string why = "no other controller is registered";
  for (const auto& m : read_members(*members)) {
    if (m.name == self || m.address.empty()) continue;
    const std::string& address = m.address;
    auto parsed = net::parse_http_url(address);
    if (!parsed) continue;
    // The other controller's address is a scheduler URL: verified like etcd's (one CA for the controllers).
    net::HttpClient client(address, *parsed, std::chrono::seconds(120), options.tls.ca_file);
    auto reply = client.request("GET", "/api/v1/ha/snapshot", "", key);
    if (reply && reply->status == 200) return std::move(reply->body);
    why = m.name + ": " +
          (reply ? "HTTP " + std::to_string(reply->status) + " " + reply->body.substr(0, 200) : reply.error().message);
  }
  return Error{ErrorCode::kUnavailable, "replication: no snapshot from another controller (" + why + ")"};
}

}  // namespace railyard::ha
