// Runs the real `railyard` binary (RAILYARD_BIN) through the shell and checks outputs and exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace {

using Json = nlohmann::json;

struct RunResult {
  int code = -1;
  std::string out;
  std::string err;
};

class CliTopo : public ::testing::Test {
 protected:
  void SetUp() override {
    // A parameterized test's name has a '/' ("ExitWithAMessage/3"): one directory level, so TearDown removes
    // all of it.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = std::filesystem::path(::testing::TempDir()) / ("railyard_cli_" + std::to_string(::getpid()) + "_" + name);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }
  std::string read(const std::string& name) const {
    std::ifstream in(path(name));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // `args` go through /bin/sh: quote host lists ('dgx[001-004]').
  RunResult run(const std::string& args) const {
    std::string err_file = path("stderr.txt");
    std::string command = std::string(RAILYARD_BIN) + " " + args + " 2>'" + err_file + "'";
    RunResult r;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return r;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.out.append(buf, n);
    int status = ::pclose(pipe);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.err = read("stderr.txt");
    return r;
  }
  Json run_json(const std::string& args) const {
    RunResult r = run(args);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    return Json::parse(r.out, nullptr, false);
  }
  void generate_a100_pod() const {
    RunResult r = run("topo generate --preset dgx-a100-superpod --sus 3 -o " + path("pod.json"));
    ASSERT_EQ(r.code, 0) << r.err;
  }

  std::filesystem::path dir_;
};

TEST_F(CliTopo, GenerateThenShowJsonGivesNodesAndLeaves) {
  generate_a100_pod();
  Json show = run_json("topo show " + path("pod.json") + " --json");
  ASSERT_TRUE(show.is_object());
  EXPECT_EQ(show["name"], "dgx-a100-superpod-3su");
  EXPECT_EQ(show["gpus"], 480);
  ASSERT_EQ(show["nodes"].size(), 60u);
  EXPECT_EQ(show["nodes"][0]["name"], "dgx001");
  EXPECT_EQ(show["nodes"][0]["leaf"], "su1");
  EXPECT_EQ(show["nodes"][59]["leaf"], "su3");
  EXPECT_EQ(show["nodes"][0]["gpu_type"], "A100");
  EXPECT_EQ(show["nodes"][0]["profile"], "dgx-a100");
  ASSERT_EQ(show["leaves"].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(show["leaves"][i]["name"], "su" + std::to_string(i + 1));
  EXPECT_EQ(show["leaves"][1]["nodes"], "dgx[021-040]");
}

TEST_F(CliTopo, ShowPrintsATreeWithTotals) {
  generate_a100_pod();
  RunResult r = run("topo show " + path("pod.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("su2  [leaf, 8 switches, rail-optimized"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dgx[041-060]: 20 x dgx-a100 (8 x A100)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("totals: 60 nodes, 480 GPUs"), std::string::npos) << r.out;
}

TEST_F(CliTopo, GenerateFatTreeToStdoutAndSlurm) {
  Json tree = run_json("topo generate --nodes 100 --leaf-size 32 --spine-size 2 --profile dgx-h200");
  EXPECT_EQ(tree["name"], "fat-tree-100");
  RunResult conf = run("topo generate --nodes 100 --leaf-size 32 --format slurm");
  ASSERT_EQ(conf.code, 0) << conf.err;
  EXPECT_NE(conf.out.find("SwitchName=leaf001 Nodes=node[001-032]"), std::string::npos) << conf.out;
}

TEST_F(CliTopo, CostJsonParsesBack) {
  generate_a100_pod();
  Json in_su = run_json("topo cost " + path("pod.json") + " --nodes 'dgx[001-004]' --bytes 1G --json");
  EXPECT_EQ(in_su["gpus"], 32);
  EXPECT_EQ(in_su["bytes"], 1073741824);
  EXPECT_GT(in_su["seconds"].get<double>(), 0);
  EXPECT_LE(in_su["seconds"].get<double>(), in_su["ring_seconds"].get<double>());
  EXPECT_LE(in_su["seconds"].get<double>(), in_su["tree_seconds"].get<double>());
  EXPECT_GT(in_su["bus_gbytes_s"].get<double>(), 150);
  EXPECT_EQ(in_su["leaves_spanned"], 1);
  EXPECT_EQ(in_su["min_leaves"], 1);
  EXPECT_EQ(in_su["bottleneck_gbits_s"], 200.0);
  EXPECT_EQ(in_su["span"], "leaf");
  Json across =
      run_json("topo cost " + path("pod.json") + " --nodes 'dgx[001-002,021-022]' --gpus-per-node 4 --json");
  EXPECT_EQ(across["gpus"], 16);
  EXPECT_EQ(across["leaves_spanned"], 2);
  EXPECT_EQ(across["span"], "spine");
  EXPECT_GT(across["seconds"].get<double>(), in_su["seconds"].get<double>() / 4);
  RunResult text = run("topo cost " + path("pod.json") + " --nodes 'dgx[001-004]' --bytes 64K");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("allreduce of 64 KiB over 32 GPUs on 4 nodes (dgx[001-004])"), std::string::npos);
}

TEST_F(CliTopo, ConvertJsonToConfAndBackIsIdentical) {
  generate_a100_pod();
  ASSERT_EQ(run("topo convert " + path("pod.json") + " " + path("pod.conf")).code, 0);
  EXPECT_NE(read("pod.conf").find("SwitchName=su1 Nodes=dgx[001-020]"), std::string::npos)
      << read("pod.conf");
  ASSERT_EQ(run("topo convert " + path("pod.conf") + " " + path("back.json")).code, 0);
  EXPECT_EQ(read("back.json"), read("pod.json"));
  RunResult to_stdout = run("topo convert " + path("pod.json") + " - --to slurm");
  EXPECT_EQ(to_stdout.out, read("pod.conf"));
}

TEST_F(CliTopo, TableComparesCompactAndScattered) {
  Json table = run_json("topo table --preset dgx-h100-superpod --sus 4 --json");
  ASSERT_EQ(table["rows"].size(), 5u);
  for (const Json& row : table["rows"]) {
    EXPECT_LE(row["compact"]["leaves_spanned"], row["scattered"]["leaves_spanned"]) << row.dump();
    EXPECT_LE(row["compact"]["seconds"].get<double>(), row["scattered"]["seconds"].get<double>() * 1.0000001);
  }
  EXPECT_EQ(table["rows"][4]["gpus"], 512);
  EXPECT_EQ(table["rows"][2]["scattered"]["leaves_spanned"], 4);
  RunResult small = run("topo table --preset dgx-a100-superpod --sus 1");
  ASSERT_EQ(small.code, 0) << small.err;
  EXPECT_NE(small.out.find("slowdown"), std::string::npos);
  EXPECT_EQ(small.out.find("   256 "), std::string::npos) << "160 GPUs: a 256-GPU job does not fit";
}

struct BadRun {
  std::string name;
  std::string file;  // written to bad.<ext> when not empty
  std::string ext;
  std::string args;  // "%" stands for the file's path
  int code;
  std::string message;  // a substring of stderr
};
void PrintTo(const BadRun& b, std::ostream* os) { *os << b.name; }

class CliTopoErrors : public CliTopo, public ::testing::WithParamInterface<BadRun> {};

TEST_P(CliTopoErrors, ExitWithAMessage) {
  const BadRun& b = GetParam();
  std::string file = path("bad." + b.ext);
  if (!b.file.empty()) write("bad." + b.ext, b.file);
  std::string args = b.args;
  if (size_t p = args.find('%'); p != std::string::npos) args.replace(p, 1, file);
  RunResult r = run(args);
  EXPECT_EQ(r.code, b.code) << r.err;
  EXPECT_NE(r.err.find(b.message), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("AddressSanitizer"), std::string::npos) << r.err;
}

constexpr const char* kPod = R"({"nodes": [{"names": "dgx[001-004]"}], "switches": [
  {"name": "su1", "level": "leaf", "nodes": "dgx[001-004]"}]})";

INSTANTIATE_TEST_SUITE_P(
    Cases, CliTopoErrors,
    ::testing::Values(
        BadRun{"malformed_json", "{\n  \"nodes\": [\n    {\"name\": \"a\"},\n  ]\n}", "json", "topo show %",
               2, "line 4, column 3: malformed JSON"},
        BadRun{"unknown_field", R"({"nodes": [{"name": "a", "gpus": 8}]})", "json", "topo show %", 2,
               "nodes[0].gpus: unknown field"},
        BadRun{"unknown_preset", "", "json", "topo generate --preset dgx-b900-superpod", 2,
               "unknown preset \"dgx-b900-superpod\""},
        BadRun{"no_preset_or_nodes", "", "json", "topo generate", 2, "give either --preset"},
        BadRun{"undefined_switch", "SwitchName=s0 Nodes=n[1-2]\nSwitchName=top Switches=s0,s1\n", "conf",
               "topo show %", 2, "line 2: switch \"top\" names undefined switch \"s1\""},
        BadRun{"loop", "SwitchName=s0 Nodes=n1\nSwitchName=a Switches=s0,b\nSwitchName=b Switches=a\n",
               "conf", "topo cost % --nodes n1", 2, "switches form a loop: a -> b -> a"},
        BadRun{"duplicate_nodes", R"({"nodes": [{"names": "n[1-2]"}, {"name": "n1"}]})", "json",
               "topo show % --json", 2, "nodes[1]: duplicate node name \"n1\""},
        BadRun{"two_switches", "SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n2\n", "conf", "topo show %",
               2, "line 2: node \"n2\" is under two switches"},
        BadRun{"unknown_node", kPod, "json", "topo cost % --nodes 'dgx[001-002],dgx009'", 2,
               "--nodes: unknown node \"dgx009\""},
        BadRun{"bad_hostlist", kPod, "json", "topo cost % --nodes 'dgx[001-'", 2, "--nodes: unbalanced '['"},
        BadRun{"too_many_gpus", kPod, "json", "topo cost % --nodes dgx001 --gpus-per-node 9", 2,
               "node \"dgx001\" has 8 GPUs"},
        BadRun{"bad_size", kPod, "json", "topo cost % --nodes dgx001 --bytes 12X", 2,
               "--bytes: bad size \"12X\""},
        BadRun{"unknown_profile", "SwitchName=s0 Nodes=n1\n", "conf", "topo show % --profile dgx-z1", 2,
               "unknown profile \"dgx-z1\""},
        BadRun{"convert_extension", kPod, "json", "topo convert % out.yaml", 2, "pass --to json|slurm"},
        BadRun{"missing_file", "", "json", "topo show %", 3, "cannot open"},
        BadRun{"missing_argument", "", "json", "topo cost", 2, "required"},
        BadRun{"table_without_input", "", "json", "topo table", 2, "give either a cluster FILE or --preset"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
