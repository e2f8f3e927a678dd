#include "workloads/bootstrap.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

namespace railyard::workloads {
namespace {

using std::chrono::milliseconds;

TEST(BlobExchange, EveryRankGetsRankZerosBytes) {
  auto server = BlobServer::listen(0);
  ASSERT_TRUE(server.has_value()) << server.error().message;
  const int port = server->port();
  ASSERT_GT(port, 0);
  std::vector<unsigned char> blob(128);
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<unsigned char>(i * 7);

  std::vector<std::vector<unsigned char>> got(3);
  std::vector<std::thread> ranks;
  for (size_t r = 0; r < got.size(); ++r) {
    ranks.emplace_back([&, r] {
      auto fetched = fetch_blob("127.0.0.1", port, milliseconds(5000));
      if (fetched) got[r] = std::move(fetched).value();
    });
  }
  const auto served = server->serve(blob, 3, milliseconds(5000));
  for (auto& t : ranks) t.join();
  ASSERT_TRUE(served.has_value()) << served.error().message;
  for (const auto& g : got) EXPECT_EQ(g, blob);
}

TEST(BlobExchange, ServerTimesOutWhenRanksAreMissing) {
  auto server = BlobServer::listen(0);
  ASSERT_TRUE(server.has_value());
  const std::vector<unsigned char> blob(4, 1);
  const auto served = server->serve(blob, 1, milliseconds(100));
  ASSERT_FALSE(served.has_value());
  EXPECT_NE(served.error().message.find("only 0 of 1"), std::string::npos);
}

TEST(BlobExchange, ClientGivesUpWhenNobodyListens) {
  int port = 0;
  {
    auto server = BlobServer::listen(0);  // find a free port, then close it
    ASSERT_TRUE(server.has_value());
    port = server->port();
  }
  EXPECT_FALSE(fetch_blob("127.0.0.1", port, milliseconds(300)).has_value());
}

// Environment helpers: set for one test, restored after.
class LaunchEnv : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "RANK", "WORLD_SIZE",
                             "MASTER_ADDR", "MASTER_PORT"}) {
      ::unsetenv(name);
    }
  }
};

TEST_F(LaunchEnv, SingletonMpirunAndEnv) {
  TearDown();
  auto alone = detect_launch();
  ASSERT_TRUE(alone.has_value());
  EXPECT_EQ(alone->kind, LaunchInfo::Kind::kSingleton);
  EXPECT_EQ(alone->world, 1);

  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("RANK", "2", 1);
  EXPECT_FALSE(detect_launch().has_value());  // no MASTER_ADDR/PORT
  ::setenv("MASTER_ADDR", "node001", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  auto env = detect_launch();
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->kind, LaunchInfo::Kind::kEnv);
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->master_port, 29500);
  ::setenv("RANK", "4", 1);
  EXPECT_FALSE(detect_launch().has_value());

  ::setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  ::setenv("OMPI_COMM_WORLD_RANK", "5", 1);
  auto mpi = detect_launch();
  ASSERT_TRUE(mpi.has_value());
  EXPECT_EQ(mpi->kind, LaunchInfo::Kind::kMpirun);
  EXPECT_EQ(mpi->rank, 5);
  EXPECT_EQ(mpi->world, 8);
}

}  // namespace
}  // namespace railyard::workloads
