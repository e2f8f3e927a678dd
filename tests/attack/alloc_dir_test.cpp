// Attacks through the allocation directory (issue 44): a job running as `nobody` on a root agent plants links
// and FIFOs where the agent writes or reads its logs. Each must fail: the root-owned target unchanged and still
// root's, the secret in no answer, the agent's loop never blocked (its nodes stay up, later jobs run).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/attack/attack_cluster.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;

constexpr const char* kSecret = "root-only-secret-5f3a9c\n";

class AllocDirAttack : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = AttackCluster::skip_reason(); !why.empty()) GTEST_SKIP() << why;
    cluster_ = std::make_unique<AttackCluster>();
    target_ = make_root_secret(cluster_->file("target"), kSecret);
  }
  // The target is as it was: same text, root's, 0600.
  void expect_target_untouched() {
    struct stat st {};
    ASSERT_EQ(::stat(target_.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u) << "the agent gave the target away";
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_EQ(read_small(target_), kSecret) << "the agent wrote through the link";
  }
  json logs_as_nobody(int64_t id, const std::string& stream) {
    const auto r = cluster_->http().request(
        "GET", "/api/v1/jobs/" + std::to_string(id) + "/logs?rank=0&stream=" + stream, "", cluster_->nobody_token());
    return json{{"status", r.status}, {"body", r.body}};
  }

  std::unique_ptr<AttackCluster> cluster_;
  std::string target_;
};

// The job makes its next exec log a link to a root-only file and asks, with its own exec token, for a remote
// launch on its node: the agent used to open the name with O_CREAT|O_TRUNC as root, follow the link,
// truncate the target, chown it to the user and write the command's output into it.
TEST_F(AllocDirAttack, ExecLogLinkedToARootFileIsReplacedNotFollowed) {
  const int64_t id = cluster_->submit_script(
      "ln -s " + target_ + " exec-n1-0.out && ln -s " + target_ + " exec-n1-0.err && " +
      RAILYARD_AGENT_EXEC_BIN + " n1 echo remote-launch-ran && sleep 2");
  EXPECT_EQ(cluster_->wait_done(id), "COMPLETED") << read_small(cluster_->agent_log());
  expect_target_untouched();
  const std::string exec_log = cluster_->alloc_dir(id) + "/exec-n1-0.out";
  struct stat st {};
  ASSERT_EQ(::lstat(exec_log.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the link is still there: the exec never reached the agent";
  EXPECT_EQ(read_small(exec_log), "remote-launch-ran\n");
}

// The job replaces its own log with a link to a root-only file, then ends: `railyard logs` used to read the
// name as root and hand the target back through the API, after the job too.
TEST_F(AllocDirAttack, LogRouteDoesNotReadThroughALink) {
  const int64_t id = cluster_->submit_script("echo hello; rm -f rank-0.out rank-0.err; ln -s " + target_ +
                                             " rank-0.out; ln -s " + target_ + " rank-0.err");
  EXPECT_EQ(cluster_->wait_done(id), "COMPLETED");
  for (const char* stream : {"out", "err"}) {
    const json answer = logs_as_nobody(id, stream);
    EXPECT_EQ(answer["body"].get<std::string>().find("root-only-secret"), std::string::npos)
        << stream << ": " << answer.dump();
  }
  const json admin = cluster_->http()
                         .request("GET", "/api/v1/jobs/" + std::to_string(id) + "/logs?rank=0&stream=out", "",
                                  cluster_->admin_token())
                         .json();
  EXPECT_EQ(admin.dump().find("root-only-secret"), std::string::npos) << admin.dump();
  expect_target_untouched();
}

// The job swaps its rank-0 log for a FIFO and keeps running: the agent used to open the name every tick to
// tail MLLOG lines, blocking on the FIFO's open, so heartbeats stopped and every job of the node ended
// NODE_FAIL. An agent restarted meanwhile opens the name once to adopt the job: that must not block either.
TEST_F(AllocDirAttack, FifoInPlaceOfTheLogBlocksNothing) {
  const int64_t fifo_job = cluster_->submit_script("rm -f rank-0.out; mkfifo rank-0.out; sleep 10");
  ASSERT_TRUE(until([&] { return cluster_->state(fifo_job) == "RUNNING"; })) << cluster_->job(fifo_job).dump();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(cluster_->state(fifo_job), "RUNNING") << "its node went down";
  const int64_t other = cluster_->submit_script("echo fine", 2);
  EXPECT_EQ(cluster_->wait_done(other, std::chrono::seconds(30)), "COMPLETED") << read_small(cluster_->agent_log());
  const json logs = logs_as_nobody(fifo_job, "out");  // answered at once, refused by type
  EXPECT_EQ(logs["status"], 404) << logs.dump();
  EXPECT_NE(logs["body"].get<std::string>().find("not a regular file"), std::string::npos) << logs.dump();
  cluster_->stop_agent(SIGTERM);  // the workers stay; the next agent adopts them
  cluster_->start_agent();        // throws when the agent does not register (blocked in adoption)
  // Adopted, its exit code is lost (it is no longer the agent's child); what matters is that it was never
  // NODE_FAIL: the node kept its heartbeat throughout.
  const std::string end = cluster_->wait_done(fifo_job);
  EXPECT_TRUE(end == "COMPLETED" || end == "FAILED") << end << "\n" << read_small(cluster_->agent_log());
  EXPECT_TRUE(cluster_->agent_alive());
}

}  // namespace
}  // namespace railyard::testing
