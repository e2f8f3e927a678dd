// Test fixture for the integration tests of `railyard-scheduler` (the binary at RAILYARD_SCHEDULER_BIN, which
// the including target defines): a temporary database, a two-node cluster file and tokens for alice, bob and
// root. Shared by daemon_test.cpp and daemon_durability_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/daemon_client.hpp"

namespace railyard::testing::daemon_fixture {

using nlohmann::json;

inline const std::string kBin = RAILYARD_SCHEDULER_BIN;

// Two DGX H100 nodes under two leaves joined by a spine: a 16-GPU job needs both, across two leaves.
constexpr const char* kTwoNodes = R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n1"}, {"name": "leaf2", "level": "leaf", "nodes": "n2"},
               {"name": "spine", "level": "spine", "children": ["leaf1", "leaf2"]}]})";

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("two.json")) << kTwoNodes;
    alice_ = create_token(kBin, db(), "alice", "user");
    bob_ = create_token(kBin, db(), "bob", "user");
    admin_ = create_token(kBin, db(), "root", "admin");
    ASSERT_EQ(alice_.size(), 67u) << alice_;
  }
  std::string db() const { return dir_.file("state.db"); }

  std::unique_ptr<DaemonProcess> start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--listen", "127.0.0.1:0", "--db",
                                  db(),       "--cluster",   dir_.file("two.json")};
    args.insert(args.end(), extra.begin(), extra.end());
    auto d = std::make_unique<DaemonProcess>(kBin, args);
    EXPECT_GT(d->port(), 0) << "daemon did not print its port";
    return d;
  }

  // Polls a job until it leaves PENDING (the pass runs just after the submit is acknowledged).
  json wait_placed(HttpClient& c, int64_t id) {
    json j;
    for (int i = 0; i < 200; ++i) {
      j = c.request("GET", "/api/v1/jobs/" + std::to_string(id)).json();
      if (j.value("state", "") != "PENDING" || !j["reason"].is_null()) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return j;
  }

  TempDir dir_;
  std::string alice_, bob_, admin_;
};

inline int64_t submit(HttpClient& c, const std::string& token, const std::string& body) {
  auto r = c.request("POST", "/api/v1/jobs", body, token);
  EXPECT_EQ(r.status, 201) << r.body;
  return r.json().value("id", int64_t{0});
}

}  // namespace railyard::testing::daemon_fixture
