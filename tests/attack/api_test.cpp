// The scheduler's API as an attacker with an ordinary account (or none) uses it (issue 44), against the real
// `railyard-scheduler`: reading another user's job secrets (list, show, watch), a WebSocket watcher that
// never reads, one address opening many connections, releasing an admin's hold, a standby whose leader
// hint points at a listener the attacker owns, and the Unix socket's mode between its creation and its
// chmod. docs/RELIABILITY.md's threat model names each test.
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <chrono>
#include <thread>

#include "tests/abuse_util.hpp"
#include "tests/attack/api_attack_util.hpp"
#include "tests/daemon_fixture.hpp"
#include "tests/fault_util.hpp"

namespace railyard::testing {
namespace {

using namespace std::chrono_literals;
using daemon_fixture::DaemonTest;
using daemon_fixture::submit;
using nlohmann::json;

constexpr const char* kSecret = "hf_DoNotLeakThisValue0123456789";

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class ApiAttackTest : public DaemonTest {
 protected:
  // A job of root's that takes every GPU, so that the jobs after it wait (and can be held and released).
  void fill_cluster(HttpClient& c) { submit(c, admin_, R"({"name": "blocker", "gpus": 16})"); }
  int64_t submit_with_secret(HttpClient& c) {
    fill_cluster(c);
    return submit(c, alice_,
                  json{{"name", "secretive"}, {"gpus", 1}, {"env", {{"HF_TOKEN", kSecret}, {"MODE", "fast"}}}}
                      .dump());
  }
  // Every frame `ws` gets while alice holds and releases job `id` a few times, as one string.
  std::string watch_frames(RawWebSocket& ws, HttpClient& c, int64_t id) {
    std::string seen;
    const std::string job = "/api/v1/jobs/" + std::to_string(id);
    for (int i = 0; i < 3; ++i) {
      c.request("POST", job + "/hold", "", alice_);
      c.request("POST", job + "/release", "", alice_);
      while (auto f = ws.read_frame(500ms)) seen += f->payload + "\n";
    }
    return seen;
  }
};

TEST_F(ApiAttackTest, EnvValuesReachOnlyTheOwnerAndAdminsInListShowAndWatch) {
  auto d = start();
  HttpClient c(d->port());
  const int64_t id = submit_with_secret(c);
  const std::string one = "/api/v1/jobs/" + std::to_string(id);
  for (const std::string& target : {one, std::string("/api/v1/jobs")}) {
    for (const auto& [who, token] : {std::pair{"bob", bob_}, std::pair{"anonymous", std::string()}}) {
      auto r = c.request("GET", target, "", token);
      ASSERT_EQ(r.status, 200) << who << " " << target << ": " << r.body;
      EXPECT_FALSE(has(r.body, kSecret)) << who << " read the secret through " << target;
      EXPECT_TRUE(has(r.body, "\"HF_TOKEN\":\"<hidden>\"")) << who << " " << target << ": " << r.body;
      EXPECT_TRUE(has(r.body, "\"env_hidden\":true")) << r.body;
    }
    for (const auto& [who, token] : {std::pair{"alice", alice_}, std::pair{"root", admin_}}) {
      auto r = c.request("GET", target, "", token);
      EXPECT_TRUE(has(r.body, kSecret)) << who << " (owner or admin) does not see the value through " << target;
    }
  }
  EXPECT_EQ(c.request("GET", one, "", "ry_not_a_token").status, 401) << "a bad token reads as anyone";
  // The watch stream: anonymous, and named by an auth frame.
  for (const auto& [who, token] : {std::pair{"anonymous", std::string()}, std::pair{"bob", bob_},
                                   std::pair{"alice", alice_}, std::pair{"root", admin_}}) {
    RawWebSocket ws(d->port(), "/api/v1/watch?job=" + std::to_string(id));
    ASSERT_TRUE(ws.open()) << who;
    if (!token.empty()) ws.send_text(json{{"type", "auth"}, {"token", token}}.dump());
    std::this_thread::sleep_for(200ms);  // the auth frame is read before the changes below
    const std::string frames = watch_frames(ws, c, id);
    ASSERT_TRUE(has(frames, "\"type\":\"job\"")) << who << " got no job frame: " << frames;
    const bool may = std::string(who) == "alice" || std::string(who) == "root";
    EXPECT_EQ(has(frames, kSecret), may) << who << " over the watch stream: " << frames.substr(0, 2000);
  }
}

TEST_F(ApiAttackTest, WatcherThatNeverReadsIsClosedWhileTheSchedulerAnswersAndStaysBounded) {
  // Freed memory goes back at once (ASan would keep it in quarantine and hide what a queue keeps).
  const char* asan = std::getenv("ASAN_OPTIONS");
  ::setenv("ASAN_OPTIONS", (std::string(asan ? asan : "") + ":quarantine_size_mb=0").c_str(), 1);
  auto d = start();
  const pid_t pid = find_process(daemon_fixture::kBin, db());
  ASSERT_GT(pid, 0);
  HttpClient c(d->port());
  // Half a MiB per job frame: each hold and each release sends one to the watcher.
  const std::string big(512 * 1024, 'x');
  fill_cluster(c);
  const int64_t id = submit(c, alice_, json{{"name", "big"}, {"gpus", 1}, {"command", {"/bin/echo", big}}}.dump());
  RawWebSocket stuck(d->port(), "/api/v1/watch?job=" + std::to_string(id));
  ASSERT_TRUE(stuck.open());
  const long before = rss_kib(pid);
  const std::string job = "/api/v1/jobs/" + std::to_string(id);
  constexpr int kRounds = 250;  // 500 frames, 250 MiB unless the scheduler drops what the watcher leaves
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_EQ(c.request("POST", job + "/hold", "", alice_).status, 200) << i;
    ASSERT_EQ(c.request("POST", job + "/release", "", alice_).status, 200) << i;
    if (i % 25 == 0) EXPECT_EQ(c.request("GET", "/api/v1/health").status, 200) << "round " << i;
  }
  const long grown_mib = (rss_kib(pid) - before) / 1024;
  EXPECT_LT(grown_mib, 120) << "the scheduler kept the frames of a watcher that does not read";
  // The watcher, reading at last, gets what was in flight, then the close (1008 when it still reached the
  // socket, else the end of the connection); never all 500 frames.
  // Counted in bytes, not frames: what arrives is bounded by the socket buffers plus the queue's 16 MiB, a
  // fraction of the 250 MiB sent, however the server splits messages into frames (pings, continuations).
  size_t bytes = 0;
  int frames = 0, close_code = -1;
  while (auto f = stuck.read_frame(10s)) {
    if (f->opcode == 8) {
      close_code = f->close_code();
      break;
    }
    ++frames;
    bytes += f->payload.size();
  }
  EXPECT_LT(bytes, size_t{kRounds} * big.size()) << "every frame was queued for a watcher that did not read ("
                                                  << frames << " frames)";
  EXPECT_TRUE(close_code == 1008 || close_code == -1) << "close code " << close_code;
  EXPECT_FALSE(stuck.read_frame(2s).has_value()) << "the connection is still open";
  EXPECT_EQ(c.request("GET", "/api/v1/health").status, 200);
}

TEST_F(ApiAttackTest, WatcherThatNeverAuthenticatesIsClosedAfterTheDeadline) {
  auto d = start({"--private"});
  RawWebSocket ws(d->port(), "/api/v1/watch");
  ASSERT_TRUE(ws.open());
  const auto t0 = std::chrono::steady_clock::now();
  auto f = ws.read_frame(30s);
  ASSERT_TRUE(f) << "no answer to a watcher that never authenticated";
  EXPECT_TRUE(has(f->payload, "no auth frame within")) << f->payload;
  auto close = ws.read_frame(5s);
  EXPECT_TRUE(!close || close->opcode == 8);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
}

TEST_F(ApiAttackTest, ConnectionsFromOneAddressOverItsCapAreRefused) {
  auto d = start({"--max-connections-per-address", "8", "--header-timeout", "600"});
  std::vector<int> crowd;
  for (int i = 0; i < 8; ++i) {
    crowd.push_back(connect_local(d->port()));
    ASSERT_GE(crowd.back(), 0);
    send_all(crowd.back(), "GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n");  // never finished
  }
  std::this_thread::sleep_for(300ms);  // the scheduler has accepted them all
  const int ninth = connect_local(d->port());
  const std::string refusal = recv_some(ninth, 4096, 5s);
  ::close(ninth);
  EXPECT_TRUE(has(refusal, "HTTP/1.1 503")) << "a ninth connection from 127.0.0.1 was not refused: " << refusal;
  EXPECT_TRUE(has(refusal, "too many connections from 127.0.0.1")) << refusal;
  for (int fd : crowd) ::close(fd);
  EXPECT_TRUE(until([&] { return HttpClient(d->port()).request("GET", "/api/v1/health").status == 200; }))
      << "the address stayed refused after its connections closed";
}

TEST_F(ApiAttackTest, UserCannotReleaseAnAdminsHoldEvenAfterARestart) {
  auto d = start();
  HttpClient c(d->port());
  fill_cluster(c);
  const int64_t id = submit(c, alice_, R"({"name": "held", "gpus": 1})");
  const std::string job = "/api/v1/jobs/" + std::to_string(id);
  // Her own hold she releases.
  ASSERT_EQ(c.request("POST", job + "/hold", "", alice_).status, 200);
  EXPECT_EQ(c.request("GET", job, "", alice_).json().value("held_by", ""), "alice");
  ASSERT_EQ(c.request("POST", job + "/release", "", alice_).status, 200);
  // An admin's she does not, before or after a restart.
  ASSERT_EQ(c.request("POST", job + "/hold", "", admin_).status, 200);
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
      d.reset();
      d = start();
    }
    HttpClient h(d->port());
    auto r = h.request("POST", job + "/release", "", alice_);
    EXPECT_EQ(r.status, 403) << "round " << round << ": " << r.body;
    EXPECT_TRUE(has(r.body, "held by root, an admin")) << r.body;
    const json shown = h.request("GET", job, "", alice_).json();
    EXPECT_EQ(shown.value("state", ""), "HELD");
    EXPECT_EQ(shown.value("held_by", ""), "root");
    EXPECT_TRUE(shown.value("held_by_admin", false));
  }
  HttpClient h(d->port());
  EXPECT_EQ(h.request("POST", job + "/release", "", admin_).status, 200);
}

TEST_F(ApiAttackTest, CliFollowsNoLeaderHintToAnUnconfiguredUrlAndSendsItNoToken) {
  TempDir home;
  FakeHttpServer trap(http_answer(200, "OK", R"({"jobs": [], "next_after": null})"));
  FakeHttpServer standby(http_answer(
      503, "Service Unavailable",
      json{{"error", {{"code", "not_leader"}, {"message", "a standby"}}}, {"leader", {{"address", trap.url()}}}}.dump()));
  const std::string cli = "env -u RAILYARD_URL -u RAILYARD_TOKEN HOME=" + home.file("") +
                          " XDG_CONFIG_HOME=" + home.file("") + " " + RAILYARD_BIN;
  auto r = run_command(cli + " queue --timeout 5 --token ry_secret_of_alice --url " + standby.url(), home.file("log"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "not a configured scheduler URL")) << r.output;
  EXPECT_TRUE(has(r.output, trap.url())) << "the error names the hint: " << r.output;
  for (const auto& head : trap.heads())
    EXPECT_FALSE(has(head, "Authorization")) << "the token reached an unconfigured leader: " << head;
  EXPECT_TRUE(trap.heads().empty());
  // A configured one is followed.
  auto ok = run_command(cli + " queue --timeout 5 --token ry_secret_of_alice --url " + standby.url() + "," +
                            trap.url(), home.file("log2"));
  EXPECT_EQ(ok.status, 0) << ok.output;
  ASSERT_FALSE(trap.heads().empty());
  EXPECT_TRUE(has(trap.heads().back(), "Bearer ry_secret_of_alice"));
}

// The Unix socket appears with its mode: no change of its attributes by path after it was made.
mode_t socket_mode_at_creation(const std::string& db, const std::string& dir, std::vector<std::string> flags,
                               std::string& attrib_events) {
  const int in = ::inotify_init1(IN_NONBLOCK);
  ::inotify_add_watch(in, dir.c_str(), IN_ATTRIB);
  const std::string sock = dir + "/s.sock";
  flags.insert(flags.begin(), {"--unix-socket", sock});
  DaemonProcess d(daemon_fixture::kBin, [&] {
    std::vector<std::string> a{"--listen", "127.0.0.1:0", "--db", db, "--cluster", dir + "/../two.json"};
    a.insert(a.end(), flags.begin(), flags.end());
    return a;
  }());
  struct stat st {};
  const bool made = d.port() > 0 && ::lstat(sock.c_str(), &st) == 0;
  alignas(inotify_event) char buf[4096];
  for (ssize_t n; (n = ::read(in, buf, sizeof buf)) > 0;)
    for (char* p = buf; p < buf + n;) {
      auto* e = reinterpret_cast<inotify_event*>(p);
      if (e->len > 0) attrib_events += std::string(e->name) + " ";
      p += sizeof(inotify_event) + e->len;
    }
  ::close(in);
  return made ? st.st_mode : 0;
}

TEST_F(ApiAttackTest, UnixSocketHasItsModeFromItsCreation) {
  const std::string dir = dir_.file("sock");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  for (const auto& [flags, want] : {std::pair{std::vector<std::string>{}, mode_t{0666}},
                                    std::pair{std::vector<std::string>{"--unix-socket-mode", "0600"}, mode_t{0600}}}) {
    std::string attrib;
    const mode_t mode = socket_mode_at_creation(db(), dir, flags, attrib);
    ASSERT_TRUE(S_ISSOCK(mode)) << "no socket";
    EXPECT_EQ(mode & 07777, want);
    EXPECT_FALSE(has(attrib, "s.sock")) << "the socket's mode was changed by path after it appeared";
  }
}

TEST_F(ApiAttackTest, RailyardUpAsAnOrdinaryUserMakesItsSocketPrivate) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run `railyard up` as nobody (setpriv)";
  if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "no setpriv to run as nobody";
  const std::string base = dir_.file("up");
  ASSERT_EQ(::mkdir(base.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(dir_.file("").c_str(), 0755), 0);
  ASSERT_EQ(::chown(base.c_str(), 65534, 65534), 0);
  const std::string bins = std::string(RAILYARD_SCHEDULER_BIN).substr(0, std::string(RAILYARD_SCHEDULER_BIN).rfind('/'));
  const std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups env -u RAILYARD_URL -u "
                                "RAILYARD_TOKEN HOME=" + base + " RAILYARD_BIN_DIR=" + bins + " " + RAILYARD_BIN;
  const std::string state = base + "/state";
  auto up = run_command(as_nobody + " up --no-agents --no-config --port 0 --nodes 2 --timeout 60 --state-dir " +
                            state, dir_.file("up.log"));
  struct stat st {};
  const bool made = ::lstat((state + "/railyard.sock").c_str(), &st) == 0;
  run_command(as_nobody + " down --state-dir " + state, dir_.file("down.log"));
  ASSERT_EQ(up.status, 0) << up.output;
  ASSERT_TRUE(made) << up.output;
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "another local user could connect as themselves to a cluster whose "
                                          "jobs all run as nobody";
}

}  // namespace
}  // namespace railyard::testing
