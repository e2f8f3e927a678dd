// Label "gpu": runs only where a CUDA device is usable; skips cleanly elsewhere (CI).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "jobs/mllog.hpp"
#include "workloads/run_process.hpp"

namespace railyard::workloads {
namespace {

using testing::run_process;

constexpr auto kTimeout = std::chrono::seconds(300);

TEST(NcclGpu, OneRankReachesTheTarget) {
  const auto run = run_process(
      "NCCL_SOCKET_IFNAME=lo " + std::string(RAILYARD_TRAIN) + " --backend nccl --target-accuracy 0.95",
      kTimeout);
  if (run.exit_code == 3) GTEST_SKIP() << "no usable GPU: " << run.err;
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const auto events = jobs::parse_mllog_text(run.out);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().key, "run_stop");
  EXPECT_EQ(events.back().metadata_string("status"), "success");
  EXPECT_TRUE(jobs::time_to_train_s(events).has_value());
}

TEST(NcclGpu, AllreduceSweepIsSane) {
  const auto run = run_process(
      "NCCL_SOCKET_IFNAME=lo " + std::string(RAILYARD_ALLREDUCE) + " --backend nccl --json -e 64M -n 5 -w 2",
      kTimeout);
  if (run.exit_code == 3) GTEST_SKIP() << "no usable GPU: " << run.err;
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const auto doc = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_TRUE(doc.is_array()) << run.out;
  ASSERT_EQ(doc.size(), 24u);  // 8 B .. 64 MiB
  for (const auto& point : doc) EXPECT_GT(point["time_us"].get<double>(), 0.0);
}

}  // namespace
}  // namespace railyard::workloads
