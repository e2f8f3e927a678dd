// Disk faults under the real `railyard-scheduler` (issue 10): its database on a small tmpfs that the test
// fills, and remounts read-only. The daemon must answer a clear error (not hang, not crash, never acknowledge
// what it did not store) and lose nothing it acknowledged. Needs root (mount); skips without it.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/fault_util.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;

const std::string kBin = RAILYARD_SCHEDULER_BIN;

constexpr const char* kTwoNodes = R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n[1-2]"}]})";

class FaultDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
    mount_ = std::make_unique<TmpfsMount>(dir_.file("db"), "2m");
    if (!mount_->mounted()) GTEST_SKIP() << "mount -t tmpfs refused (no CAP_SYS_ADMIN here)";
    std::ofstream(dir_.file("two.json")) << kTwoNodes;
    token_ = create_token(kBin, db(), "alice", "user");
    ASSERT_EQ(token_.size(), 67u) << token_;
  }
  void TearDown() override {
    daemon_.reset();  // before the tmpfs goes
    mount_.reset();
  }
  std::string db() const { return mount_->file("state.db"); }
  std::vector<std::string> args() const {
    return {"--listen", "127.0.0.1:0", "--db", db(), "--cluster", dir_.file("two.json")};
  }
  void start() {
    daemon_ = std::make_unique<DaemonProcess>(kBin, args());
    ASSERT_GT(daemon_->port(), 0) << "daemon did not start";
    http_ = std::make_unique<HttpClient>(daemon_->port());
  }
  // Submits one job; its id when acknowledged (201), else 0 with the answer in `last_`.
  int64_t submit(const std::string& name) {
    last_ = http_->request("POST", "/api/v1/jobs", json{{"name", name}, {"gpus", 1}}.dump(), token_);
    return last_.status == 201 ? last_.json().value("id", int64_t{0}) : 0;
  }
  // Every acknowledged job is stored exactly once, under the name it was submitted with.
  void expect_all_there() {
    std::map<int64_t, int> count;
    std::map<int64_t, std::string> name;
    for (const json& j : all_jobs(*http_)) {
      ++count[j["id"].get<int64_t>()];
      name[j["id"].get<int64_t>()] = j["name"];
    }
    for (const auto& [id, n] : acked_) {
      EXPECT_EQ(count[id], 1) << "acknowledged job " << id;
      EXPECT_EQ(name[id], n) << "job " << id;
    }
  }

  TempDir dir_;
  std::unique_ptr<TmpfsMount> mount_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<HttpClient> http_;
  std::string token_;
  std::map<int64_t, std::string> acked_;
  HttpResult last_;
};

TEST_F(FaultDisk, DiskFullRefusesSubmitsWithAClearErrorAndLosesNothingAcknowledged) {
  start();
  for (int i = 0; i < 50; ++i) {
    const std::string name = "before-" + std::to_string(i);
    const int64_t id = submit(name);
    ASSERT_GT(id, 0) << last_.body;
    acked_[id] = name;
  }
  // Fill the tmpfs (dd ends with "No space left on device").
  shell("dd if=/dev/zero of=" + mount_->file("fill") + " bs=64k 2>/dev/null");
  // SQLite may still find room in pages it already has: submit until the store refuses.
  int refused = 0;
  HttpResult error;
  for (int i = 0; i < 5000 && refused < 20; ++i) {
    const std::string name = "full-" + std::to_string(i);
    if (const int64_t id = submit(name)) {
      acked_[id] = name;
    } else {
      ++refused;
      error = last_;
    }
  }
  ASSERT_GT(refused, 0) << "every submit acknowledged on a full disk";
  EXPECT_GE(error.status, 500) << error.body;
  EXPECT_LE(error.status, 503) << error.body;
  const json e = error.json();
  ASSERT_TRUE(e.contains("error")) << error.body;
  EXPECT_NE(e["error"].value("message", "").find("full"), std::string::npos) << error.body;
  std::printf("disk full: %d refused of %zu+%d submits; answer %d %s\n", refused, acked_.size(), refused,
              error.status, error.body.c_str());
  // Still serving reads while full.
  EXPECT_EQ(http_->request("GET", "/api/v1/jobs?limit=1").status, 200);

  // Space again: new work is taken without a restart; everything acknowledged survives a kill -9.
  std::filesystem::remove(mount_->file("fill"));
  const int64_t after = submit("after-space");
  ASSERT_GT(after, 0) << last_.body;
  acked_[after] = "after-space";
  daemon_->stop(SIGKILL);
  start();
  expect_all_there();
}

TEST_F(FaultDisk, ReadOnlyDatabaseDirectoryStopsTheStartWithAClearErrorAndLosesNothing) {
  start();
  for (int i = 0; i < 20; ++i) {
    const std::string name = "rw-" + std::to_string(i);
    const int64_t id = submit(name);
    ASSERT_GT(id, 0) << last_.body;
    acked_[id] = name;
  }
  // A crash leaves the WAL behind; then the file system turns read-only (the kernel refuses that while the
  // daemon holds the files open for writing, so the remount comes after the crash).
  daemon_->stop(SIGKILL);
  ASSERT_TRUE(mount_->set_read_only(true)) << "remount,ro refused";
  std::string cmd = "timeout 30 " + kBin;
  for (const auto& a : args()) cmd += " '" + a + "'";
  const std::string out = run_capture(cmd + " 2>&1; echo \"exit=$?\"");
  EXPECT_EQ(out.find("listening on"), std::string::npos) << out;
  EXPECT_EQ(out.find("exit=0"), std::string::npos) << out;
  EXPECT_EQ(out.find("exit=124"), std::string::npos) << "hung on a read-only database: " << out;
  EXPECT_NE(out.find(db()), std::string::npos) << "the error names the database: " << out;
  EXPECT_NE(out.find("read"), std::string::npos) << "the error says read-only: " << out;

  ASSERT_TRUE(mount_->set_read_only(false));
  start();
  expect_all_there();
  EXPECT_GT(submit("rw-again"), 0) << last_.body;
}

}  // namespace
}  // namespace railyard::testing
