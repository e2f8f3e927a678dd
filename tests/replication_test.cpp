// Replicated controller state (issue 46): the store's changesets (store/sqlite_replication.cpp) and the log in
// etcd (ha/replication.hpp). The store tests need no etcd; the log tests run a real etcd member on 127.0.0.1
// and are skipped where none is installed (deploy/bootstrap.sh installs etcd-server).
#include "scheduler/ha/replication.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/api/http.hpp"
#include "scheduler/ha/etcd.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "tests/daemon_client.hpp"
#include "tests/etcd_fixture.hpp"

namespace railyard {
namespace {

using namespace std::chrono_literals;
using store::ReplicatedEntry;
using store::SqliteStateStore;
using store::WriteBatch;

lifecycle::JobRecord make_job(jobs::JobId id, const std::string& user) {
  lifecycle::JobRecord r;
  r.id = id;
  r.spec.user = user;
  r.spec.project = user;
  r.spec.gpus = 1;
  r.spec.command = {"true"};
  r.submit_time = 1000 + id;
  return r;
}

// Everything load() gives and the tokens, as text: two stores hold the same state when these are equal.
std::string state_text(SqliteStateStore& s) {
  auto st = s.load();
  EXPECT_TRUE(st) << st.error().message;
  if (!st) return "";
  nlohmann::json j;
  for (const auto& r : st->jobs)
    j["jobs"].push_back({r.id, r.spec.user, jobs::to_string(r.state), r.reason, r.nodes, r.start_time.value_or(-1)});
  for (const auto& n : st->nodes) j["nodes"].push_back({n.name, sched::to_string(n.health), n.reason});
  for (const auto& h : st->holds) j["holds"].push_back({h.alloc, h.job, h.gpus, h.nodes});
  for (const auto& k : st->idempotency) j["idem"].push_back({k.key, k.first_id, k.count});
  auto tokens = s.tokens();
  EXPECT_TRUE(tokens);
  if (tokens)
    for (const auto& t : *tokens) j["tokens"].push_back({t.hash, t.user, t.revoked.value_or(-1)});
  auto events = s.events("", 1000);
  EXPECT_TRUE(events);
  if (events)
    for (const auto& e : *events) j["events"].push_back({e.subject, e.what, e.time_ms});
  return j.dump();
}

// A leader's store whose replicator keeps each entry, and the batches a day of work brings.
struct Leader {
  testing::TempDir dir;
  std::unique_ptr<SqliteStateStore> store;
  std::vector<ReplicatedEntry> log;
  Status answer = ok();  // what the replicator answers

  Leader() {
    auto s = SqliteStateStore::open(dir.file("leader.db"));
    EXPECT_TRUE(s) << s.error().message;
    store = std::move(*s);
    store->replicate_through([this](int64_t seq, const std::string& changes) {
      if (!answer) return answer;
      log.push_back({seq, changes});
      return ok();
    });
  }

  void work() {
    WriteBatch submit;
    submit.inserts = {make_job(1, "ada"), make_job(2, "bob")};
    submit.idempotency = {{"ada\nk1", 1, 1}};
    submit.events.emplace_back("job/1", 1001, "ada", "submitted", 1001000);
    ASSERT_TRUE(store->commit(submit));
    WriteBatch start(lifecycle::Changes{}, store::Durability::kWritten);
    auto j1 = make_job(1, "ada");
    j1.state = jobs::JobState::kRunning;
    j1.start_time = 1100;
    j1.nodes = {"dgx001"};
    start.updates = {j1};
    start.nodes = {{"dgx001", sched::NodeHealth::kUp, ""}};
    start.holds = {{"a-1", 1, {0, 1}, {"dgx001"}}};
    ASSERT_TRUE(store->commit(start));
    ASSERT_TRUE(store->add_token(store::TokenRecord{"ab12", "ada", store::Role::kAdmin}));
    ASSERT_TRUE(store->put_node_key({"dgx001", "k", 5, std::nullopt, "", std::nullopt}));
    WriteBatch end;
    j1.state = jobs::JobState::kCompleted;
    j1.end_time = 1200;
    end.updates = {j1};
    end.released = {"a-1"};
    end.token_revokes = {{"ab12", 1300}};
    ASSERT_TRUE(store->commit(end));
  }
};

std::unique_ptr<SqliteStateStore> open_store(const std::string& path) {
  auto s = SqliteStateStore::open(path);
  EXPECT_TRUE(s) << s.error().message;
  return s ? std::move(*s) : nullptr;
}

TEST(Replication, AStandbyAppliesTheLeadersEntriesToTheSameState) {
  Leader leader;
  leader.work();
  ASSERT_EQ(leader.log.size(), 5u);  // one entry per write transaction
  for (size_t i = 0; i < leader.log.size(); ++i) EXPECT_EQ(leader.log[i].seq, static_cast<int64_t>(i + 1));
  EXPECT_EQ(*leader.store->replicated_seq(), 5);

  auto standby = open_store(leader.dir.file("standby.db"));
  // In two runs, as a follower reads them.
  ASSERT_TRUE(standby->apply_replicated(std::span(leader.log).first(2)));
  EXPECT_EQ(*standby->replicated_seq(), 2);
  ASSERT_TRUE(standby->apply_replicated(std::span(leader.log).subspan(2)));
  EXPECT_EQ(*standby->replicated_seq(), 5);
  EXPECT_EQ(state_text(*standby), state_text(*leader.store));
  auto key = standby->find_node_key("dgx001");
  ASSERT_TRUE(key && *key);
  EXPECT_EQ((*key)->key, "k");
}

TEST(Replication, AStandbyKeepsACopyOfTheJobsItAppliesAndItsLoadTakesIt) {
  Leader leader;
  leader.work();
  WriteBatch more;
  auto j3 = make_job(3, "cy");
  j3.spec.command = {"torchrun", "train.py"};
  more.inserts = {j3};
  ASSERT_TRUE(leader.store->commit(more));

  auto standby = open_store(leader.dir.file("standby.db"));
  store::WarmJobs warm;
  ASSERT_TRUE(standby->warm_jobs(warm));
  EXPECT_TRUE(warm.complete);
  EXPECT_TRUE(warm.jobs.empty());
  ASSERT_TRUE(standby->apply_replicated(std::span(leader.log).first(1), &warm));
  ASSERT_EQ(warm.jobs.size(), 2u) << "jobs 1 and 2, inserted by entry 1";
  EXPECT_EQ(warm.jobs.at(1).state, jobs::JobState::kPending);
  ASSERT_TRUE(standby->apply_replicated(std::span(leader.log).subspan(1), &warm));
  ASSERT_EQ(warm.jobs.size(), 3u);
  EXPECT_EQ(warm.jobs.at(1).state, jobs::JobState::kCompleted) << "the updates of job 1 are in the copy";
  EXPECT_EQ(warm.jobs.at(1).end_time, 1200);
  EXPECT_EQ(warm.jobs.at(3).spec.command, j3.spec.command);

  // The load takes the copy instead of reading the table (a field changed here on purpose shows which was
  // used) and leaves nothing behind.
  warm.jobs.at(2).spec.name = "from the warm copy";
  auto loaded = standby->load(warm);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_FALSE(warm.complete);
  EXPECT_TRUE(warm.jobs.empty());
  ASSERT_EQ(loaded->jobs.size(), 3u);
  EXPECT_EQ(loaded->jobs[1].spec.name, "from the warm copy");
  EXPECT_EQ(state_text(*standby), state_text(*leader.store));

  // A copy that does not have the table's rows is not used: the load reads the table.
  store::WarmJobs short_one;
  ASSERT_TRUE(standby->warm_jobs(short_one));
  short_one.jobs.erase(3);
  short_one.jobs.at(2).spec.name = "stale";
  auto read = standby->load(short_one);
  ASSERT_TRUE(read);
  ASSERT_EQ(read->jobs.size(), 3u);
  EXPECT_NE(read->jobs[1].spec.name, "stale");
}

TEST(Replication, AWriteTheReplicatorRefusesIsNotCommitted) {
  Leader leader;
  leader.work();
  const std::string before = state_text(*leader.store);
  leader.answer = Error{ErrorCode::kUnavailable, "etcd: no quorum"};
  WriteBatch b;
  b.inserts = {make_job(3, "cy")};
  auto s = leader.store->commit(b);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(state_text(*leader.store), before);
  EXPECT_EQ(*leader.store->replicated_seq(), 5);

  // The API answers it 503 with Retry-After: the client may send the same request again.
  const api::HttpResponse answer = api::error_response(s.error());
  EXPECT_EQ(answer.status, 503);
  EXPECT_NE(std::find(answer.headers.begin(), answer.headers.end(), std::pair<std::string, std::string>("Retry-After", "1")),
            answer.headers.end());

  // kConflict: the term is over; the store says so through on_fenced.
  std::string fenced;
  leader.store->set_on_fenced([&](const std::string& why) { fenced = why; });
  leader.answer = Error{ErrorCode::kConflict, "the term is over"};
  EXPECT_FALSE(leader.store->commit(b));
  EXPECT_EQ(fenced, "the term is over");
  leader.answer = ok();
  ASSERT_TRUE(leader.store->commit(b));
  ASSERT_EQ(leader.log.back().seq, 6);  // the refused tries took no number
}

TEST(Replication, EntriesOutOfOrderOrOnADifferentHistoryAreRefusedWhole) {
  Leader leader;
  leader.work();
  auto standby = open_store(leader.dir.file("standby.db"));
  auto s = standby->apply_replicated(std::span(leader.log).subspan(1));  // entry 1 missing
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kConflict);
  EXPECT_EQ(*standby->replicated_seq(), 0);

  // A standby whose database took a write of its own: the leader's update of that row does not apply, and
  // neither does anything else of the run.
  ASSERT_TRUE(standby->apply_replicated(std::span(leader.log).first(1)));
  WriteBatch local;
  auto j2 = make_job(2, "bob");
  j2.reason = "written here, not by the leader";
  local.updates = {j2};
  ASSERT_TRUE(standby->commit(local));
  const std::string diverged = state_text(*standby);
  WriteBatch lead;
  j2.reason = "the leader's";
  lead.updates = {j2};
  ASSERT_TRUE(leader.store->commit(lead));
  std::vector<ReplicatedEntry> rest(leader.log.begin() + 1, leader.log.end());
  s = standby->apply_replicated(rest);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kConflict);
  EXPECT_EQ(state_text(*standby), diverged);
  EXPECT_EQ(*standby->replicated_seq(), 1);
}

TEST(Replication, AFirstLeadersRowsFromBeforeBecomeTheFirstEntry) {
  testing::TempDir dir;
  auto first = open_store(dir.file("first.db"));
  // Made before the cluster started (`railyard-scheduler token create --db`), so not replicated then.
  ASSERT_TRUE(first->add_token(store::TokenRecord{"cd34", "root", store::Role::kAdmin}));
  WriteBatch b;
  b.inserts = {make_job(1, "ada")};
  ASSERT_TRUE(first->commit(b));
  std::vector<ReplicatedEntry> log;
  first->replicate_through([&](int64_t seq, const std::string& changes) {
    log.push_back({seq, changes});
    return ok();
  });
  ASSERT_TRUE(first->replicate_existing(dir.file("scratch.db")));
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].seq, 1);
  EXPECT_FALSE(std::filesystem::exists(dir.file("scratch.db")));
  b.inserts = {make_job(2, "bob")};
  ASSERT_TRUE(first->commit(b));
  ASSERT_EQ(log.size(), 2u);
  auto standby = open_store(dir.file("standby.db"));
  ASSERT_TRUE(standby->apply_replicated(log));
  EXPECT_EQ(state_text(*standby), state_text(*first));
  auto token = standby->find_token("cd34");
  ASSERT_TRUE(token && *token);
  // Only once: the log has begun.
  auto again = first->replicate_existing(dir.file("scratch.db"));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
}

ha::LogOptions options_of(const testing::Etcd& etcd) {
  ha::LogOptions o;
  o.endpoints = {etcd.url()};
  o.prefix = "/test";
  return o;
}

// The leader key of one term, as the elector makes it: its create revision is the epoch.
int64_t lead(const testing::Etcd& etcd, const std::string& name) {
  ha::EtcdClient c({etcd.url()}, 2s);
  auto lease = c.grant(60);
  EXPECT_TRUE(lease);
  auto r = c.create("/test/leader", name, *lease);
  EXPECT_TRUE(r && r->created);
  return r ? r->revision : 0;
}

#define REQUIRE_ETCD()                                                                          \
  const std::string etcd_binary = testing::find_etcd();                                        \
  if (etcd_binary.empty()) GTEST_SKIP() << "etcd is not installed (deploy/bootstrap.sh installs etcd-server)"; \
  testing::Etcd etcd;                                                                           \
  ASSERT_TRUE(etcd.start(etcd_binary)) << etcd.log()

TEST(ReplicatedLog, EntriesComeBackInOrderWholeAcrossParts) {
  REQUIRE_ETCD();
  const int64_t epoch = lead(etcd, "s1");
  ha::LogWriter writer(options_of(etcd), epoch);
  std::string big(2 * ha::kPartBytes + 12345, '\0');  // random: deflate cannot shrink it
  std::mt19937 random(46);
  for (auto& c : big) c = static_cast<char>(random());
  ASSERT_TRUE(writer.append(1, "one"));
  ASSERT_TRUE(writer.append(2, big));  // three parts
  ASSERT_TRUE(writer.append(3, std::string("th\0ree", 6)));

  ha::LogReader reader(options_of(etcd));
  auto all = reader.read(0, 100);
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].changeset, "one");
  EXPECT_EQ((*all)[1].seq, 2);
  EXPECT_TRUE((*all)[1].changeset == big) << "entry 2 came back with " << (*all)[1].changeset.size() << " bytes";
  EXPECT_EQ((*all)[2].changeset, std::string("th\0ree", 6));
  auto later = reader.read(1, 1);
  ASSERT_TRUE(later);
  ASSERT_EQ(later->size(), 1u);
  EXPECT_EQ((*later)[0].seq, 2);
  auto none = reader.read(3, 100);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

// Rows as a day of submits writes them: the same keys and names over and over.
std::string compressible_rows(size_t bytes) {
  std::string rows;
  for (int id = 1; rows.size() < bytes; ++id)
    rows += R"({"id":)" + std::to_string(id) +
            R"(,"user":"ada","project":"llm","gpus":8,"command":["torchrun",)"
            R"("train.py"],"state":"pending","reason":"waiting for resources"})";
  return rows;
}

TEST(ReplicatedLog, EntriesAreStoredDeflatedAndAnEntryThatCannotBeReadIsRefused) {
  REQUIRE_ETCD();
  const int64_t epoch = lead(etcd, "s1");
  ha::LogWriter writer(options_of(etcd), epoch);
  const std::string rows = compressible_rows(3 * ha::kPartBytes);
  ASSERT_TRUE(writer.append(1, rows));
  ha::EtcdClient c({etcd.url()}, 2s);
  auto stored = c.list("/test/log/");
  ASSERT_TRUE(stored);
  size_t bytes = 0;
  for (const auto& kv : *stored) bytes += kv.value.size();
  EXPECT_EQ(stored->size(), 1u) << "3 MB of rows deflated fit one part";
  EXPECT_LT(bytes * 5, rows.size()) << "stored " << bytes << " bytes for " << rows.size();
  ha::LogReader reader(options_of(etcd));
  auto all = reader.read(0, 10);
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_EQ(all->size(), 1u);
  EXPECT_TRUE((*all)[0].changeset == rows);

  // Entry 2 in an encoding this version does not know: the reader stops with why, never hands it on.
  ASSERT_TRUE(c.put(ha::log_key("/test", 2, 0, 1), "x-from-a-newer-version", 0));
  auto unknown = reader.read(1, 10);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("entry 2"), std::string::npos) << unknown.error().message;
}

// etcd as production runs it: https and --client-cert-auth. The schedulers' client certificate is what lets
// them in; without it, or with one another CA signed, etcd refuses the connection (no one else may write the
// log that standbys apply).
TEST(ReplicatedLog, AnEtcdThatRequiresClientCertificatesTakesOnlyTheSchedulers) {
  const std::string etcd_binary = testing::find_etcd();
  if (etcd_binary.empty()) GTEST_SKIP() << "etcd is not installed (deploy/bootstrap.sh installs etcd-server)";
  testing::TempDir certs;
  ASSERT_TRUE(testing::make_etcd_certificates(certs.path())) << "openssl could not make the certificates";
  testing::Etcd etcd;
  ASSERT_TRUE(etcd.start(etcd_binary, certs.path())) << etcd.log();
  const net::ClientTls ours{certs.file("ca.pem"), certs.file("client.pem"), certs.file("client.key")};

  ha::LogOptions options = options_of(etcd);
  options.tls = ours;
  ha::EtcdClient c({etcd.url()}, 2s, ours);
  auto lease = c.grant(10);
  ASSERT_TRUE(lease) << lease.error().message;
  auto won = c.create("/test/leader", "s1", *lease);
  ASSERT_TRUE(won && won->created);
  ASSERT_TRUE(ha::LogWriter(options, won->revision).append(1, "over TLS"));
  auto all = ha::LogReader(options).read(0, 10);
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].changeset, "over TLS");

  for (const net::ClientTls& stranger : {net::ClientTls{certs.file("ca.pem"), "", ""},
                                         net::ClientTls{certs.file("ca.pem"), certs.file("other-client.pem"),
                                                        certs.file("other-client.key")}}) {
    ha::EtcdClient refused({etcd.url()}, 2s, stranger);
    auto put = refused.put("/test/log/x", "injected", 0);
    EXPECT_FALSE(put) << "etcd took a write from a client without the schedulers' certificate";
  }
  auto still = c.list("/test/log/");
  ASSERT_TRUE(still);
  EXPECT_EQ(still->size(), 1u);

  EXPECT_TRUE(net::check_client_tls(ours));
  auto mismatched =
      net::check_client_tls({certs.file("ca.pem"), certs.file("client.pem"), certs.file("server.key")});
  ASSERT_FALSE(mismatched);
  EXPECT_NE(mismatched.error().message.find("not the PEM private key"), std::string::npos)
      << mismatched.error().message;
  EXPECT_FALSE(net::check_client_tls({certs.file("ca.pem"), certs.file("client.pem"), ""}));
}

TEST(ReplicatedLog, DecodingRefusesATruncatedStreamAndAnOversizedClaim) {
  const std::string rows = compressible_rows(100'000);
  std::string stored = ha::encode_entry(rows);
  ASSERT_EQ(stored[0], 'z');
  auto back = ha::decode_entry(stored);
  ASSERT_TRUE(back);
  EXPECT_TRUE(*back == rows);
  EXPECT_FALSE(ha::decode_entry(stored.substr(0, stored.size() / 2)));
  std::string bomb = stored;
  bomb[8] = 1;  // the length's top byte: 2^56 bytes and more
  auto refused = ha::decode_entry(bomb);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("over the"), std::string::npos) << refused.error().message;
  std::string inflated = stored;
  inflated[4] = 0x10;  // 2^28 bytes and more: under the limit, far beyond what these bytes can inflate to
  auto claimed = ha::decode_entry(inflated);
  ASSERT_FALSE(claimed);
  EXPECT_NE(claimed.error().message.find("deflated ones"), std::string::npos) << claimed.error().message;
  // What deflate cannot shrink is kept as it is; a changeset from before the tag (its own first byte 'T').
  EXPECT_EQ(ha::encode_entry("ab"), "rab");
  EXPECT_EQ(*ha::decode_entry("rab"), "ab");
  EXPECT_EQ(*ha::decode_entry("T\x01\x02"), "T\x01\x02");
  EXPECT_FALSE(ha::decode_entry(""));
}

TEST(ReplicatedLog, AnAppendIsFencedByTheTermAndAgreesWithItsOwnRetry) {
  REQUIRE_ETCD();
  const int64_t epoch = lead(etcd, "s1");
  ha::LogWriter writer(options_of(etcd), epoch);
  ASSERT_TRUE(writer.append(1, "a"));
  EXPECT_TRUE(writer.append(1, "a"));  // the same append again: its first try went through
  auto other = writer.append(1, "b");  // another entry 1: this database is behind the log
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kConflict);

  // A new term: the old leader's writes fail inside etcd.
  ha::EtcdClient c({etcd.url()}, 2s);
  auto key = c.get("/test/leader");
  ASSERT_TRUE(key && *key);
  ASSERT_TRUE(c.revoke((*key)->lease));
  const int64_t epoch2 = lead(etcd, "s2");
  ASSERT_GT(epoch2, epoch);
  auto deposed = writer.append(2, "from the deposed leader");
  ASSERT_FALSE(deposed);
  EXPECT_EQ(deposed.error().code, ErrorCode::kConflict);
  ha::LogReader reader(options_of(etcd));
  auto all = reader.read(0, 100);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 1u);
  ASSERT_TRUE(ha::LogWriter(options_of(etcd), epoch2).append(2, "from the new leader"));
  EXPECT_FALSE(ha::LogWriter(options_of(etcd), epoch).clear_after(0));
}

TEST(ReplicatedLog, AnEntryLeftUnfinishedIsNotReadAndTheNextLeaderClearsIt) {
  REQUIRE_ETCD();
  const int64_t epoch = lead(etcd, "s1");
  ASSERT_TRUE(ha::LogWriter(options_of(etcd), epoch).append(1, "done"));
  // Entry 2's first two parts of three, as a leader killed between its puts leaves them.
  ha::EtcdClient c({etcd.url()}, 2s);
  ASSERT_TRUE(c.put(ha::log_key("/test", 2, 0, 3), "p0", 0));
  ASSERT_TRUE(c.put(ha::log_key("/test", 2, 1, 3), "p1", 0));
  ha::LogReader reader(options_of(etcd));
  auto all = reader.read(0, 100);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  ha::LogWriter next(options_of(etcd), epoch);
  ASSERT_TRUE(next.clear_after(1));
  ASSERT_TRUE(next.append(2, "whole"));
  all = reader.read(1, 100);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].changeset, "whole");
}

TEST(ReplicatedLog, AFollowerKeepsAStandbysDatabaseWithTheLeaders) {
  REQUIRE_ETCD();
  const int64_t epoch = lead(etcd, "s1");
  Leader leader;
  ha::LogWriter writer(options_of(etcd), epoch);
  leader.store->replicate_through([&](int64_t seq, const std::string& changes) { return writer.append(seq, changes); });
  leader.work();
  auto standby = open_store(leader.dir.file("standby.db"));
  ha::LogFollower follower(options_of(etcd), "s2", 0, [&](std::span<const ha::LogEntry> entries) {
    std::vector<ReplicatedEntry> rows;
    for (const auto& e : entries) rows.push_back({e.seq, e.changeset});
    return standby->apply_replicated(rows);
  }, 10ms);
  WriteBatch more;
  more.inserts = {make_job(3, "cy")};
  ASSERT_TRUE(leader.store->commit(more));
  for (auto until = std::chrono::steady_clock::now() + 10s;
       follower.applied() < 6 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(10ms);
  follower.stop();
  EXPECT_EQ(follower.failure(), "");
  ASSERT_EQ(follower.applied(), 6);
  ASSERT_TRUE(follower.catch_up());
  EXPECT_EQ(state_text(*standby), state_text(*leader.store));
  // It published how far it is, for `railyard cluster status`.
  ha::EtcdClient c({etcd.url()}, 2s);
  auto published = c.get("/test/applied/s2");
  ASSERT_TRUE(published && *published);
  EXPECT_EQ((*published)->value, "6");
}

TEST(ReplicatedLog, TheTrimFloorKeepsWhatLiveControllersNeedWithinABound) {
  ha::TrimOptions o;
  o.keep = 10;
  o.keep_max = 40;
  // s1 leads (its own position is the head); s3 is live and furthest behind; s4 published but is not live.
  const std::vector<std::string> live{"s1", "s2", "s3"};
  const std::vector<std::pair<std::string, int64_t>> applied{{"s2", 95}, {"s3", 70}, {"s4", 3}};
  EXPECT_EQ(ha::trim_floor(100, live, "s1", applied, o), 70);
  EXPECT_EQ(ha::trim_floor(100, {"s1", "s2"}, "s1", applied, o), 90);   // keep behind the head
  EXPECT_EQ(ha::trim_floor(200, live, "s1", applied, o), 160);          // s3 too far behind: keep_max
  EXPECT_EQ(ha::trim_floor(100, {"s1", "s5"}, "s1", applied, o), 60);   // live, nothing published: 0
  EXPECT_EQ(ha::trim_floor(5, {"s1"}, "s1", applied, o), 0);
}

TEST(ReplicatedLog, ATrimmedLogSendsAControllerBehindItToASnapshot) {
  REQUIRE_ETCD();
  const int64_t epoch = lead(etcd, "s1");
  ha::LogWriter writer(options_of(etcd), epoch);
  for (int64_t seq = 1; seq <= 30; ++seq) ASSERT_TRUE(writer.append(seq, "entry " + std::to_string(seq)));
  ha::EtcdClient c({etcd.url()}, 2s);
  ASSERT_TRUE(c.put("/test/members/s1", R"({"name":"s1"})", 0));
  ASSERT_TRUE(c.put("/test/members/s2", R"({"name":"s2"})", 0));
  ASSERT_TRUE(c.put("/test/applied/s2", "25", 0));
  ha::TrimOptions o;
  o.keep = 2;
  o.keep_max = 100;
  o.every = std::chrono::hours(1);  // rounds run here, by hand
  ha::LogTrimmer trimmer(options_of(etcd), epoch, "s1", [] { return int64_t{30}; }, o);
  auto base = trimmer.trim_once();
  ASSERT_TRUE(base) << base.error().message;
  EXPECT_EQ(*base, 25);  // s2 still needs 26..30
  ha::LogReader reader(options_of(etcd));
  auto behind = reader.read(10, 100);
  ASSERT_FALSE(behind);
  EXPECT_EQ(behind.error().code, ErrorCode::kNotFound);
  auto rest = reader.read(25, 100);
  ASSERT_TRUE(rest) << rest.error().message;
  ASSERT_EQ(rest->size(), 5u);
  EXPECT_EQ(rest->front().seq, 26);
  auto keys = c.list("/test/log/");
  ASSERT_TRUE(keys);
  EXPECT_EQ(keys->size(), 5u);  // 1..25 are gone from etcd
  // s2 catches up: the next round trims to head - keep.
  ASSERT_TRUE(c.put("/test/applied/s2", "30", 0));
  base = trimmer.trim_once();
  ASSERT_TRUE(base);
  EXPECT_EQ(*base, 28);
  // A deposed leader's trimmer trims nothing.
  ASSERT_TRUE(c.revoke((*c.get("/test/leader"))->lease));
  lead(etcd, "s2");
  ASSERT_TRUE(c.put("/test/applied/s2", "30", 0));
  ha::LogTrimmer old(options_of(etcd), epoch, "s1", [] { return int64_t{31}; }, o);
  auto refused = old.trim_once();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
}

TEST(Replication, ASnapshotIsTheDatabaseAtOneEntry) {
  Leader leader;
  leader.work();
  const std::string copy = leader.dir.file("copy.db");
  ASSERT_TRUE(SqliteStateStore::snapshot_to(leader.dir.file("leader.db"), copy));
  auto restored = open_store(copy);
  EXPECT_EQ(*restored->replicated_seq(), 5);
  EXPECT_EQ(state_text(*restored), state_text(*leader.store));
  // It follows the log from there.
  WriteBatch b;
  b.inserts = {make_job(9, "dee")};
  ASSERT_TRUE(leader.store->commit(b));
  ASSERT_TRUE(restored->apply_replicated(std::span(leader.log).subspan(5)));
  EXPECT_EQ(state_text(*restored), state_text(*leader.store));
}

}  // namespace
}  // namespace railyard
