// Replays every saved input of fuzz/regressions/<target>/ (crashes found by fuzzing, and seeds) through
// its target in the normal (ASan/UBSan) test build: a crash, leak or UB report fails the test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz/targets.hpp"

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class FuzzRegression : public ::testing::TestWithParam<railyard::fuzz::NamedTarget> {};

TEST_P(FuzzRegression, SavedInputsDoNotCrash) {
  const auto target = GetParam();
  const fs::path dir = fs::path(RAILYARD_FUZZ_DIR) / "regressions" / target.name;
  ASSERT_TRUE(fs::is_directory(dir)) << dir << " is missing: every target keeps its seeds there";
  int replayed = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    SCOPED_TRACE(entry.path().string());
    target.fn(read_all(entry.path()));
    ++replayed;
  }
  EXPECT_GT(replayed, 0) << "no inputs under " << dir;
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzRegression, ::testing::ValuesIn(railyard::fuzz::kTargets),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
