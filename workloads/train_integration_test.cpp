// Runs railyard-train and railyard-allreduce as real processes under mpirun (4 and 2 ranks on loopback)
// and checks what they print with the MLLOG parser the agent uses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "jobs/mllog.hpp"
#include "workloads/run_process.hpp"

namespace railyard::workloads {
namespace {

using testing::ProcessResult;
using testing::run_process;
namespace fs = std::filesystem;

constexpr auto kTimeout = std::chrono::seconds(180);

std::string mpirun(int ranks, const std::string& program, const std::string& args) {
  return std::string(RAILYARD_MPIEXEC) + " -np " + std::to_string(ranks) +
         " --oversubscribe --allow-run-as-root --mca btl self,tcp --mca btl_tcp_if_include lo"
         " --mca oob_tcp_if_include lo --mca mpi_yield_when_idle 1 " +
         program + " " + args;
}

std::string train(int ranks, const std::string& args) { return mpirun(ranks, RAILYARD_TRAIN, args); }

std::string describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") + "\n--- stdout\n" +
         r.out + "--- stderr\n" + r.err;
}

std::vector<const jobs::MllogEvent*> with_key(const std::vector<jobs::MllogEvent>& events, std::string_view key) {
  std::vector<const jobs::MllogEvent*> out;
  for (const auto& e : events) {
    if (e.key == key) out.push_back(&e);
  }
  return out;
}

// "model_checksum=..." from every rank's stderr line.
std::vector<std::string> rank_checksums(const std::string& err) {
  static const std::regex line(R"(railyard-train: rank (\d+) of (\d+) model_checksum=([0-9a-f]{16}))");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[3]);
  }
  return out;
}

fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("railyard-it-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

TEST(Train, FourRanksReachTheTargetAndHoldTheSameModel) {
  const auto run = run_process(train(4, "--target-accuracy 0.95"), kTimeout);
  ASSERT_EQ(run.exit_code, 0) << describe(run);
  const auto events = jobs::parse_mllog_text(run.out);
  const auto stops = with_key(events, jobs::mllog_key::kRunStop);
  ASSERT_EQ(stops.size(), 1u) << run.out;
  EXPECT_EQ(stops[0]->metadata_string("status"), "success");
  const auto accuracies = with_key(events, jobs::mllog_key::kEvalAccuracy);
  ASSERT_FALSE(accuracies.empty());
  EXPECT_GE(accuracies.back()->value.get<double>(), 0.95);
  EXPECT_EQ(with_key(events, jobs::mllog_key::kEpochStart).size(), accuracies.size());
  EXPECT_EQ(with_key(events, jobs::mllog_key::kInitStart).size(), 1u);
  EXPECT_EQ(with_key(events, jobs::mllog_key::kInitStop).size(), 1u);
  const auto benchmark = with_key(events, jobs::mllog_key::kSubmissionBenchmark);
  ASSERT_EQ(benchmark.size(), 1u);
  EXPECT_EQ(benchmark[0]->metadata_string("dataset"), "sklearn-digits");
  EXPECT_GT(with_key(events, jobs::mllog_key::kTrackedStats).at(0)->value["throughput"].get<double>(), 0.0);
  const auto ttt = jobs::time_to_train_s(events);
  ASSERT_TRUE(ttt.has_value());
  EXPECT_GT(*ttt, 0.0);
  EXPECT_LT(*ttt, 120.0);

  const auto sums = rank_checksums(run.err);
  ASSERT_EQ(sums.size(), 4u) << run.err;
  EXPECT_EQ(std::set<std::string>(sums.begin(), sums.end()).size(), 1u) << run.err;
  EXPECT_EQ(stops[0]->metadata_string("model_checksum"), sums[0]);
}

// Stops after 2 epochs (a checkpoint each), waits, resumes: the second run continues at epoch 3, repeats
// the original run_start, and its time-to-train covers the first attempt and the pause. The result is
// bit-identical to an uninterrupted run.
TEST(Train, ResumesFromTheCheckpointAndCountsTheInterruption) {
  const std::string common = "--target-accuracy 0.97 --epochs 40 --checkpoint-every 1 --checkpoint-dir ";
  const auto dir = fresh_dir("resume");
  const auto first = run_process(train(4, common + dir.string() + " --max-epochs-this-run 2"), kTimeout);
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  const auto first_events = jobs::parse_mllog_text(first.out);
  ASSERT_TRUE(with_key(first_events, jobs::mllog_key::kRunStop).empty()) << "the target was reached too early\n"
                                                                   << first.out;
  ASSERT_EQ(with_key(first_events, jobs::mllog_key::kEpochStop).size(), 2u);
  ASSERT_TRUE(fs::exists(dir / "checkpoint.json"));

  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const auto second = run_process(train(4, common + dir.string()), kTimeout);
  ASSERT_EQ(second.exit_code, 0) << describe(second);
  const auto events = jobs::parse_mllog_text(second.out);
  const auto resume = with_key(events, jobs::mllog_key::kResume);
  ASSERT_EQ(resume.size(), 1u) << second.out;
  EXPECT_EQ(resume[0]->metadata_number("epoch_num"), 3.0);
  EXPECT_GT(*resume[0]->metadata_number("previous_elapsed_s"), 0.0);
  EXPECT_GE(*resume[0]->metadata_number("interruption_s"), 1.0);
  EXPECT_EQ(with_key(events, jobs::mllog_key::kEpochStart).at(0)->metadata_number("epoch_num"), 3.0);
  const auto original_start = with_key(first_events, jobs::mllog_key::kRunStart).at(0)->time_ms;
  EXPECT_EQ(with_key(events, jobs::mllog_key::kRunStart).at(0)->time_ms, original_start);
  const auto ttt = jobs::time_to_train_s(events);
  ASSERT_TRUE(ttt.has_value()) << second.out;
  const auto stop_ms = with_key(events, jobs::mllog_key::kRunStop).at(0)->time_ms;
  EXPECT_DOUBLE_EQ(*ttt, static_cast<double>(stop_ms - original_start) / 1000.0);
  EXPECT_GE(*ttt, 1.5);  // at least the pause between the runs

  const auto straight = run_process(train(4, common + fresh_dir("straight").string()), kTimeout);
  ASSERT_EQ(straight.exit_code, 0) << describe(straight);
  EXPECT_EQ(rank_checksums(straight.err).at(0), rank_checksums(second.err).at(0));
  EXPECT_EQ(with_key(jobs::parse_mllog_text(straight.out), jobs::mllog_key::kRunStop).at(0)->metadata_number("epoch_num"),
            with_key(events, jobs::mllog_key::kRunStop).at(0)->metadata_number("epoch_num"));
  fs::remove_all(dir);
  fs::remove_all(fresh_dir("straight"));
}

TEST(Train, RunningOutOfEpochsIsAbortedWithNoTimeToTrain) {
  const auto run = run_process(train(2, "--target-accuracy 0.999 --epochs 2"), kTimeout);
  EXPECT_EQ(run.exit_code, 4) << describe(run);
  const auto events = jobs::parse_mllog_text(run.out);
  const auto stops = with_key(events, jobs::mllog_key::kRunStop);
  ASSERT_EQ(stops.size(), 1u) << run.out;
  EXPECT_EQ(stops[0]->metadata_string("status"), "aborted");
  EXPECT_FALSE(jobs::time_to_train_s(events).has_value());
}

TEST(Train, RunsAsOneRankWithoutMpirun) {
  const auto run = run_process(std::string(RAILYARD_TRAIN) + " --target-accuracy 0.9", kTimeout);
  ASSERT_EQ(run.exit_code, 0) << describe(run);
  const auto events = jobs::parse_mllog_text(run.out);
  EXPECT_TRUE(jobs::time_to_train_s(events).has_value());
  EXPECT_EQ(rank_checksums(run.err).size(), 1u);
}

TEST(Train, RejectsBadArgumentsAndData) {
  EXPECT_EQ(run_process(std::string(RAILYARD_TRAIN) + " --backend tpu", kTimeout).exit_code, 2);
  const auto missing = run_process(std::string(RAILYARD_TRAIN) + " --data /nonexistent/digits.csv", kTimeout);
  EXPECT_EQ(missing.exit_code, 2) << describe(missing);
  EXPECT_NE(missing.err.find("/nonexistent/digits.csv"), std::string::npos);
}

// Without a GPU (CI), --backend nccl must explain itself and exit 3; with one, see gpu_test.cpp.
TEST(Nccl, WithoutAGpuExitsThreeWithAClearMessage) {
  const auto run = run_process(std::string(RAILYARD_TRAIN) + " --backend nccl", kTimeout);
  if (run.exit_code == 0) GTEST_SKIP() << "a GPU is present; workloads_gpu_test covers this machine";
  EXPECT_EQ(run.exit_code, 3) << describe(run);
#ifdef RAILYARD_HAVE_NCCL_BACKEND
  EXPECT_NE(run.err.find("no CUDA device: cudaGetDeviceCount returned"), std::string::npos) << run.err;
#else
  EXPECT_NE(run.err.find("nccl backend unavailable"), std::string::npos) << run.err;
#endif
  EXPECT_EQ(run.out.find("AddressSanitizer"), std::string::npos);
  const auto bench = run_process(std::string(RAILYARD_ALLREDUCE) + " --backend nccl", kTimeout);
  EXPECT_EQ(bench.exit_code, 3) << describe(bench);
}

TEST(Allreduce, TwoRanksReportSaneSizesAndBandwidths) {
  const auto run =
      run_process(mpirun(2, RAILYARD_ALLREDUCE, "--backend mpi --json -b 8 -e 1M -n 5 -w 1"), kTimeout);
  ASSERT_EQ(run.exit_code, 0) << describe(run);
  const auto doc = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_TRUE(doc.is_array()) << run.out;
  ASSERT_EQ(doc.size(), 18u);  // 8 B .. 1 MiB, doubling
  size_t expected = 8;
  for (const auto& point : doc) {
    EXPECT_EQ(point["bytes"].get<size_t>(), expected);
    EXPECT_GT(point["time_us"].get<double>(), 0.0);
    EXPECT_GT(point["algbw_gbytes_s"].get<double>(), 0.0);
    EXPECT_NEAR(point["busbw_gbytes_s"].get<double>(), point["algbw_gbytes_s"].get<double>(),
                1e-12);  // 2(n-1)/n = 1
    expected *= 2;
  }
}

}  // namespace
}  // namespace railyard::workloads
