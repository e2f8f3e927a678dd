// Attacks on the agent's trust in its scheduler and its credentials (issue 44):
// - an impostor scheduler (whoever answers at the --scheduler URL: a local user who bound the port while the
//   scheduler restarted, a spoofed address) greets a root agent holding a real node key and orders a launch
//   and an exec without the key: nothing starts, and the agent logs the refusal;
// - a key or secret file that others can read stops the agent (and the scheduler) at start, as ssh does;
// - an agent that cannot switch users (not root) refuses another local user's job instead of running it as
//   itself.
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <mutex>
#include <thread>

#include "common/protocol/key_file.hpp"
#include "common/protocol/mac.hpp"
#include "common/protocol/messages.hpp"
#include "tests/attack/attack_cluster.hpp"

namespace railyard::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using asio::use_awaitable;
using nlohmann::json;
using tcp = asio::ip::tcp;

// A WebSocket server on 127.0.0.1 that plays the scheduler without any key: hello, then `registered` and the
// given orders, each plain and "sealed" with a made-up key. It records every frame the agent sends.
class Impostor {
 public:
  explicit Impostor(std::vector<json> orders) : orders_(std::move(orders)) {
    acceptor_.open(tcp::v4());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    asio::co_spawn(io_, serve(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Impostor() {
    io_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()); }
  std::vector<json> frames() const {
    std::lock_guard lock(mu_);
    return frames_;
  }
  size_t answers() const {  // frames after the register
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const auto& f : frames_) n += f.value("type", "") != "register" && f.value("type", "") != "heartbeat";
    return n;
  }

 private:
  asio::awaitable<void> serve() {
    auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(use_awaitable));
    if (ec) co_return;
    websocket::stream<tcp::socket> ws(std::move(socket));
    co_await ws.async_accept(use_awaitable);
    ws.text(true);
    const std::string challenge = protocol::random_hex(protocol::kChallengeBytes);
    co_await write(ws, hello(challenge));
    beast::flat_buffer buf;
    co_await ws.async_read(buf, use_awaitable);
    const std::string reg = beast::buffers_to_string(buf.data());
    buf.consume(buf.size());
    // (No braced JSON literals in this coroutine: GCC 12 miscompiles initializer lists in coroutines.)
    for (const auto& text : attack(reg, challenge)) co_await write(ws, text);
    for (;;) {
      auto [rec, n] = co_await ws.async_read(buf, asio::as_tuple(use_awaitable));
      if (rec) co_return;
      record(json::parse(beast::buffers_to_string(buf.data()), nullptr, false));
      buf.consume(buf.size());
    }
  }
  static std::string hello(const std::string& challenge) {
    return json{{"type", "hello"}, {"v", 1}, {"challenge", challenge}, {"server", "impostor"}}.dump();
  }
  // What the impostor sends after the register: `registered` and each order, plain and then "sealed" with a
  // key made of everything it knows (the challenges, the agent id, the register's MACs), for it has no node key.
  std::vector<std::string> attack(const std::string& register_text, const std::string& challenge) {
    const json reg = json::parse(register_text, nullptr, false);
    record(reg);
    protocol::OrderSealer forged(protocol::session_key(reg["nodes"][0].value("mac", ""), challenge,
                                                       reg.value("agent_challenge", ""), reg.value("agent", "")));
    std::vector<json> messages{{{"type", "registered"}, {"v", 1}, {"heartbeat_s", 1}, {"nodes", {"n1"}}}};
    messages.insert(messages.end(), orders_.begin(), orders_.end());
    std::vector<std::string> out;
    for (const auto& m : messages) {
      out.push_back(m.dump());
      out.push_back(forged.seal(m.dump()));
    }
    return out;
  }
  static asio::awaitable<void> write(websocket::stream<tcp::socket>& ws, const std::string& text) {
    co_await ws.async_write(asio::buffer(text), use_awaitable);
  }
  void record(json m) {
    std::lock_guard lock(mu_);
    frames_.push_back(std::move(m));
  }

  std::vector<json> orders_;
  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<json> frames_;
};

json job_spec(const std::string& user, const std::string& script) {
  return {{"name", "impostor"}, {"gpus", 1}, {"launcher", "none"}, {"user", user},
          {"command", {"/bin/sh", "-c", script}}};
}

json launch_order(const std::string& alloc, const json& spec) {
  return {{"type", "launch"}, {"v", 1}, {"alloc", alloc}, {"job", protocol::job_of_alloc(alloc)},
          {"node", "n1"}, {"node_rank", 0}, {"nodes", {{{"name", "n1"}, {"gpus", {0}}}}},
          {"spec", spec}, {"master_addr", "127.0.0.1"}, {"master_port", 29500}, {"time_limit_s", 60}};
}

// A private file of `owner` holding `text`.
void write_private(const std::string& path, const std::string& text, uid_t owner = 0, gid_t group = 0) {
  std::ofstream(path) << text;
  ::chown(path.c_str(), owner, group);
  ::chmod(path.c_str(), 0600);
}

TEST(FakeSchedulerAttack, ImpostorSchedulerGetsNoProcessStarted) {
  if (auto why = AttackCluster::skip_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  ::chmod(dir.file("").c_str(), 0755);  // nobody may reach the drop box below
  const std::string drop = dir.file("drop");
  std::filesystem::create_directory(drop);
  ::chmod(drop.c_str(), 0777);
  const std::string marker = drop + "/impostor-ran";
  const std::string script = "touch " + marker + "-$RAILYARD_ALLOC_ID; sleep 30 # " + marker;
  Impostor impostor({launch_order("1.1", job_spec("nobody", script)), launch_order("2.1", job_spec("root", script)),
                     {{"type", "exec"}, {"v", 1}, {"req", "x1"}, {"alloc", "1.1"}, {"node", "n1"},
                      {"argv", {"touch", marker + "-exec", ";", "sleep", "30", "#", marker}}}});
  write_private(dir.file("node.key"), protocol::key_file_line("n1", protocol::new_node_key()));
  const std::string log = dir.file("agent.log");
  {
    ChildProcess agent(RAILYARD_AGENT_BIN,
                       {"--scheduler", impostor.url(), "--key-file", dir.file("node.key"), "--node", "n1",
                        "--emulate", "dgx-h100", "--state-dir", dir.file("agent"), "--grace", "1",
                        "--min-free-mb", "0", "--reconnect-max", "1"},
                       log);
    // Two registered and six orders, each answered (error unauthorized / not_registered, or, were an order
    // obeyed, launched / launch_failed / exec_*).
    EXPECT_TRUE(until([&] { return impostor.answers() >= 8; }, std::chrono::seconds(30)))
        << read_small(log);
    std::this_thread::sleep_for(std::chrono::seconds(1));  // what an obeyed order would have run by now
    EXPECT_TRUE(processes_with("/bin/sh", marker).empty()) << "the agent ran the impostor's command";
    EXPECT_TRUE(processes_with("sleep", marker).empty());
    for (const char* suffix : {"-1.1", "-2.1", "-exec"})
      EXPECT_FALSE(std::filesystem::exists(marker + suffix)) << "the agent ran the impostor's order " << suffix;
    for (const auto& f : impostor.frames()) {
      EXPECT_NE(f.value("type", ""), "launched") << f;
      EXPECT_NE(f.value("type", ""), "exec_started") << f;
    }
  }
  const std::string text = read_small(log);
  EXPECT_NE(text.find("refused 'registered' from the scheduler: not sealed with this connection's key"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("registered 1 node"), std::string::npos);
  for (pid_t pid : processes_with("sleep", marker)) ::kill(pid, SIGKILL);
}

// Like ssh with a private key: a credential file that group or others can read (or write) is refused at
// start, with a message naming the file and the fix; the agent never connects.
TEST(FakeSchedulerAttack, KeyFilesOthersCanReadAreRefusedAtStart) {
  TempDir dir;
  const std::string key = dir.file("node.key"), secret = dir.file("secret");
  std::ofstream(key) << protocol::key_file_line("n1", protocol::new_node_key());
  std::ofstream(secret) << "a-cluster-secret-0123456789\n";
  for (const auto& [flag, file, mode] : std::vector<std::tuple<std::string, std::string, mode_t>>{
           {"--key-file", key, 0640}, {"--key-file", key, 0604}, {"--secret-file", secret, 0644}}) {
    ::chmod(file.c_str(), mode);
    const std::string out = run_capture("timeout 20 " + std::string(RAILYARD_AGENT_BIN) +
                                        " --scheduler http://127.0.0.1:1 " + flag + " " + file +
                                        " --node n1 --emulate dgx-h100 --state-dir " + dir.file("agent") +
                                        " 2>&1; echo exit=$?");
    EXPECT_NE(out.find("refusing the credential file " + file), std::string::npos) << out;
    EXPECT_NE(out.find("chmod 600 " + file), std::string::npos) << out;
    EXPECT_NE(out.find("exit=2"), std::string::npos) << out;
  }
  ::chmod(secret.c_str(), 0644);
  std::ofstream(dir.file("c.json")) << kAttackCluster;
  const std::string out = run_capture("timeout 20 " + std::string(RAILYARD_SCHEDULER_BIN) +
                                      " --listen 127.0.0.1:0 --db " + dir.file("s.db") + " --cluster " +
                                      dir.file("c.json") + " --agent-secret-file " + secret + " 2>&1; echo exit=$?");
  EXPECT_NE(out.find("chmod 600 " + secret), std::string::npos) << out;
  EXPECT_EQ(out.find("exit=124"), std::string::npos) << "the scheduler started with a readable secret: " << out;
}

// An agent run as `nobody` (as `railyard up` by a non-root user runs them) cannot switch users: another
// user's job is refused at the node with a clear message and runs nowhere (one submitted before the agent
// came, so the scheduler could not tell); once the agent said so at registration, the scheduler refuses
// such a job at submit; nobody's own job runs.
TEST(FakeSchedulerAttack, AgentThatCannotSwitchUsersRefusesAnotherUsersJob) {
  if (auto why = AttackCluster::skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const struct passwd* nobody = ::getpwnam("nobody");
  const uid_t uid = nobody->pw_uid;
  const gid_t gid = nobody->pw_gid;
  AttackCluster cluster(AttackOptions{.start_agent = false});
  const std::string state = cluster.file("nobody-agent"), keys = cluster.file("nobody.keys");
  std::filesystem::create_directory(state);
  ::chown(state.c_str(), uid, gid);
  write_private(keys, read_small(cluster.key_file()), uid, gid);
  const std::string drop = cluster.file("drop");
  std::filesystem::create_directory(drop);
  ::chmod(drop.c_str(), 0777);
  const std::string other = ::getpwnam("daemon") != nullptr ? "daemon" : "root";
  const json their_job = {{"name", "other"}, {"gpus", 1}, {"launcher", "none"}, {"user", other},
                          {"command", {"/bin/sh", "-c", "touch " + drop + "/other-ran"}}};
  const int64_t theirs = cluster.submit(their_job);  // no agent yet: nothing says it cannot run
  ChildProcess agent("/usr/bin/setpriv",
                     {"--reuid=" + std::to_string(uid), "--regid=" + std::to_string(gid), "--clear-groups",
                      RAILYARD_AGENT_BIN, "--scheduler", cluster.url(), "--key-file", keys, "--nodes", "n[1-2]",
                      "--emulate", "dgx-h100", "--state-dir", state, "--grace", "1", "--min-free-mb", "0",
                      "--reconnect-max", "1", "--no-cgroups"},
                     cluster.file("nobody-agent.log"));
  ASSERT_TRUE(until([&] { return connected_nodes(cluster.http()) == 2; }))
      << read_small(cluster.file("nobody-agent.log"));

  EXPECT_EQ(cluster.wait_done(theirs), "FAILED") << cluster.job(theirs);
  const std::string reason = cluster.job(theirs).value("reason", "");
  EXPECT_NE(reason.find("cannot switch users"), std::string::npos) << cluster.job(theirs);
  EXPECT_NE(reason.find("'" + other + "'"), std::string::npos) << reason;
  EXPECT_FALSE(std::filesystem::exists(drop + "/other-ran")) << "another user's job ran as nobody";
  const auto refused = cluster.http().request("POST", "/api/v1/jobs", their_job.dump(), cluster.admin_token());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("cannot switch users"), std::string::npos) << refused.body;

  const int64_t own = cluster.submit({{"name", "own"}, {"gpus", 1}, {"launcher", "none"}, {"user", "nobody"},
                                      {"command", {"/bin/sh", "-c", "touch " + drop + "/own-ran"}}});
  EXPECT_EQ(cluster.wait_done(own), "COMPLETED") << cluster.job(own);
  struct stat st {};
  ASSERT_EQ(::stat((drop + "/own-ran").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, uid);
}

}  // namespace
}  // namespace railyard::testing
