// sbatch's command line and precedence, scripts told by content, and whole-node imports (issue 47 part B).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "jobs/sbatch.hpp"
#include "jobs/validate.hpp"
#include "topology/generator.hpp"

namespace railyard::jobs {
namespace {

// The shape of an MLPerf run.sub: no GPU request, no node count; `sbatch -N 96 --ntasks-per-node=8` gives
// them.
constexpr std::string_view kRunSub = R"SUB(#!/bin/bash
#SBATCH --job-name mlperf-resnet:resnet
#SBATCH -t 00:30:00
#SBATCH --exclusive
#SBATCH --mem=0

set -euxo pipefail
srun --mpi=none --ntasks="$((SLURM_JOB_NUM_NODES * DGXNGPU))" ./run_and_time.sh
)SUB";

bool warned(const SbatchImport& imp, const std::string& text) {
  return std::any_of(imp.warnings.begin(), imp.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

std::string warnings_of(const SbatchImport& imp) {
  std::string out;
  for (const auto& w : imp.warnings) out += "  " + w + "\n";
  return out;
}

TEST(SbatchWholeNodes, AScriptWithoutAGpuRequestTakesWholeNodes) {
  const std::vector<std::string> cli = {"-N", "96", "--ntasks-per-node=8"};
  auto r = parse_sbatch_script(kRunSub, cli);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->spec.nodes, 96);
  EXPECT_EQ(r->spec.gpus, 0);
  EXPECT_EQ(r->spec.gpus_per_node, 0);
  EXPECT_TRUE(r->spec.exclusive);
  EXPECT_EQ(r->spec.time_limit_s, 30 * 60);  // from the script: the command line did not give one
  EXPECT_EQ(r->spec.name, "mlperf-resnet:resnet");
  EXPECT_TRUE(warned(*r, "no GPU request: --exclusive takes 96 whole nodes, all their GPUs"))
      << warnings_of(*r);
  EXPECT_TRUE(warned(*r, "command line: --ntasks-per-node=8: Railyard starts the script once"))
      << warnings_of(*r);
  JobSpec s = r->spec;
  s.user = "ada";
  auto valid = validate_spec(s);
  EXPECT_TRUE(valid) << (valid ? std::string() : valid.error().message);

  // Without --exclusive and without a size: one whole node, and the warning says so.
  auto bare = parse_sbatch_script("#!/bin/bash\n#SBATCH -t 5\nhostname\n");
  ASSERT_TRUE(bare) << bare.error().message;
  EXPECT_EQ(bare->spec.nodes, 1);
  EXPECT_TRUE(bare->spec.exclusive);
  EXPECT_TRUE(warned(*bare, "the job takes 1 whole node, all their GPUs, as --exclusive"))
      << warnings_of(*bare);
}

TEST(SbatchWholeNodes, TheSchedulerFillsInTheNodesGpuCount) {
  auto pod = topology::generate_superpod("dgx-h100-superpod", 1);  // 32 nodes x 8 H100
  ASSERT_TRUE(pod) << pod.error().message;
  JobSpec s;
  s.user = "ada";
  s.nodes = 2;
  s.exclusive = true;
  ASSERT_TRUE(asks_for_whole_nodes(s));
  ASSERT_TRUE(resolve_whole_nodes(s, *pod));
  EXPECT_EQ(s.gpus_per_node, 8);
  EXPECT_EQ(s.total_gpus(), 16);
  EXPECT_TRUE(validate_against_cluster(s, *pod));

  topology::ClusterBuilder b("mixed");
  ASSERT_TRUE(b.add_node("h1", "dgx-h100", {}));
  ASSERT_TRUE(b.add_node("t1", "t4-node", {"inference"}));
  auto mixed = std::move(b).build();
  ASSERT_TRUE(mixed) << mixed.error().message;
  JobSpec any;
  any.user = "ada";
  any.nodes = 1;
  any.exclusive = true;
  auto refused = resolve_whole_nodes(any, *mixed);
  ASSERT_FALSE(refused);
  EXPECT_NE(
      refused.error().message.find("nodes=1 (whole nodes): the nodes have 4 or 8 GPUs; set gpus_per_node"),
      std::string::npos)
      << refused.error().message;
  any.gpu_type = "H100";  // one size among the nodes it may use
  ASSERT_TRUE(resolve_whole_nodes(any, *mixed));
  EXPECT_EQ(any.gpus_per_node, 8);

  JobSpec unresolved;  // a caller that forgot to resolve is told, not given a zero-GPU job
  unresolved.user = "ada";
  unresolved.nodes = 1;
  unresolved.exclusive = true;
  unresolved.features = {"inference"};
  JobSpec none = unresolved;
  none.gpu_type = "H100";
  auto st = validate_against_cluster(none, *mixed);
  EXPECT_FALSE(st);
  JobSpec not_whole;  // exclusive without nodes is still "no GPUs"
  not_whole.user = "ada";
  not_whole.exclusive = true;
  EXPECT_FALSE(validate_spec(not_whole));
}

TEST(SbatchPrecedence, TheCommandLineOverridesTheScriptAndTheRestStillCounts) {
  const std::string script =
      "#!/bin/bash\n#SBATCH -N 4 --gres=gpu:a100:8\n#SBATCH --time=2:00:00 -J from-script\n#SBATCH "
      "--exclusive -C nvme\nhostname\n";
  const std::vector<std::string> cli = {"--nodes=2", "--gpus-per-node", "h100:4", "-C", "ib"};
  auto r = parse_sbatch_script(script, cli);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->spec.nodes, 2);
  EXPECT_EQ(r->spec.gpus_per_node, 4);
  EXPECT_EQ(r->spec.gpu_type, "H100");  // the command line's type wins over the script's, no conflict
  EXPECT_EQ(r->spec.features, std::vector<std::string>{"ib"});  // -C replaced, not added to
  EXPECT_EQ(r->spec.time_limit_s, 7200);
  EXPECT_EQ(r->spec.name, "from-script");
  EXPECT_TRUE(r->spec.exclusive);

  auto bad = parse_sbatch_script(script, std::vector<std::string>{"--time=soon"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("command line: --time=soon: expected MM"), std::string::npos)
      << bad.error().message;
  auto noted = parse_sbatch_script(script, std::vector<std::string>{"--mail-type=ALL", "-H", "--parsable"});
  ASSERT_TRUE(noted) << noted.error().message;
  EXPECT_TRUE(warned(*noted, "command line: --mail-type=ALL ignored: Railyard sends no mail"))
      << warnings_of(*noted);
  EXPECT_TRUE(noted->effects.hold);
  EXPECT_TRUE(noted->effects.parsable);
  EXPECT_FALSE(noted->effects.wait);
}

// `railyard sbatch --container-image=... run.sub`: pyxis' options on the command line override the
// script's, as sbatch's own do.
TEST(SbatchPrecedence, ContainerOptionsOnTheCommandLineOverrideTheScripts) {
  const std::string script =
      "#!/bin/bash\n#SBATCH -G 8 --container-image=ubuntu:22.04 --container-mounts=/lustre:/data:ro\n"
      "#SBATCH --container-workdir=/work\nhostname\n";
  const std::vector<std::string> cli = {"--container-image", "nvcr.io#nvidia/pytorch:24.04-py3",
                                        "--container-writable", "--container-mounts=/scratch:/scratch"};
  auto r = parse_sbatch_script(script, cli);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->spec.container);
  EXPECT_EQ(r->spec.container->image, "nvcr.io/nvidia/pytorch:24.04-py3");
  EXPECT_EQ(r->spec.container->mounts, (std::vector<Mount>{{"/scratch", "/scratch", false}}));
  EXPECT_EQ(r->spec.container->workdir, "/work") << "the script's, not overridden";
  EXPECT_TRUE(r->spec.container->writable);

  auto from_cli = parse_sbatch_script("#!/bin/bash\n#SBATCH -G 1\nhostname\n",
                                      std::vector<std::string>{"--container-image=ubuntu"});
  ASSERT_TRUE(from_cli) << from_cli.error().message;
  ASSERT_TRUE(from_cli->spec.container);
  EXPECT_EQ(from_cli->spec.container->image, "ubuntu");
  auto bad = parse_sbatch_script(script, std::vector<std::string>{"--container-mounts=/a:b"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("command line: --container-mounts=/a:b: mount \"/a:b\""),
            std::string::npos)
      << bad.error().message;

  // A flag without a value does not swallow the script's name.
  auto inv = split_sbatch_args(std::vector<std::string>{"--container-writable", "run.sub"});
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->script, "run.sub");
}

TEST(SbatchCommandLine, SplitsOptionsScriptAndArguments) {
  const std::vector<std::string> args = {"-N",       "2", "--ntasks-per-node=8", "-t5", "--wait", "run.sub",
                                         "--epochs", "3"};
  auto inv = split_sbatch_args(args);
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->options, (std::vector<std::string>{"-N", "2", "--ntasks-per-node=8", "-t5", "--wait"}));
  EXPECT_EQ(inv->script, "run.sub");
  EXPECT_EQ(inv->script_args, (std::vector<std::string>{"--epochs", "3"}));

  // An option sbatch lacks takes no value here, so it cannot swallow the script's name.
  auto unknown = split_sbatch_args(std::vector<std::string>{"--frobnicate", "job.sh"});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->script, "job.sh");

  auto wrap = split_sbatch_args(std::vector<std::string>{"-G", "1", "--wrap", "nvidia-smi -L"});
  ASSERT_TRUE(wrap);
  EXPECT_EQ(wrap->wrap, "nvidia-smi -L");
  EXPECT_FALSE(wrap->script);
  EXPECT_EQ(wrap->options, (std::vector<std::string>{"-G", "1"}));

  auto stdin_script = split_sbatch_args(std::vector<std::string>{"-N1"});
  ASSERT_TRUE(stdin_script);
  EXPECT_FALSE(stdin_script->script);

  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"-N"}, "-N: needs a value"},
      {{"-N", "1", ":", "-N", "2", "a.sh"}, "heterogeneous jobs"},
      {{"--wrap=hostname", "a.sh"}, "--wrap and a script \"a.sh\""},
  };
  for (const auto& [words, want] : bad) {
    auto r = split_sbatch_args(words);
    ASSERT_FALSE(r) << want;
    EXPECT_NE(r.error().message.find(want), std::string::npos) << r.error().message;
  }
}

TEST(SbatchCommandLine, ScriptsAreToldByContent) {
  EXPECT_EQ(why_not_a_batch_script(kRunSub), "");
  EXPECT_EQ(why_not_a_batch_script("#!/bin/sh\n# comment\n\n#SBATCH -N 1\nhostname\n"), "");
  EXPECT_EQ(why_not_a_batch_script("#SBATCH -N 1\nhostname\n"), "its first line is not a \"#!\" line");
  EXPECT_EQ(why_not_a_batch_script("#!/bin/sh\nhostname\n#SBATCH -N 1\n"),
            "it has no #SBATCH line before its first command");
  EXPECT_EQ(why_not_a_batch_script("{\"gpus\": 8}"), "its first line is not a \"#!\" line");
}

// jobs/README.md's import table names every sbatch option the importer knows, mapped or ignored.
TEST(SbatchCommandLine, TheReadmeListsEveryOption) {
  std::ifstream in(RAILYARD_JOBS_README);
  ASSERT_TRUE(in) << RAILYARD_JOBS_README;
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  const auto docs = sbatch_option_docs();
  EXPECT_GT(docs.size(), 90u);
  for (const auto& d : docs)
    EXPECT_NE(readme.find("`--" + std::string(d.long_name) + "`"), std::string::npos)
        << "--" << d.long_name << " is not in jobs/README.md's import table";
}

}  // namespace
}  // namespace railyard::jobs
