// Who you are, the way the OS says (issue 32), against the real scheduler and the real `railyard`: on the
// scheduler's Unix socket a request without a token is made by the Unix user the kernel names (SO_PEERCRED),
// an admin when root or the scheduler's own user, else a user; no spec can submit as someone else there; TCP
// still needs a token; the audit log names the user and the socket. Running a client as another uid needs
// root (the test switches a forked child to `nobody`).
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>

#include <fstream>

#include "tests/cli_test_util.hpp"
#include "tests/fault_util.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;

const std::string kBin = RAILYARD_SCHEDULER_BIN;

std::string user_name(uid_t uid) {
  const passwd* pw = ::getpwuid(uid);
  return pw ? pw->pw_name : "";
}

class UnixSocketAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Other users must reach the socket inside the temp dir (mkdtemp makes it 0700).
    ::chmod(dir_.file("").c_str(), 0755);
    std::ofstream(dir_.file("two.json")) << kOneLeafCluster;
    alice_ = create_token(kBin, db(), "alice", "user");
  }
  std::string db() const { return dir_.file("state.db"); }
  std::string sock() const { return dir_.file("s.sock"); }
  std::unique_ptr<DaemonProcess> start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--listen",  "127.0.0.1:0",         "--db",       db(),
                                  "--cluster", dir_.file("two.json"), "--web-root", "none"};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<DaemonProcess>(kBin, args);
  }
  std::unique_ptr<DaemonProcess> start_with_socket() {
    auto d = start({"--unix-socket", sock()});
    EXPECT_GT(d->port(), 0);
    return d;
  }
  TempDir dir_;
  std::string alice_;
};

// Audit rows of `actor` over the socket (as an admin: the test's own user).
std::vector<json> audit_rows(const std::string& sock, const std::string& actor) {
  HttpClient c(sock);
  auto r = c.request("GET", "/api/v1/audit?user=" + actor);
  std::vector<json> out;
  if (r.status != 200) return out;
  const json body = r.json();
  for (const auto& row : body["rows"]) out.push_back(row);
  return out;
}

TEST_F(UnixSocketAuthTest, TheKernelNamesTheCallerAndTheirJobsAreTheirs) {
  auto d = start_with_socket();
  struct stat st {};
  ASSERT_EQ(::stat(sock().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  const std::string me = user_name(::geteuid());
  ASSERT_FALSE(me.empty());
  HttpClient u(sock());
  auto who = u.request("GET", "/api/v1/whoami");
  ASSERT_EQ(who.status, 200) << who.body;
  EXPECT_EQ(who.json()["user"], me);
  EXPECT_EQ(who.json()["role"], "admin") << "the scheduler's own user is an admin";
  EXPECT_EQ(who.json()["auth"], "unix");
  EXPECT_EQ(who.json()["uid"], ::geteuid());
  // A spec that claims another user is submitted as the caller all the same.
  auto sub = u.request("POST", "/api/v1/jobs", R"({"gpus": 1, "user": "mallory"})");
  ASSERT_EQ(sub.status, 201) << sub.body;
  const int64_t id = sub.json()["id"];
  auto job = u.request("GET", "/api/v1/jobs/" + std::to_string(id));
  EXPECT_EQ(job.json()["user"], me) << job.body;
  // A token on the socket is the token's caller, as on TCP.
  auto as_alice = u.request("GET", "/api/v1/whoami", "", alice_);
  EXPECT_EQ(as_alice.json()["user"], "alice");
  EXPECT_EQ(as_alice.json()["auth"], "token");
  EXPECT_EQ(u.request("GET", "/api/v1/whoami", "", "ry_not_a_token").status, 401);
  // TCP is unchanged: no token, no caller.
  HttpClient t(d->port());
  EXPECT_EQ(t.request("GET", "/api/v1/whoami").status, 401);
  EXPECT_EQ(t.request("POST", "/api/v1/jobs", R"({"gpus": 1})").status, 401);
  // The submit's audit row names the user and the socket.
  std::vector<json> rows;
  ASSERT_TRUE(until([&] {
    rows = audit_rows(sock(), me);
    return !rows.empty();
  }));
  EXPECT_EQ(rows.front()["source"], "unix:uid=" + std::to_string(::geteuid()));
  EXPECT_EQ(rows.front()["target"], "/api/v1/jobs");
  EXPECT_EQ(rows.front()["status"], 201);
}

// What the forked child saw, as one JSON line on a pipe.
json as_user(const passwd& pw, const std::string& sock, const std::function<json(HttpClient&)>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return nullptr;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(pw.pw_gid) != 0 || ::setuid(pw.pw_uid) != 0) std::_Exit(3);
    HttpClient c(sock);
    const std::string out = body(c).dump();
    if (::write(fds[1], out.data(), out.size()) != static_cast<ssize_t>(out.size())) std::_Exit(4);
    std::_Exit(0);
  }
  ::close(fds[1]);
  const std::string text = slurp(fds[0]);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return nullptr;
  return json::parse(text, nullptr, false);
}

TEST_F(UnixSocketAuthTest, AnotherUnixUserIsAUserAndCannotActForOthers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run a client as another uid (nobody)";
  const passwd* found = ::getpwnam("nobody");
  if (!found) GTEST_SKIP() << "this host has no user nobody";
  const passwd nobody = *found;
  auto d = start_with_socket();
  HttpClient root(sock());
  auto mine = root.request("POST", "/api/v1/jobs", R"({"gpus": 1})");
  ASSERT_EQ(mine.status, 201) << mine.body;
  const std::string root_job = std::to_string(mine.json()["id"].get<int64_t>());
  const json seen = as_user(nobody, sock(), [&](HttpClient& c) {
    auto who = c.request("GET", "/api/v1/whoami");
    auto sub = c.request("POST", "/api/v1/jobs", R"({"gpus": 1, "user": "root"})");
    json out = {{"whoami", who.json()},
                {"submit", sub.status},
                {"drain", c.request("POST", "/api/v1/nodes/n2/drain", R"({"reason": "x"})").status},
                {"cancel", c.request("POST", "/api/v1/jobs/" + root_job + "/cancel").status},
                {"audit", c.request("GET", "/api/v1/audit").status}};
    if (sub.status == 201) out["job"] = c.request("GET", "/api/v1/jobs/" + sub.json()["id"].dump()).json();
    return out;
  });
  ASSERT_TRUE(seen.is_object()) << "the child as nobody failed";
  EXPECT_EQ(seen["whoami"]["user"], nobody.pw_name);
  EXPECT_EQ(seen["whoami"]["role"], "user");
  EXPECT_EQ(seen["submit"], 201);
  EXPECT_EQ(seen["job"]["user"], nobody.pw_name) << seen.dump();
  EXPECT_EQ(seen["drain"], 403);
  EXPECT_EQ(seen["cancel"], 403);
  EXPECT_EQ(seen["audit"], 403);
  // Not cancelled, and nobody's refused drain is on record with its uid.
  EXPECT_NE(root.request("GET", "/api/v1/jobs/" + root_job).json()["state"], "CANCELLED");
  std::vector<json> rows;
  ASSERT_TRUE(until([&] {
    rows = audit_rows(sock(), nobody.pw_name);
    return rows.size() >= 3;
  }));
  for (const auto& r : rows) EXPECT_EQ(r["source"], "unix:uid=" + std::to_string(nobody.pw_uid));
  int drains = 0;
  for (const auto& r : rows)
    if (r["target"] == "/api/v1/nodes/n2/drain") drains += r["status"] == 403 ? 1 : 100;
  EXPECT_EQ(drains, 1) << json(rows).dump();
}

TEST_F(UnixSocketAuthTest, MembersOfTheAdminGroupAreAdmins) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run a client as another uid (nobody)";
  const passwd* found = ::getpwnam("nobody");
  const group* gr = found ? ::getgrgid(found->pw_gid) : nullptr;
  if (!found || !gr) GTEST_SKIP() << "this host has no user nobody with a named group";
  const passwd nobody = *found;
  const std::string group_name = gr->gr_name;
  DaemonProcess bad(kBin, {"--listen", "127.0.0.1:0", "--db", db(), "--cluster", dir_.file("two.json"),
                           "--unix-socket", sock(), "--admin-group", "no-such-group-here"});
  EXPECT_EQ(bad.port(), 0) << "an unknown --admin-group must stop the start";
  auto d = start({"--unix-socket", sock(), "--admin-group", group_name});
  ASSERT_GT(d->port(), 0);
  const json seen = as_user(nobody, sock(), [](HttpClient& c) {
    return json{{"whoami", c.request("GET", "/api/v1/whoami").json()},
                {"drain", c.request("POST", "/api/v1/nodes/n2/drain", R"({"reason": "x"})").status}};
  });
  ASSERT_TRUE(seen.is_object()) << "the child as nobody failed";
  EXPECT_EQ(seen["whoami"]["role"], "admin") << seen.dump();
  EXPECT_EQ(seen["drain"], 200);
}

TEST_F(UnixSocketAuthTest, AStaleSocketIsReplacedALiveOneKeptAndTheFileRemovedOnExit) {
  {  // A socket file nobody accepts on, as a killed scheduler leaves it.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    sock().copy(a.sun_path, sizeof a.sun_path - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::close(fd);
  }
  // From the config file, as the other listen options.
  std::ofstream(dir_.file("c.toml")) << "unix_socket = \"" << sock() << "\"\n";
  auto d = start({"--config", dir_.file("c.toml")});
  ASSERT_GT(d->port(), 0);
  HttpClient u(sock());
  EXPECT_EQ(u.request("GET", "/api/v1/whoami").status, 200);
  DaemonProcess second(kBin, {"--listen", "127.0.0.1:0", "--db", dir_.file("other.db"), "--cluster",
                              dir_.file("two.json"), "--web-root", "none", "--unix-socket", sock()});
  EXPECT_EQ(second.port(), 0) << "a second scheduler took over a live socket";
  EXPECT_EQ(u.request("GET", "/api/v1/whoami").status, 200);
  EXPECT_EQ(WEXITSTATUS(d->stop(SIGTERM)), 0);
  EXPECT_FALSE(std::filesystem::exists(sock())) << "the socket outlived a clean exit";
}

TEST(CliUnixSocket, SubmitQueueAndCancelWithoutAToken) {
  TempDir dir;
  ::chmod(dir.file("").c_str(), 0755);
  const std::string sock = dir.file("railyard.sock");
  DaemonProcess d(RAILYARD_SCHEDULER_BIN,
                  {"--listen", "127.0.0.1:0", "--db", dir.file("state.db"), "--preset", "dgx-h100-superpod",
                   "--sus", "1", "--unix-socket", sock});
  ASSERT_GT(d.port(), 0);
  const std::map<std::string, std::string> env{{"HOME", dir.file("home")}};
  const std::string me = user_name(::geteuid());
  auto sub =
      run_cli(RAILYARD_BIN,
              {"submit", "--url", "unix:" + sock, "--gpus", "1", "--name", "viasock", "--", "true"}, env);
  ASSERT_EQ(sub.code, 0) << sub.err;
  const std::string id = trimmed(sub.out);
  auto queue = run_cli(RAILYARD_BIN, {"queue", "--json"},
                       {{"HOME", dir.file("home")}, {"RAILYARD_URL", "unix:" + sock}});
  ASSERT_EQ(queue.code, 0) << queue.err;
  bool found = false;
  const json listed = queue.json();
  for (const auto& j : listed["jobs"])
    if (std::to_string(j["id"].get<int64_t>()) == id) found = j["user"] == me && j["name"] == "viasock";
  EXPECT_TRUE(found) << queue.out;
  EXPECT_EQ(run_cli(RAILYARD_BIN, {"cancel", "--url", "unix:" + sock, id}, env).code, 0);
  // Over TCP the same commands still need a token.
  auto tcp = run_cli(
      RAILYARD_BIN,
      {"submit", "--url", "http://127.0.0.1:" + std::to_string(d.port()), "--gpus", "1", "--", "true"}, env);
  EXPECT_EQ(tcp.code, 3) << tcp.err;
  auto missing = run_cli(RAILYARD_BIN, {"queue", "--url", "unix:" + dir.file("none.sock")}, env);
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("cannot reach the scheduler at unix:"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace railyard::testing
