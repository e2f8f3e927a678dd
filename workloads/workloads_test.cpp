// Unit tests of the training pieces that need neither MPI nor a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "workloads/allreduce_bench.hpp"
#include "workloads/checkpoint.hpp"
#include "workloads/collective.hpp"
#include "workloads/dataset.hpp"
#include "workloads/mlp.hpp"
#include "workloads/trainer.hpp"

namespace railyard::workloads {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("railyard-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(Dataset, LoadsTheVendoredDigits) {
  auto data = load_csv_dataset(RAILYARD_DIGITS);
  ASSERT_TRUE(data.has_value()) << data.error().message;
  EXPECT_EQ(data->name, "sklearn-digits");
  EXPECT_EQ(data->rows(), 1797);
  EXPECT_EQ(data->features, 64);
  EXPECT_EQ(data->classes, 10);
  EXPECT_EQ(data->y[0], 0);
  EXPECT_EQ(data->y[1], 1);
  EXPECT_FLOAT_EQ(data->x[2], 5.0f / 16.0f);  // first row: 0,0,5,13,... scaled by the maximum, 16
  EXPECT_EQ(*std::max_element(data->x.begin(), data->x.end()), 1.0f);
}

TEST(Dataset, ReadsPlainCsvAndRejectsBadRows) {
  const auto dir = temp_dir("csv");
  std::ofstream(dir / "ok.csv") << "0,2,0\n1,0,1\n0,2,0\n1,0,1\n0,2,0\n1,0,1\n0,2,0\n1,0,1\n0,2,0\n1,0,1\n\n";
  std::ofstream(dir / "ragged.csv") << "0,2,0\n1,0\n";
  std::ofstream(dir / "label.csv") << "0,2,0.5\n";
  std::ofstream(dir / "text.csv") << "a,b,c\n";
  auto ok_data = load_csv_dataset(dir / "ok.csv");
  ASSERT_TRUE(ok_data.has_value()) << ok_data.error().message;
  EXPECT_EQ(ok_data->name, "csv");
  EXPECT_EQ(ok_data->rows(), 10);
  EXPECT_EQ(ok_data->classes, 2);
  EXPECT_FLOAT_EQ(ok_data->x[1], 1.0f);
  for (const char* bad : {"ragged.csv", "label.csv", "text.csv", "missing.csv"}) {
    EXPECT_FALSE(load_csv_dataset(dir / bad).has_value()) << bad;
  }
  fs::remove_all(dir);
}

TEST(Dataset, SyntheticIsDeterministicAndShapedLikeDigits) {
  const auto a = synthetic_digits();
  const auto b = synthetic_digits();
  EXPECT_EQ(a.rows(), 1797);
  EXPECT_EQ(a.features, 64);
  EXPECT_EQ(a.classes, 10);
  EXPECT_EQ(a.x, b.x);
  EXPECT_NE(synthetic_digits(7).x, a.x);
}

TEST(Dataset, SplitIsDisjointAndComplete) {
  const auto all = synthetic_digits();
  const auto split = split_dataset(all, 0.2, 99);
  EXPECT_EQ(split.eval.rows(), 359);
  EXPECT_EQ(split.train.rows() + split.eval.rows(), all.rows());
  EXPECT_EQ(split_dataset(all, 0.2, 99).train.x, split.train.x);
}

TEST(Dataset, PermutationIsAPermutationAndDependsOnTheStream) {
  const auto p = permutation(1000, 1, 3);
  EXPECT_EQ(std::set<int>(p.begin(), p.end()).size(), 1000u);
  EXPECT_EQ(p, permutation(1000, 1, 3));
  EXPECT_NE(p, permutation(1000, 1, 4));
}

TEST(Shard, CoversEveryItemOnce) {
  for (int world : {1, 2, 3, 4, 7}) {
    for (int count : {0, 1, 5, 32, 33}) {
      int next = 0;
      for (int r = 0; r < world; ++r) {
        const Range range = shard(count, r, world);
        EXPECT_EQ(range.begin, next);
        EXPECT_LE(range.end - range.begin, count / world + 1);
        next = range.end;
      }
      EXPECT_EQ(next, count);
    }
  }
}

// The analytic gradient (the code the GPU kernels share) against central differences of the loss.
TEST(Mlp, GradientMatchesFiniteDifferences) {
  const auto data = synthetic_digits();
  const MlpShape shape{data.features, 8, data.classes};
  auto params = init_parameters(shape, 5);
  for (size_t i = 0; i < params.size(); i += 7) params[i] += 0.01f;  // non-zero biases too
  const std::vector<int> rows = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const float scale = 1.0f / static_cast<float>(rows.size());
  std::vector<float> grad(params.size()), scratch_grad(params.size());
  MlpScratch scratch;
  compute_gradients(shape, params, data, rows, scale, grad, scratch);
  const auto loss_at = [&](std::vector<float> p) {
    return static_cast<double>(compute_gradients(shape, p, data, rows, scale, scratch_grad, scratch));
  };
  for (int i : {0, 5, 64, 65, 300, shape.w2_offset(), shape.w2_offset() + 8, shape.parameter_count() - 1}) {
    auto plus = params, minus = params;
    const float h = 1e-2f;
    plus[static_cast<size_t>(i)] += h;
    minus[static_cast<size_t>(i)] -= h;
    const double numeric = (loss_at(plus) - loss_at(minus)) / (2.0 * h);
    EXPECT_NEAR(grad[static_cast<size_t>(i)], numeric, 2e-3 + 0.05 * std::fabs(numeric)) << "parameter " << i;
  }
}

TEST(Mlp, ChecksumSeesEveryBit) {
  std::vector<float> a = {1.0f, 2.0f, 3.0f};
  auto b = a;
  b[1] = std::nextafter(b[1], 3.0f);
  EXPECT_NE(model_checksum(a), model_checksum(b));
  EXPECT_EQ(checksum_hex(0xabc), "0000000000000abc");
}

TEST(Trainer, OneRankReachesTheTargetOnSyntheticData) {
  const auto split = split_dataset(synthetic_digits(), 0.2, 0x5eed);
  LocalCollective local;
  const MlpShape shape = shape_for(split.train, 16);
  CpuEngine engine(shape, split.train, init_parameters(shape, 1), local);
  TrainSetup setup{&split, shape, &local, &engine, nullptr, {}, {}};
  TrainConfig config;
  config.epochs = 20;
  config.target_accuracy = 0.9;
  auto outcome = train(config, setup);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message;
  EXPECT_EQ(outcome->status, RunStatus::kSuccess);
  EXPECT_GE(outcome->accuracy, 0.9);
  EXPECT_LT(outcome->last_epoch, 20);
}

TEST(Checkpoint, RoundTripsExactlyAndIsShared) {
  const auto dir = temp_dir("ckpt");
  Checkpoint saved{4, 1'700'000'000'123, 2.5, 9, "sklearn-digits", MlpShape{64, 8, 10}, {}};
  saved.params = init_parameters(saved.shape, 3);
  saved.params[0] = 1.0f / 3.0f;
  ASSERT_TRUE(save_checkpoint(dir, saved).has_value());
  EXPECT_FALSE(fs::exists(dir / ("checkpoint.json.tmp." + std::to_string(::getpid()))));
  auto loaded = load_checkpoint(dir);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->epoch, 4);
  EXPECT_EQ((*loaded)->run_start_ms, 1'700'000'000'123);
  EXPECT_EQ((*loaded)->params, saved.params);  // bit-exact through JSON

  LocalCollective local;
  Checkpoint expected = saved;
  auto shared = load_and_share_checkpoint(local, dir, expected);
  ASSERT_TRUE(shared.has_value() && shared->has_value());
  EXPECT_EQ((*shared)->params, saved.params);
  expected.seed = 10;
  EXPECT_FALSE(load_and_share_checkpoint(local, dir, expected).has_value());  // another run's checkpoint
  fs::remove_all(dir);
}

TEST(Checkpoint, AbsentIsEmptyAndCorruptIsAnError) {
  const auto dir = temp_dir("ckpt-bad");
  auto none = load_checkpoint(dir);
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->has_value());
  std::ofstream(checkpoint_file(dir)) << R"({"format": "railyard-train-checkpoint", "version": 1, "epoch": )";
  EXPECT_FALSE(load_checkpoint(dir).has_value());
  std::ofstream(checkpoint_file(dir))
      << R"({"format": "railyard-train-checkpoint", "version": 1, "epoch": "two"})";
  EXPECT_FALSE(load_checkpoint(dir).has_value());
  fs::remove_all(dir);
}

TEST(AllreduceBench, SizesDoubleFromMinToMax) {
  auto sizes = bench_sizes(8, 64, 2.0);
  ASSERT_TRUE(sizes.has_value());
  EXPECT_EQ(*sizes, (std::vector<size_t>{8, 16, 32, 64}));
  EXPECT_EQ(bench_sizes(8, size_t{8} << 30, 2.0)->size(), 31u);
  EXPECT_EQ(*bench_sizes(8, 100, 4.0), (std::vector<size_t>{8, 32, 100}));
  EXPECT_FALSE(bench_sizes(64, 8, 2.0).has_value());
  EXPECT_FALSE(bench_sizes(8, 64, 1.0).has_value());
}

TEST(AllreduceBench, ParsesSizesAndComputesBandwidth) {
  EXPECT_EQ(*parse_size("8"), 8u);
  EXPECT_EQ(*parse_size("64K"), 65536u);
  EXPECT_EQ(*parse_size("1M"), 1u << 20);
  EXPECT_EQ(*parse_size("1G"), 1u << 30);
  EXPECT_EQ(*parse_size("2gB"), 2ull << 30);
  EXPECT_FALSE(parse_size("").has_value());
  EXPECT_FALSE(parse_size("1T").has_value());
  const auto p = make_point(1'000'000'000, 0.5, 4);
  EXPECT_DOUBLE_EQ(p.time_us, 500000.0);
  EXPECT_DOUBLE_EQ(p.algbw_gbytes_s, 2.0);
  EXPECT_DOUBLE_EQ(p.busbw_gbytes_s, 3.0);  // 2 * 2 * 3 / 4
  const auto json = to_json({p});
  EXPECT_EQ(json[0]["bytes"], 1'000'000'000);
  EXPECT_EQ(json[0]["busbw_gbytes_s"], 3.0);
}

// The example job specs (jobs/examples) stay loadable JSON with the fields the scheduler needs.
TEST(Examples, JobSpecsAreWellFormed) {
  int seen = 0;
  for (const auto& entry : fs::recursive_directory_iterator(RAILYARD_EXAMPLES)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    std::ifstream in(entry.path());
    const auto spec = nlohmann::json::parse(in, nullptr, false);
    ASSERT_TRUE(spec.is_object());
    for (const char* field :
         {"name", "user", "nodes", "gpus_per_node", "time_limit", "launcher", "command", "target"}) {
      EXPECT_TRUE(spec.contains(field)) << field;
    }
    EXPECT_TRUE(spec["command"].is_array() && !spec["command"].empty());
    EXPECT_EQ(spec["target"]["metric"], "eval_accuracy");
    ++seen;
  }
  EXPECT_EQ(seen, 4 + 6 + 1);  // train-digits x4, mlperf x6, pytorch-ddp
}

}  // namespace
}  // namespace railyard::workloads
