// Bad input, tried as an attacker would (issue 32), against the real scheduler over 127.0.0.1: deeply
// nested JSON, huge host lists, names and arrays, dependency cycles, 100 MB WebSocket frames, and a
// slow-loris crowd. Each is refused with a clear error, and another client is still answered 200 while or
// after it happens. (Duplicate keys in a batch: AuthTest.DuplicateKeysAreRefusedInABatchAsInASingleSubmit.)
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "tests/abuse_util.hpp"
#include "tests/fault_util.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kBin = RAILYARD_SCHEDULER_BIN;
const std::string kCli = RAILYARD_BIN;

constexpr const char* kCluster = R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n[1-2]"}]})";

// 100,000 levels of arrays: valid JSON whose tree a recursive copy or dump cannot walk on an 8 MiB stack.
const std::string kDeep = std::string(100'000, '[') + std::string(100'000, ']');

class AbuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("two.json")) << kCluster;
    alice_ = create_token(kBin, db(), "alice", "user");
    root_ = create_token(kBin, db(), "root", "admin");
  }
  std::string db() const { return dir_.file("state.db"); }
  // --private, so that a watcher's first frame is read (its auth), and --node-keys, so that an agent's
  // register is read past the "no agents accepted" refusal.
  std::unique_ptr<DaemonProcess> start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--listen",  "127.0.0.1:0",         "--db",       db(),
                                  "--cluster", dir_.file("two.json"), "--web-root", "none",
                                  "--private", "--node-keys"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto d = std::make_unique<DaemonProcess>(kBin, args);
    EXPECT_GT(d->port(), 0);
    return d;
  }
  // The other client: a list of jobs from a connection of its own.
  int list_status(int port) {
    HttpClient other(port);
    return other.request("GET", "/api/v1/jobs", "", alice_).status;
  }
  TempDir dir_;
  std::string alice_, root_;
};

std::string message(const HttpResult& r) { return r.json()["error"].value("message", ""); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(AbuseTest, DeeplyNestedJsonIsRefusedOnBodiesAndAgentAndWatchFrames) {
  auto d = start();
  HttpClient c(d->port());
  const std::pair<std::string, std::string> bodies[] = {
      {"/api/v1/jobs", kDeep},
      {"/api/v1/jobs:batch", R"({"jobs": )" + kDeep + "}"},
      {"/api/v1/nodes/n1/drain", R"({"reason": )" + kDeep + "}"},
      {"/api/v1/tokens", R"({"user": )" + kDeep + "}"},
  };
  for (const auto& [target, body] : bodies) {
    auto r = c.request("POST", target, body, root_);
    EXPECT_EQ(r.status, 400) << target << ": " << r.body;
    EXPECT_TRUE(has(message(r), "nested deeper than")) << target << ": " << r.body;  // (a batch: 33)
  }
  // An agent's register is read before its MACs are checked: the nesting must be refused unauthenticated.
  RawWebSocket agent(d->port(), "/api/v1/agent");
  ASSERT_TRUE(agent.open());
  auto hello = agent.read_frame();
  ASSERT_TRUE(hello && has(hello->payload, "challenge"));
  ASSERT_TRUE(agent.send_text(R"({"type": "register", "v": 1, "agent": "x:1", "nodes": [{"name": "n1", )"
                              R"("inventory": )" +
                              kDeep + "}]}"));
  auto refused = agent.read_frame();
  ASSERT_TRUE(refused) << "no answer: the scheduler died?";
  const json e = json::parse(refused->payload);
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["message"], "first message: nested deeper than 32 levels") << refused->payload;
  auto closing = agent.read_frame();
  ASSERT_TRUE(closing);
  EXPECT_EQ(closing->opcode, 8);
  RawWebSocket watch(d->port(), "/api/v1/watch");
  ASSERT_TRUE(watch.open());
  ASSERT_TRUE(watch.send_text(kDeep));
  auto watch_refused = watch.read_frame();
  ASSERT_TRUE(watch_refused);
  EXPECT_TRUE(has(watch_refused->payload, "first frame: nested deeper than 32 levels"))
      << watch_refused->payload;
  EXPECT_EQ(list_status(d->port()), 200);
}

TEST_F(AbuseTest, HugeHostListsAreRefusedBeforeExpanding) {
  auto d = start();
  // The API takes one node name per request: a host list is just a name that is not there.
  HttpClient c(d->port());
  auto r = c.request("POST", "/api/v1/nodes/dgx%5B0000000-9999999%5D/drain", R"({"reason": "x"})", root_);
  EXPECT_EQ(r.status, 404) << r.body;
  // The CLI expands lists for drain, resume and node remove (at most 100,000 names) ...
  const std::string server = " --url http://127.0.0.1:" + std::to_string(d->port()) + " --token " + root_;
  for (const std::string action : {"drain 'dgx[0000000-9999999]' --reason x", "resume 'dgx[0000000-9999999]'",
                                   "node remove 'dgx[0000000-9999999]'"}) {
    const std::string out = run_capture(kCli + " " + action + server + " 2>&1; echo exit=$?");
    EXPECT_TRUE(has(out, "more than 100000 hosts")) << action << ": " << out;
    EXPECT_TRUE(has(out, "exit=2")) << action << ": " << out;
  }
  // ... and the scheduler's node-key command (at most 1,000,000), before it touches the database.
  const std::string out = run_capture(kBin + " node-key issue --db " + db() +
                                      " --node 'dgx[0000000-9999999]' 2>&1; echo exit=$?");
  EXPECT_TRUE(has(out, "more than 1000000 hosts")) << out;
  EXPECT_TRUE(has(out, "exit=2")) << out;
  EXPECT_EQ(list_status(d->port()), 200);
}

TEST_F(AbuseTest, HugeNamesArraysAndBatchesAreRefusedNamingTheFieldAndLimit) {
  auto d = start();
  HttpClient c(d->port());
  auto name = c.request("POST", "/api/v1/jobs",
                        R"({"gpus": 1, "name": ")" + std::string(1'000'000, 'a') + "\"}", alice_);
  EXPECT_EQ(name.status, 400);
  EXPECT_TRUE(has(message(name), "name: 1000000 bytes; at most 256")) << name.body.substr(0, 300);
  auto billion = c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "array": "0-999999999"})", alice_);
  EXPECT_EQ(billion.status, 400);
  EXPECT_TRUE(has(message(billion), "index 999999999 is above 9999999")) << billion.body;
  auto ten_million = c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "array": "0-9999999"})", alice_);
  EXPECT_EQ(ten_million.status, 400);
  EXPECT_TRUE(has(message(ten_million), "more than 1000000 tasks")) << ten_million.body;
  json many = json::array();
  for (int i = 0; i < 10'001; ++i) many.push_back({{"gpus", 1}});
  auto batch = c.request("POST", "/api/v1/jobs:batch", json{{"jobs", many}}.dump(), alice_);
  EXPECT_EQ(batch.status, 400);
  EXPECT_TRUE(has(message(batch), "jobs: at most 10000 per batch")) << batch.body;
  EXPECT_EQ(list_status(d->port()), 200);
  EXPECT_EQ(c.request("GET", "/api/v1/jobs", "", alice_).json()["jobs"].size(), 0u) << "nothing was stored";
}

TEST_F(AbuseTest, DependencyCyclesCannotBeSubmitted) {
  auto d = start();
  HttpClient c(d->port());
  // On itself: it would be job 1.
  auto self = c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "afterok": [1]})", alice_);
  EXPECT_EQ(self.status, 400);
  EXPECT_TRUE(has(message(self), "is not an earlier job (this one will be job 1")) << self.body;
  ASSERT_EQ(c.request("POST", "/api/v1/jobs", R"({"gpus": 1})", alice_).json()["id"], 1);
  ASSERT_EQ(c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "afterok": [1]})", alice_).json()["id"], 2);
  // A -> B -> A would need A (1) to wait for B (2): a job names only earlier ones, so no job can wait for a
  // later id, and no cycle can form. Also in a batch, whose entries take ids 3 and 4 in order.
  auto later = c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "dependency": "afterany:9"})", alice_);
  EXPECT_EQ(later.status, 400);
  EXPECT_TRUE(has(message(later), "job 9 is not an earlier job")) << later.body;
  auto forward = c.request("POST", "/api/v1/jobs:batch",
                           R"({"jobs": [{"gpus": 1, "afterok": [4]}, {"gpus": 1, "afterok": [3]}]})", alice_);
  EXPECT_EQ(forward.status, 400);
  EXPECT_TRUE(has(message(forward), "jobs[0]: dependency afterok:4: job 4 is not an earlier job"))
      << forward.body;
  auto backward = c.request("POST", "/api/v1/jobs:batch",
                            R"({"jobs": [{"gpus": 1}, {"gpus": 1, "afterok": [3]}]})", alice_);
  EXPECT_EQ(backward.status, 201) << backward.body;
  EXPECT_EQ(list_status(d->port()), 200);
}

// Announces a 100 MB text message and sends its first 2 MiB: the answer is a close frame with 1009.
void expect_too_big_closes(RawWebSocket& ws) {
  ASSERT_TRUE(ws.send_header(100'000'000));
  ws.send_payload(std::string(size_t{2} << 20, 'x'));  // may fail part way: the server stops reading
  for (int i = 0; i < 5; ++i) {
    auto f = ws.read_frame();
    ASSERT_TRUE(f) << "the connection ended without a close frame";
    if (f->opcode != 8) continue;  // a frame sent before (the watch's hello)
    EXPECT_EQ(f->close_code(), 1009) << "close code";
    return;
  }
  FAIL() << "no close frame";
}

TEST_F(AbuseTest, HundredMegabyteWebSocketMessagesAreClosedAsTooBig) {
  auto d = start();
  RawWebSocket agent(d->port(), "/api/v1/agent");
  ASSERT_TRUE(agent.open());
  ASSERT_TRUE(agent.read_frame());  // hello
  expect_too_big_closes(agent);
  RawWebSocket watch(d->port(), "/api/v1/watch");
  ASSERT_TRUE(watch.open());
  expect_too_big_closes(watch);
  EXPECT_EQ(list_status(d->port()), 200);
}

TEST_F(AbuseTest, ConnectionsOverTheCapAreAnswered503AndEarlierClientsStillServed) {
  constexpr int kCap = 200;
  // A long header timeout: here the crowd is held by the cap alone.
  auto d = start({"--max-connections", std::to_string(kCap), "--header-timeout", "600"});
  HttpClient early(d->port());
  ASSERT_EQ(early.request("GET", "/api/v1/jobs", "", alice_).status, 200);
  std::vector<int> crowd;
  for (int i = 0; i < kCap - 1; ++i) {
    crowd.push_back(connect_local(d->port()));
    ASSERT_GE(crowd.back(), 0);
    send_all(crowd.back(), "GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n");  // never finished
  }
  // A newcomer that sends nothing is held while there is room (no answer) and refused once the crowd is in.
  std::string refusal;
  ASSERT_TRUE(until(
      [&] {
        const int fd = connect_local(d->port());
        refusal = recv_some(fd, 4096, 2s);
        ::close(fd);
        return has(refusal, "HTTP/1.1 503");
      },
      60s))
      << "never refused: " << refusal;
  EXPECT_TRUE(has(refusal, "too many connections")) << refusal;
  // A client connected before is still served while the cap is full.
  EXPECT_EQ(early.request("GET", "/api/v1/jobs", "", alice_).status, 200);
  for (int fd : crowd) ::close(fd);
  EXPECT_TRUE(until([&] { return list_status(d->port()) == 200; }))
      << "new clients refused after the crowd left";
}

TEST_F(AbuseTest, SlowHeadersAreClosedAfterTheHeaderTimeout) {
  auto d = start({"--max-connections", "400", "--header-timeout", "1"});
  std::vector<int> crowd;
  for (int i = 0; i < 300; ++i) {
    crowd.push_back(connect_local(d->port()));
    ASSERT_GE(crowd.back(), 0);
    send_all(crowd.back(), "GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  }
  // One more sends its header a byte at a time: the deadline is for the whole header, not per byte.
  const int trickle = connect_local(d->port());
  bool trickle_closed = false;
  for (int i = 0; i < 100 && !trickle_closed; ++i) {
    send_all(trickle, i == 0 ? "GET /api/v1/jobs HTTP/1.1\r\nX-Slow: " : "a");
    trickle_closed = closed_by_peer(trickle, 200ms);
  }
  EXPECT_TRUE(trickle_closed) << "a header sent a byte at a time for 20 s was never closed";
  ::close(trickle);
  int closed = 0;
  for (int fd : crowd) {
    closed += closed_by_peer(fd, 30s) ? 1 : 0;
    ::close(fd);
  }
  EXPECT_EQ(closed, 300);
  EXPECT_EQ(list_status(d->port()), 200);
}

}  // namespace
}  // namespace railyard::testing
