// `railyard sim` end to end through the real binary (RAILYARD_BIN): JSON fields, table, per-job CSV, bad rows
// and exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct CmdResult {
  int code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SimCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("railyard_sim_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  CmdResult run(const std::string& args) {
    const fs::path err = dir_ / "stderr.txt";
    const std::string cmd = std::string(RAILYARD_BIN) + " sim " + args + " 2>" + err.string();
    CmdResult r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = slurp(err);
    return r;
  }

  fs::path dir_;
};

constexpr const char* kTrace =
    "job_id,submit_s,duration_s,num_gpus,user,status\n"
    "a,0,100,8,vc1,unknown\n"
    "b,10,200,16,vc2,unknown\n"
    "c,20,50,1,vc1,unknown\n"
    "d,30,400,32,vc2,unknown\n"
    "e,40,30,4,vc1,unknown\n";

TEST_F(SimCli, JsonHasEveryFieldForEveryPolicy) {
  const fs::path trace = write("t.csv", kTrace);
  CmdResult r = run("--nodes 4 --leaf-size 2 --trace " + trace.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("wall_seconds"));
  for (const char* policy : {"railyard", "first-fit", "fifo"}) {
    ASSERT_TRUE(j["policies"].contains(policy)) << policy;
    const auto& p = j["policies"][policy];
    for (const char* key : {"jobs", "mean_wait_s", "median_wait_s", "p99_wait_s", "mean_jct_s", "p99_jct_s",
                            "mean_bounded_slowdown", "makespan_s", "utilization", "min_span_share",
                            "mean_comm_slowdown", "fragmentation", "preemptions", "skipped_rows"})
      EXPECT_TRUE(p.contains(key)) << policy << " " << key;
    EXPECT_EQ(p["jobs"], 5);
    EXPECT_EQ(p["skipped_rows"], 0);
    EXPECT_GT(p["utilization"].get<double>(), 0);
  }
}

// --offered-load scales a trace's submit times to the load asked; the JSON reports the load simulated either
// way, and the option is refused with --load or --synth.
TEST_F(SimCli, OfferedLoadScalesSubmitTimesAndIsReported) {
  const fs::path trace = write("t.csv", kTrace);
  const fs::path jobs = dir_ / "jobs.csv";
  const std::string base = "--nodes 4 --leaf-size 2 --trace " + trace.string() + " --policy first-fit --json";
  CmdResult natural = run(base);
  ASSERT_EQ(natural.code, 0) << natural.err;
  // kTrace: 8*100 + 16*200 + 1*50 + 32*400 + 4*30 = 16970 GPU-s over 40 s on 32 GPUs
  EXPECT_NEAR(nlohmann::json::parse(natural.out)["offered_load"].get<double>(), 16970.0 / (40 * 32), 1e-9);
  CmdResult scaled = run(base + " --offered-load 2 --jobs-out " + jobs.string());
  ASSERT_EQ(scaled.code, 0) << scaled.err;
  EXPECT_NEAR(nlohmann::json::parse(scaled.out)["offered_load"].get<double>(), 2.0, 1e-9);
  std::istringstream csv(slurp(jobs));
  std::string line;
  std::getline(csv, line);
  std::map<std::string, double> submit;
  while (std::getline(csv, line)) {
    std::istringstream row(line);
    std::string id, policy, at;
    std::getline(row, id, ',');
    std::getline(row, policy, ',');
    std::getline(row, at, ',');
    submit[id] = std::stod(at);
  }
  ASSERT_EQ(submit.size(), 5u);
  EXPECT_NEAR(submit["d"], 30 / (2.0 / (16970.0 / 1280)), 1.0);  // divided by target / natural; written whole
  EXPECT_EQ(run(base + " --offered-load 2 --load 3").code, 2);
  for (const char* bad : {"0", "-1"}) {
    CmdResult r = run(base + " --offered-load " + bad);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("positive"), std::string::npos) << r.err;
  }
  CmdResult synth = run("--nodes 4 --synth jobs=10 --offered-load 1");
  EXPECT_EQ(synth.code, 2);
  EXPECT_NE(synth.err.find("--synth takes load="), std::string::npos) << synth.err;
}

// A qos column reaches the core: a high job preempts scavenger work unless --no-preemption, and the per-job
// CSV says each job's QoS and how often it was preempted.
TEST_F(SimCli, QosColumnPreemptionAndNoPreemption) {
  const fs::path trace = write("q.csv",
                               "job_id,submit_s,duration_s,num_gpus,user,qos\n"
                               "s1,0,100,16,u,scavenger\n"
                               "s2,0,100,16,u,scavenger\n"
                               "h,10,50,16,u,high\n");
  const fs::path jobs = dir_ / "jobs.csv";
  const std::string base = "--nodes 4 --leaf-size 2 --trace " + trace.string() + " --policy railyard --json";
  CmdResult on = run(base + " --jobs-out " + jobs.string());
  ASSERT_EQ(on.code, 0) << on.err;
  EXPECT_EQ(nlohmann::json::parse(on.out)["policies"]["railyard"]["preemptions"], 1);
  const std::string csv = slurp(jobs);
  EXPECT_NE(csv.find(",high,0\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",scavenger,1\n"), std::string::npos) << csv;
  CmdResult off = run(base + " --no-preemption");
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_EQ(nlohmann::json::parse(off.out)["policies"]["railyard"]["preemptions"], 0);
}

TEST_F(SimCli, TableAndJobsCsv) {
  const fs::path trace = write("t.csv", kTrace);
  const fs::path jobs = dir_ / "jobs.csv";
  CmdResult r = run("--preset dgx-h100-superpod --sus 1 --trace " + trace.string() +
                    " --policy railyard,fifo --jobs-out " + jobs.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("railyard"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fifo"), std::string::npos);
  EXPECT_EQ(r.out.find("first-fit"), std::string::npos);
  EXPECT_NE(r.out.find("mean comm slowdown"), std::string::npos);
  std::istringstream csv(slurp(jobs));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line,
            "job_id,policy,submit_s,start_s,end_s,gpus,nodes,leaves_spanned,min_leaves,comm_slowdown,qos,preemptions");
  int rows = 0;
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, 10);
}

TEST_F(SimCli, BadRowsSkippedWithLineNumbersOrStopWithExit2) {
  const fs::path trace =
      write("bad.csv", std::string(kTrace) + "f,50,-1,1,vc1,x\ng,60,10,0,vc1,x\nh,70,10,999,vc1,x\n");
  CmdResult skip = run("--nodes 4 --leaf-size 2 --trace " + trace.string() + " --json --policy railyard");
  ASSERT_EQ(skip.code, 0) << skip.err;
  EXPECT_NE(skip.err.find("line 7"), std::string::npos) << skip.err;
  EXPECT_NE(skip.err.find("line 8"), std::string::npos);
  EXPECT_NE(skip.err.find("line 9"), std::string::npos);
  EXPECT_NE(skip.err.find("skipped 3 bad rows"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(skip.out)["policies"]["railyard"]["skipped_rows"], 3);
  CmdResult stop = run("--nodes 4 --leaf-size 2 --trace " + trace.string() + " --on-bad-row stop");
  EXPECT_EQ(stop.code, 2);
  EXPECT_NE(stop.err.find("line 7"), std::string::npos) << stop.err;
}

// --priority-weights as the daemon's: by default (size weight 0) the earlier 8-GPU job goes first when the
// cluster frees up; with a size weight the later 16-GPU job goes before it.
TEST_F(SimCli, PriorityWeightsChangeTheOrder) {
  const fs::path trace = write("w.csv",
                               "job_id,submit_s,duration_s,num_gpus,user,status\n"
                               "first,0,100,16,u,unknown\n"
                               "small,10,50,8,u,unknown\n"
                               "large,20,50,16,u,unknown\n");
  auto starts = [&](const std::string& extra) {
    const fs::path jobs = dir_ / "jobs.csv";
    CmdResult r = run("--nodes 2 --leaf-size 2 --trace " + trace.string() +
                      " --policy railyard --comm-share-node 0 --comm-share-multi 0 --jobs-out " + jobs.string() +
                      " --json" + extra);
    EXPECT_EQ(r.code, 0) << r.err;
    std::map<std::string, std::string> start;  // job_id -> start_s
    std::istringstream in(slurp(jobs));
    std::string line;
    std::getline(in, line);  // header: job_id,policy,submit_s,start_s,...
    while (std::getline(in, line)) {
      std::vector<std::string> f;
      std::stringstream ls(line);
      for (std::string cell; std::getline(ls, cell, ',');) f.push_back(cell);
      if (f.size() > 3) start[f[0]] = f[3];
    }
    return start;
  };
  auto by_age = starts("");
  EXPECT_EQ(by_age["small"], "100");
  EXPECT_EQ(by_age["large"], "150");
  auto by_size = starts(" --priority-weights size=1000");
  EXPECT_EQ(by_size["large"], "100");
  EXPECT_EQ(by_size["small"], "150");
  CmdResult bad = run("--nodes 2 --trace " + trace.string() + " --priority-weights size=big");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--priority-weights 'size=big': the weight must be a number"), std::string::npos)
      << bad.err;
}

TEST_F(SimCli, UnreadableTraceAndBadUsageExit2) {
  CmdResult missing = run("--nodes 4 --trace " + (dir_ / "nope.csv").string());
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("nope.csv"), std::string::npos) << missing.err;
  const fs::path trace = write("t.csv", kTrace);
  EXPECT_EQ(run("--trace " + trace.string()).code, 2);  // no cluster
  EXPECT_EQ(run("--nodes 4 --trace " + trace.string() + " --policy lottery").code, 2);
}

// --synth instead of --trace: the trace it writes with --trace-out replays to the same figures, the four
// policies come out, and a spec or option that does not apply is a usage error.
TEST_F(SimCli, SynthTraceOutReplaysTheSameAndBadSpecsExit2) {
  const fs::path out = dir_ / "synth.csv";
  const std::string cluster = "--nodes 16 --leaf-size 4 ";
  CmdResult a = run(cluster + "--synth jobs=200,seed=3,mix=1:2/8:2/16:1 --load 0.9 --json --trace-out " +
                    out.string());
  ASSERT_EQ(a.code, 0) << a.err;
  CmdResult b = run(cluster + "--trace " + out.string() + " --json");
  ASSERT_EQ(b.code, 0) << b.err;
  auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  for (const char* policy : {"railyard", "first-fit", "fifo", "slurm-tree"}) {
    ASSERT_TRUE(ja["policies"].contains(policy)) << policy;
    EXPECT_EQ(ja["policies"][policy]["jobs"], 200);
    for (const char* key : {"mean_jct_s", "p99_wait_s", "min_span_share", "makespan_s"})
      EXPECT_EQ(ja["policies"][policy][key], jb["policies"][policy][key]) << policy << " " << key;
  }
  CmdResult bad = run(cluster + "--synth jobs=10,colour=red");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("unknown key"), std::string::npos) << bad.err;
  EXPECT_EQ(run(cluster + "--synth jobs=10 --scale-gpus 8").code, 2);
  EXPECT_EQ(run(cluster + "--synth jobs=10,mix=256:1").code, 2);  // 128 GPUs in the cluster
  EXPECT_EQ(run(cluster).code, 2);                                 // neither --trace nor --synth
}

}  // namespace
