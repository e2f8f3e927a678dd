// Slurm's front door against a real local cluster (`railyard up`: a scheduler and agents): `railyard sbatch`
// runs an MLPerf-style script with no GPU directive on whole nodes with the script's time limit; `submit`
// with sizes keeps the script's other directives; squeue and scancel with their Slurm options (issue 47).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "tests/cli_test_util.hpp"

namespace railyard::testing {
namespace {

// run.sub as MLPerf writes it: the size comes from the command line, the whole node from --exclusive.
constexpr const char* kRunSub =
    "#!/bin/bash\n#SBATCH --job-name mlperf-resnet\n#SBATCH -t 00:07:00\n#SBATCH --exclusive\n#SBATCH "
    "--mem=0\n\n"
    "echo \"args: $0 $*\"\n";

class CliSbatch : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto agent =
        std::filesystem::path(RAILYARD_BIN).parent_path().parent_path() / "agent" / "railyard-agent";
    if (!std::filesystem::exists(agent)) GTEST_SKIP() << "railyard-agent is not built";
    env_ = {{"HOME", tmp_.file("home")}};
    auto up =
        run({"up", "--nodes", "4", "--port", "0", "--state-dir", tmp_.file("state"), "--timeout", "60"});
    ASSERT_EQ(up.code, 0) << up.err;
    write_text(tmp_.file("run.sub"), kRunSub);
  }
  void TearDown() override {
    if (!env_.empty()) (void)run({"down", "--state-dir", tmp_.file("state")});
  }
  CliResult run(const std::vector<std::string>& args) { return run_cli(RAILYARD_BIN, args, env_); }
  nlohmann::json job(const std::string& id) { return run({"show", id, "--json"}).json()["job"]; }
  // Waits for the job's end (sbatch returns at submit, as sbatch does).
  std::string wait_state(const std::string& id) {
    for (int i = 0; i < 600; ++i) {
      const std::string state = job(id).value("state", "");
      if (state != "PENDING" && state != "STARTING" && state != "RUNNING") return state;
      usleep(100 * 1000);
    }
    return "still running";
  }

  TempDir tmp_;
  std::map<std::string, std::string> env_;
};

TEST_F(CliSbatch, AScriptWithoutAGpuDirectiveRunsOnTwoWholeNodesWithItsTimeLimit) {
  auto r = run({"sbatch", "-N", "2", "--ntasks-per-node=8", tmp_.file("run.sub"), "--epochs", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(r.out, m, std::regex("Submitted batch job ([0-9]+)\n"))) << r.out;
  const std::string id = m[1];
  EXPECT_NE(r.err.find("no GPU request: --exclusive takes 2 whole nodes, all their GPUs"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("command line: --ntasks-per-node=8"), std::string::npos) << r.err;
  EXPECT_EQ(wait_state(id), "COMPLETED");
  const auto j = job(id);
  EXPECT_EQ(j["nodes"].size(), 2u) << j.dump();
  EXPECT_EQ(j["gpus"], 16) << "every GPU of both DGX H100 nodes";
  EXPECT_EQ(j["spec"]["gpus_per_node"], 8);
  EXPECT_EQ(j["spec"]["exclusive"], true);
  EXPECT_EQ(j["spec"]["time_limit"], 7 * 60) << "the script's #SBATCH -t";
  EXPECT_EQ(run({"logs", id}).out, "args: run.sub --epochs 3\n");
  // squeue shows it in Slurm's words; a job id finds it whatever its state.
  auto q = run({"squeue", "-j", id, "-h", "-o", "%i %t %T %D %l %j"});
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_EQ(q.out, id + " CD COMPLETED 2 7:00 mlperf-resnet\n");
}

TEST_F(CliSbatch, SubmitWithSizesKeepsTheScriptsOtherDirectives) {
  auto r = run({"submit", "--nodes", "1", "--gpus-per-node", "4", tmp_.file("run.sub")});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string id = trimmed(r.out);
  EXPECT_EQ(wait_state(id), "COMPLETED");
  const auto j = job(id);
  EXPECT_EQ(j["gpus"], 4);
  EXPECT_EQ(j["spec"]["time_limit"], 7 * 60);
  EXPECT_EQ(j["spec"]["exclusive"], true) << "the script's --exclusive";
  EXPECT_EQ(r.err.find("no GPU request"), std::string::npos)
      << "the size came from the command line: " << r.err;
  // A file that is no job file is refused with the reason, not run as a command.
  write_text(tmp_.file("notes.txt"), "echo hi\n");
  auto plain = run({"submit", tmp_.file("notes.txt")});
  EXPECT_EQ(plain.code, 2);
  EXPECT_NE(plain.err.find("not taken as a job file: its first line is not a \"#!\" line"), std::string::npos)
      << plain.err;
}

TEST_F(CliSbatch, SqueueAndScancelWithSlurmOptions) {
  write_text(tmp_.file("sleeper"), "#!/bin/bash\n#SBATCH -G 1 -t 10\nsleep 60\n");
  auto r = run({"sbatch", "--parsable", "-J", "nap", tmp_.file("sleeper")});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string id = trimmed(r.out);
  ASSERT_TRUE(std::regex_match(id, std::regex("[0-9]+"))) << r.out;
  for (int i = 0; i < 100 && job(id).value("state", "") != "RUNNING"; ++i) usleep(100 * 1000);
  auto q = run({"squeue", "--me", "-t", "R", "-o", "%.6i %.3t %j"});
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_NE(q.out.find("JOBID  ST NAME\n"), std::string::npos) << q.out;
  EXPECT_NE(q.out.find(std::string(6 - id.size(), ' ') + id + "   R nap\n"), std::string::npos) << q.out;
  auto odd = run({"squeue", "--start", "-h", "-o", "%i %x"});
  EXPECT_EQ(odd.code, 0);
  EXPECT_NE(odd.err.find("squeue: --start ignored"), std::string::npos) << odd.err;
  EXPECT_NE(odd.err.find("-o field %x: not one Railyard shows"), std::string::npos) << odd.err;
  auto c = run({"scancel", "-n", "nap", "--signal=USR1"});
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.err.find("--signal=USR1 ignored"), std::string::npos) << c.err;
  EXPECT_EQ(wait_state(id), "CANCELLED");
  EXPECT_EQ(run({"scancel"}).code, 2);
}

}  // namespace
}  // namespace railyard::testing
