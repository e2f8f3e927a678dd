#include "jobs/validate.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "topology/generator.hpp"

namespace railyard::jobs {
namespace {

JobSpec good_batch() {
  JobSpec s;
  s.name = "bert";
  s.user = "ada";
  s.gpus = 16;
  s.time_limit_s = 3600;
  s.launcher = Launcher::kEnv;
  s.command = {"python", "train.py"};
  return s;
}

struct Case {
  std::string what;
  std::function<void(JobSpec&)> change;
  std::string expected;  // substring of the error
};

TEST(ValidateSpec, AcceptsGoodSpecs) {
  EXPECT_TRUE(validate_spec(good_batch()));
  JobSpec svc = good_batch();
  svc.kind = JobKind::kService;
  svc.gpus = 1;
  svc.mig = "1g.10gb";
  svc.replicas = 8;
  svc.time_limit_s = 0;
  auto st = validate_spec(svc);
  EXPECT_TRUE(st) << st.error().message;
  JobSpec split = good_batch();
  split.gpus = 0;
  split.nodes = 2;
  split.gpus_per_node = 8;
  EXPECT_TRUE(validate_spec(split));
  split.gpus = 16;  // agreeing is fine
  EXPECT_TRUE(validate_spec(split));
  JobSpec boxed = good_batch();
  boxed.container = ContainerSpec{"nvcr.io/nvidia/pytorch:24.04-py3", {{"/lustre", "/data", true}}, "/workspace", false, ""};
  st = validate_spec(boxed);
  EXPECT_TRUE(st) << st.error().message;
}

TEST(ValidateSpec, EveryRuleNamesItsField) {
  // clang-format off
  const std::vector<Case> cases = {
      {"negative gpus", [](JobSpec& s) { s.gpus = -1; }, "gpus=-1: must be >= 0"},
      {"negative nodes", [](JobSpec& s) { s.nodes = -2; }, "nodes=-2: must be >= 0"},
      {"no gpus", [](JobSpec& s) { s.gpus = 0; }, "gpus: the job asks for no GPUs"},
      {"gpus_per_node alone", [](JobSpec& s) { s.gpus = 0; s.gpus_per_node = 8; },
       "gpus: the job asks for no GPUs"},
      {"disagree", [](JobSpec& s) { s.nodes = 2; s.gpus_per_node = 4; },
       "gpus=16: disagrees with nodes x gpus_per_node = 2 x 4 = 8"},
      {"more nodes than gpus", [](JobSpec& s) { s.nodes = 20; }, "nodes=20: more nodes than gpus=16"},
      {"uneven", [](JobSpec& s) { s.gpus = 12; s.gpus_per_node = 8; },
       "gpus=12: not a multiple of gpus_per_node=8"},
      {"huge", [](JobSpec& s) { s.gpus = 0; s.nodes = 100000; s.gpus_per_node = 100000; },
       "gpus: 10000000000 GPUs in all; at most 1000000"},
      {"negative time", [](JobSpec& s) { s.time_limit_s = -5; }, "time_limit=-5: must be >= 0"},
      {"batch without limit", [](JobSpec& s) { s.time_limit_s = 0; },
       "time_limit: a batch job needs a limit > 0"},
      {"too long", [](JobSpec& s) { s.time_limit_s = 4000LL * 86400; }, "longer than the 3650-day maximum"},
      {"priority", [](JobSpec& s) { s.priority = 2000; }, "priority=2000: must be between -1000 and 1000"},
      {"batch replicas", [](JobSpec& s) { s.replicas = 3; }, "replicas=3: only services have replicas"},
      {"service replicas", [](JobSpec& s) { s.kind = JobKind::kService; s.replicas = 0; },
       "replicas=0: a service needs at least 1"},
      {"unknown mig", [](JobSpec& s) { s.gpus = 1; s.mig = "1g.11gb"; },
       R"(mig "1g.11gb": unknown MIG profile (did you mean "1g.10gb"?) (known: 1g.5gb, 1g.10gb)"},
      {"mig size", [](JobSpec& s) { s.mig = "1g.10gb"; },
       R"(mig "1g.10gb": a MIG job takes exactly one slice, not 16)"},
      {"mig exclusive", [](JobSpec& s) { s.gpus = 1; s.mig = "1g.10gb"; s.exclusive = true; },
       "exclusive: a MIG slice job cannot take whole nodes"},
      {"mpi without command", [](JobSpec& s) { s.launcher = Launcher::kMpi; s.command.clear(); },
       R"(command: launcher "mpi" needs a command)"},
      {"empty program", [](JobSpec& s) { s.command[0].clear(); }, "command[0]: empty program name"},
      {"NUL in argv", [](JobSpec& s) { s.command[1] = std::string("a\0b", 3); },
       "command[1]: contains a NUL byte"},
      {"bad utf8", [](JobSpec& s) { s.command[1] = "\xff"; }, "command[1]: not valid UTF-8"},
      {"env name", [](JobSpec& s) { s.env["A=B"] = "1"; }, R"(env: invalid variable name "A=B")"},
      {"env value", [](JobSpec& s) { s.env["A"] = std::string("\0", 1); }, "env.A: contains a NUL byte"},
      {"relative workdir", [](JobSpec& s) { s.workdir = "data"; },
       R"(workdir "data": must be an absolute path)"},
      {"long name", [](JobSpec& s) { s.name = std::string(300, 'n'); }, "name: 300 bytes; at most 256"},
      {"no user", [](JobSpec& s) { s.user.clear(); }, "user: missing"},
      {"empty feature", [](JobSpec& s) { s.features = {"a", ""}; },
       "features[1]: empty"},
      {"nan target", [](JobSpec& s) { s.target = Target{"eval_accuracy", std::nan("")}; },
       "target.value: must be a finite number"},
      {"inf target", [](JobSpec& s) { s.target = Target{"x", std::numeric_limits<double>::infinity()}; },
       "target.value: must be a finite number"},
      {"empty metric", [](JobSpec& s) { s.target = Target{"", 0.9}; },
       "target.metric: empty"},
      {"bad afterok", [](JobSpec& s) { s.afterok = {3, -1}; },
       "afterok: job id -1 is not positive"},
      {"aftercorr on a job that is not an array",
       [](JobSpec& s) { s.after = {{Dependency::Type::kAfterCorr, 7}}; },
       "after: \"aftercorr:7\": aftercorr is for arrays (each task waits for the task with its index); this job "
       "is not one"},
      {"dependency on no job", [](JobSpec& s) { s.after = {{Dependency::Type::kAfterAny, 0}}; },
       "after: \"afterany:0\" names no job or task"},
      {"container without an image", [](JobSpec& s) { s.container = ContainerSpec{}; },
       "container.image: missing"},
      {"container mount over its root", [](JobSpec& s) { s.container = ContainerSpec{"ubuntu", {{"/a", "/", false}}, "", false, ""}; },
       R"(container.mounts[0] "/a:/": target "/": cannot mount over the container's root)"},
  };
  // clang-format on
  for (const Case& c : cases) {
    JobSpec s = good_batch();
    c.change(s);
    auto st = validate_spec(s);
    ASSERT_FALSE(st) << c.what;
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(st.error().message.find(c.expected), std::string::npos)
        << c.what << "\nerror: " << st.error().message << "\nwanted: " << c.expected;
  }
}

TEST(ValidateSpec, ReportsEveryProblemAtOnce) {
  JobSpec s = good_batch();
  s.user.clear();
  s.gpus = -1;
  s.priority = 5000;
  auto problems = spec_problems(s);
  ASSERT_EQ(problems.size(), 3u);
  auto st = validate_spec(s);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message,
            "user: missing (who runs the job?); gpus=-1: must be >= 0; priority=5000: must be between -1000 "
            "and 1000");
}

topology::Cluster h100_pod() {
  auto c = topology::generate_superpod("dgx-h100-superpod", 1);  // 32 nodes x 8 H100
  EXPECT_TRUE(c) << c.error().message;
  return std::move(c).value();
}

topology::Cluster mixed_cluster() {
  topology::ClusterBuilder b("mixed");
  EXPECT_TRUE(b.add_node("a1", "dgx-a100", {"ib-hdr"}));
  EXPECT_TRUE(b.add_node("a2", "dgx-a100", {"ib-hdr", "nvme"}));
  EXPECT_TRUE(b.add_node("h1", "dgx-h100", {"ib-ndr"}));
  EXPECT_TRUE(b.add_node("t1", "t4-node", {"inference"}));
  auto c = std::move(b).build();
  EXPECT_TRUE(c) << c.error().message;
  return std::move(c).value();
}

topology::Cluster t4_cluster() {
  topology::FatTreeSpec spec;
  spec.nodes = 4;
  spec.profile = "t4-node";
  auto c = topology::generate_fat_tree(spec);
  EXPECT_TRUE(c) << c.error().message;
  return std::move(c).value();
}

void expect_problem(const JobSpec& s, const topology::Cluster& c, const std::string& expected) {
  auto st = validate_against_cluster(s, c);
  ASSERT_FALSE(st) << expected;
  EXPECT_NE(st.error().message.find(expected), std::string::npos)
      << "error: " << st.error().message << "\nwanted: " << expected;
}

TEST(ValidateAgainstCluster, AcceptsWhatFits) {
  topology::Cluster pod = h100_pod();
  JobSpec s = good_batch();
  s.gpus = 256;
  s.gpu_type = "H100";
  EXPECT_TRUE(validate_against_cluster(s, pod));
  s.gpus = 1;
  s.mig = "1g.10gb";
  auto st = validate_against_cluster(s, pod);
  EXPECT_TRUE(st) << st.error().message;
}

TEST(ValidateAgainstCluster, CannotFitCases) {
  topology::Cluster pod = h100_pod(), mixed = mixed_cluster(), t4 = t4_cluster();
  struct ClusterCase {
    std::function<void(JobSpec&)> change;
    const topology::Cluster* cluster;
    std::string expected;
  };
  // clang-format off
  const std::vector<ClusterCase> cases = {
      {[](JobSpec& s) { s.gpus = 0; s.nodes = 2; s.gpus_per_node = 9; },
       &pod, "gpus_per_node=9: no node type has 9 GPUs (largest: 8)"},
      {[](JobSpec& s) { s.gpus = 0; s.nodes = 1; s.gpus_per_node = 9; s.gpu_type = "H100"; },
       &pod, "gpus_per_node=9: no node of type H100 has 9 GPUs (largest: 8)"},
      {[](JobSpec& s) { s.gpu_type = "B300"; },
       &mixed, R"(gpu_type "B300": no node has it (cluster has: A100, H100, T4))"},
      {[](JobSpec& s) { s.gpus = 300; s.gpu_type = "H100"; },
       &pod, "gpus: needs 300 GPUs of type H100; the cluster has 256"},
      {[](JobSpec& s) { s.gpus = 300; }, &pod, "gpus: needs 300 GPUs; the cluster has 256"},
      {[](JobSpec& s) { s.gpus = 0; s.nodes = 40; s.gpus_per_node = 8; s.gpu_type = "H100"; },
       &pod, "nodes=40: needs 40 nodes of type H100 with at least 8 GPUs; the cluster has 32"},
      {[](JobSpec& s) { s.gpus = 0; s.nodes = 2; s.gpus_per_node = 8; s.gpu_type = "h100"; },
       &mixed, "nodes=2: needs 2 nodes of type h100 with at least 8 GPUs; the cluster has 1"},
      {[](JobSpec& s) { s.gpus = 24; s.features = {"ib-hdr"}; },
       &mixed, "gpus: needs 24 GPUs with features ib-hdr; the cluster has 16"},
      {[](JobSpec& s) { s.features = {"ib-xdr"}; }, &mixed, R"(features: no node has feature "ib-xdr")"},
      {[](JobSpec& s) { s.features = {"ib-ndr", "nvme"}; },
       &mixed, "features: no node has all of ib-ndr, nvme"},
      {[](JobSpec& s) { s.gpu_type = "H100"; s.features = {"nvme"}; },
       &mixed, "features: no node of type H100 has all of nvme"},
      {[](JobSpec& s) { s.kind = JobKind::kService; s.time_limit_s = 0; s.gpus = 8; s.replicas = 40; },
       &pod, "replicas=40: 40 x 8 needs 320 GPUs; the cluster has 256"},
      {[](JobSpec& s) { s.gpus = 1; s.mig = "1g.10gb"; s.gpu_type = "T4"; },
       &t4, R"(mig "1g.10gb": T4 GPUs have no MIG)"},
      {[](JobSpec& s) { s.gpus = 1; s.mig = "1g.10gb"; },
       &t4, R"(mig "1g.10gb": no GPU in this cluster supports MIG)"},
      {[](JobSpec& s) { s.gpus = 1; s.mig = "1g.5gb"; },
       &pod, R"(mig "1g.5gb": a profile of A100-40GB GPUs; the MIG GPUs here are H100 80 GB)"},
  };
  // clang-format on
  for (const ClusterCase& c : cases) {
    JobSpec s = good_batch();
    c.change(s);
    expect_problem(s, *c.cluster, c.expected);
  }
}

TEST(ValidateAgainstCluster, JoinsSpecAndClusterProblems) {
  JobSpec s = good_batch();
  s.user.clear();
  s.gpu_type = "B300";
  s.features = {"nope"};
  auto st = validate_against_cluster(s, mixed_cluster());
  ASSERT_FALSE(st);
  EXPECT_EQ(
      st.error().message,
      R"(user: missing (who runs the job?); gpu_type "B300": no node has it (cluster has: A100, H100, T4); )"
      R"(features: no node has feature "nope")");
  EXPECT_EQ(cluster_problems(s, mixed_cluster()).size(), 2u);
}

TEST(ValidateAgainstCluster, InsaneSizesAreSafe) {
  JobSpec s = good_batch();
  s.gpus = 0;
  s.nodes = std::numeric_limits<int>::max();
  s.gpus_per_node = std::numeric_limits<int>::max();
  auto st = validate_against_cluster(s, h100_pod());
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("GPUs in all"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace railyard::jobs
