// TLS end to end (issues 5 and 10): a CA and a server certificate made with the openssl command, the real
// railyard-scheduler serving HTTPS/WSS only, two real railyard-agent processes connecting over wss://, and
// the real `railyard` CLI over https://. A 2-node MPI job runs (its remote orted goes railyard-agent-exec ->
// https -> scheduler -> the other agent), so every link of the system is TLS. Also: an unknown CA is refused
// with "certificate verify failed", a plain http:// client is told to use https://, and bad --tls-* files
// stop the daemon with an error naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "tests/cli_test_util.hpp"
#include "tests/fault_util.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kTwoNodes = R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n1"}, {"name": "leaf2", "level": "leaf", "nodes": "n2"},
               {"name": "spine", "level": "spine", "children": ["leaf1", "leaf2"]}]})";

// A CA, and a server certificate it signs for 127.0.0.1 and localhost; `other` is an unrelated CA.
void make_certificates(const TempDir& d) {
  const std::string q = " 2>/dev/null";
  ASSERT_EQ(shell("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=railyard-test-ca -keyout " +
               d.file("ca.key") + " -out " + d.file("ca.pem") + q),
            0);
  ASSERT_EQ(shell("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=other-ca -keyout " +
               d.file("other.key") + " -out " + d.file("other.pem") + q),
            0);
  std::ofstream(d.file("san.ext")) << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  ASSERT_EQ(shell("openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout " + d.file("server.key") +
               " -out " + d.file("server.csr") + q),
            0);
  ASSERT_EQ(shell("openssl x509 -req -days 2 -in " + d.file("server.csr") + " -CA " + d.file("ca.pem") +
               " -CAkey " + d.file("ca.key") + " -CAcreateserial -extfile " + d.file("san.ext") + " -out " +
               d.file("server.pem") + q),
            0);
}

class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    make_certificates(dir_);
    if (HasFatalFailure()) return;
    std::ofstream(dir_.file("two.json")) << kTwoNodes;
    std::ofstream(dir_.file("secret")) << "tls-cluster-secret-0123456789\n";
    ::chmod(dir_.file("secret").c_str(), 0600);  // a credential file others can read is refused
    token_ = create_token(RAILYARD_SCHEDULER_BIN, dir_.file("state.db"), "alice", "admin");
    sched_ = std::make_unique<DaemonProcess>(
        RAILYARD_SCHEDULER_BIN,
        std::vector<std::string>{"--listen", "127.0.0.1:0", "--db", dir_.file("state.db"), "--cluster",
                                 dir_.file("two.json"), "--agent-secret-file", dir_.file("secret"),
                                 "--tls-cert", dir_.file("server.pem"), "--tls-key", dir_.file("server.key"),
                                 "--web-root", "none"});
    ASSERT_GT(sched_->port(), 0);
    url_ = "https://127.0.0.1:" + std::to_string(sched_->port());
    env_ = {{"RAILYARD_URL", url_}, {"RAILYARD_TOKEN", token_}, {"RAILYARD_CA_FILE", dir_.file("ca.pem")},
            {"HOME", dir_.file("")}};
  }

  CliResult cli(const std::vector<std::string>& args) { return run_cli(RAILYARD_BIN, args, env_); }

  std::unique_ptr<ChildProcess> agent(const std::string& node, const std::string& ca_file) {
    auto options = AgentOptions{RAILYARD_AGENT_BIN, url_, dir_.file("secret"), node, dir_.file("agent-" + node),
                                dir_.file("agent-" + node + ".log"), {}};
    return start_agent_with(options, ca_file.empty() ? std::vector<std::string>{}
                                                    : std::vector<std::string>{"--ca-file", ca_file});
  }

  std::string agent_log(const std::string& node) { return read_small(dir_.file("agent-" + node + ".log")); }

  bool wait_for_log(const std::string& node, const std::string& text, std::chrono::seconds limit) {
    return until([&] { return agent_log(node).find(text) != std::string::npos; }, limit);
  }

  TempDir dir_;
  std::string token_, url_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<DaemonProcess> sched_;
};

TEST_F(Tls, CliAgentsAndAnMpiJobWorkOverTls) {
  // The CLI over https with the test CA.
  const CliResult queue = cli({"queue", "--json"});
  ASSERT_EQ(queue.code, 0) << queue.err;
  EXPECT_TRUE(queue.json().contains("jobs"));

  // Agents over wss://, verified against the CA; both nodes register.
  auto n1 = agent("n1", dir_.file("ca.pem"));
  auto n2 = agent("n2", dir_.file("ca.pem"));
  ASSERT_TRUE(wait_for_log("n1", "registered;", 30s)) << agent_log("n1");
  ASSERT_TRUE(wait_for_log("n2", "registered;", 30s)) << agent_log("n2");

  // A 2-node x 2-rank MPI allreduce: n2's orted is started through railyard-agent-exec over https.
  // The job's 1-minute limit turns a launch that never completes into a failure instead of a hung test.
  const CliResult sub = cli({"submit", "--name", "tls-mpi", "--nodes", "2", "--gpus-per-node", "2", "--launcher",
                             "mpi", "--time", "1m", "--wait", "--", RAILYARD_MPI_ALLREDUCE});
  ASSERT_EQ(sub.code, 0) << sub.out << sub.err << agent_log("n1") << agent_log("n2") << job_logs_under(dir_.file(""));
  const std::string id = sub.out.substr(0, sub.out.find('\n'));
  const CliResult show = cli({"show", id, "--json"});
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(show.json()["job"]["state"], "COMPLETED") << show.out;
  EXPECT_EQ(show.json()["job"]["nodes"], json::array({"n1", "n2"}));
  const CliResult logs = cli({"logs", id});
  ASSERT_EQ(logs.code, 0) << logs.err;
  EXPECT_NE(logs.out.find("rank 0 of 4 on n1 sum"), std::string::npos) << logs.out;
}

TEST_F(Tls, UntrustedCertificatesAndPlainHttpAreRefusedClearly) {
  // A CA that did not sign the server's certificate: the CLI fails (1, unreachable) and says why.
  env_["RAILYARD_CA_FILE"] = dir_.file("other.pem");
  const CliResult wrong_ca = cli({"queue"});
  EXPECT_EQ(wrong_ca.code, 1);
  EXPECT_NE(wrong_ca.err.find("certificate verify failed"), std::string::npos) << wrong_ca.err;
  // --ca-file wins over the environment.
  EXPECT_EQ(cli({"queue", "--ca-file", dir_.file("ca.pem")}).code, 0);
  // A CA file that does not exist is a usage error naming it.
  const CliResult missing = cli({"queue", "--ca-file", dir_.file("nope.pem")});
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_NE(missing.err.find("nope.pem"), std::string::npos) << missing.err;

  // Plain HTTP to the TLS port: a 400 that says to use https://.
  HttpClient plain(sched_->port());
  const HttpResult r = plain.request("GET", "/api/v1/health");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["code"], "tls_required") << r.body;

  // An agent that does not trust the server's CA never registers and logs the reason.
  auto untrusting = agent("n1", dir_.file("other.pem"));
  EXPECT_TRUE(wait_for_log("n1", "certificate verify failed", 20s)) << agent_log("n1");
  EXPECT_EQ(agent_log("n1").find("registered;"), std::string::npos) << agent_log("n1");
}

TEST(TlsConfig, BadCertificateOrKeyFilesStopTheDaemonNamingTheFile) {
  TempDir d;
  make_certificates(d);
  std::ofstream(d.file("garbage.pem")) << "not a certificate\n";
  auto start = [&](const std::vector<std::string>& tls) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--db", d.file("s.db"), "--preset",
                                     "dgx-h100-superpod", "--sus", "1", "--web-root", "none"};
    args.insert(args.end(), tls.begin(), tls.end());
    return run_cli(RAILYARD_SCHEDULER_BIN, args, {});
  };
  const CliResult garbage = start({"--tls-cert", d.file("garbage.pem"), "--tls-key", d.file("server.key")});
  EXPECT_EQ(garbage.code, 2);
  EXPECT_NE(garbage.err.find("garbage.pem"), std::string::npos) << garbage.err;
  const CliResult mismatch = start({"--tls-cert", d.file("server.pem"), "--tls-key", d.file("other.key")});
  EXPECT_EQ(mismatch.code, 2);
  EXPECT_NE(mismatch.err.find("does not match"), std::string::npos) << mismatch.err;
  const CliResult alone = start({"--tls-cert", d.file("server.pem")});
  EXPECT_EQ(alone.code, 2);
  EXPECT_NE(alone.err.find("go together"), std::string::npos) << alone.err;

  // The client certificate for etcd (--client-cert-auth) is checked at start, before any campaign.
  auto ha = [&](std::vector<std::string> tls) {
    std::vector<std::string> args = {"--listen",   "127.0.0.1:28999",
                                     "--db",       d.file("s.db"),
                                     "--preset",   "dgx-h100-superpod",
                                     "--sus",      "1",
                                     "--web-root", "none",
                                     "--ha-etcd",  "http://127.0.0.1:1"};
    args.insert(args.end(), tls.begin(), tls.end());
    return run_cli(RAILYARD_SCHEDULER_BIN, args, {});
  };
  const CliResult key_only = ha({"--ha-etcd-key", d.file("server.key")});
  EXPECT_EQ(key_only.code, 2);
  EXPECT_NE(key_only.err.find("--ha-etcd-cert and --ha-etcd-key go together"), std::string::npos)
      << key_only.err;
  const CliResult wrong_key =
      ha({"--ha-etcd-cert", d.file("server.pem"), "--ha-etcd-key", d.file("other.key")});
  EXPECT_EQ(wrong_key.code, 2);
  EXPECT_NE(wrong_key.err.find("not the PEM private key"), std::string::npos) << wrong_key.err;
  const CliResult bad_cert =
      ha({"--ha-etcd-cert", d.file("garbage.pem"), "--ha-etcd-key", d.file("server.key")});
  EXPECT_EQ(bad_cert.code, 2);
  EXPECT_NE(bad_cert.err.find("garbage.pem"), std::string::npos) << bad_cert.err;
}

}  // namespace
}  // namespace railyard::testing
