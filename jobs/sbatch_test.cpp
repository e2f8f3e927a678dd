#include "jobs/sbatch.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "jobs/validate.hpp"

namespace railyard::jobs {
namespace {

constexpr std::string_view kRealistic = R"(#!/bin/bash
# Pretrain BERT-large on 4 DGX H100 nodes.
#SBATCH --job-name=bert-large
#SBATCH -N 4
#SBATCH --ntasks-per-node=8

#SBATCH --gpus-per-node=8
#SBATCH --gres=gpu:h100:8
#SBATCH --time=1-12:00:00
#SBATCH -p dgx
#SBATCH --qos=high
#SBATCH --dependency=afterok:101:102
#SBATCH -A nlp-research
#SBATCH --exclusive --requeue
#SBATCH --output=logs/%x-%j.out
#SBATCH -e logs/%x-%j.err
#SBATCH --mail-type=END
#SBATCH --mail-user ada@example.com   # who to tell
## SBATCH --nodes=128 (disabled the usual way)

module load cuda/12.2
export NCCL_DEBUG=WARN
srun python pretrain.py --config bert-large.yaml --nodes "$SLURM_NNODES"
#SBATCH --nodes=64
)";

bool has_warning(const SbatchImport& imp, const std::string& text) {
  return std::any_of(imp.warnings.begin(), imp.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

std::string all_warnings(const SbatchImport& imp) {
  std::string out;
  for (const auto& w : imp.warnings) out += "  " + w + "\n";
  return out;
}

TEST(Sbatch, ImportsARealisticScript) {
  auto r = parse_sbatch_script(kRealistic);
  ASSERT_TRUE(r) << r.error().message;
  const JobSpec& s = r->spec;
  EXPECT_EQ(s.name, "bert-large");
  EXPECT_EQ(s.nodes, 4);
  EXPECT_EQ(s.gpus_per_node, 8);
  EXPECT_EQ(s.total_gpus(), 32);
  EXPECT_EQ(s.gpu_type, "H100");
  EXPECT_EQ(s.time_limit_s, 86400 + 12 * 3600);
  EXPECT_EQ(s.features, std::vector<std::string>{"dgx"});
  EXPECT_EQ(s.qos, Qos::kHigh);
  EXPECT_EQ(s.afterok, (std::vector<JobId>{101, 102}));
  EXPECT_EQ(s.project, "nlp-research");
  EXPECT_TRUE(s.exclusive);
  EXPECT_TRUE(s.requeue);
  EXPECT_EQ(s.launcher, Launcher::kNone);
  EXPECT_EQ(s.command, (std::vector<std::string>{"/bin/bash", "-c", std::string(kRealistic)}));

  const SbatchImport& imp = *r;
  const std::vector<std::string> expected = {
      "line 5: --ntasks-per-node=8: Railyard starts the script once",
      "line 15: #SBATCH --output=logs/%x-%j.out ignored: Railyard keeps per-rank logs",
      "line 16: #SBATCH -e logs/%x-%j.err ignored: Railyard keeps per-rank logs",
      "line 17: #SBATCH --mail-type=END ignored: Railyard sends no mail",
      "line 18: #SBATCH --mail-user ada@example.com ignored: Railyard sends no mail",
      "line 23: srun: Railyard runs this script once, on the job's first node",
      "line 23: SLURM_* variables: Railyard does not set them",
      "line 24: #SBATCH after the first command ignored",
  };
  ASSERT_EQ(imp.warnings.size(), expected.size()) << all_warnings(imp);
  for (size_t i = 0; i < expected.size(); ++i)  // in line order
    EXPECT_NE(imp.warnings[i].find(expected[i]), std::string::npos) << expected[i] << "\ngot:\n"
                                                                    << all_warnings(imp);

  JobSpec with_user = s;
  with_user.user = "ada";
  auto st = validate_spec(with_user);
  EXPECT_TRUE(st) << st.error().message;
}

TEST(Sbatch, OptionForms) {
  auto r = parse_sbatch_script(
      "#!/bin/sh\n#SBATCH -N2 -t 30 -J 'two words' -G a100:16\n#SBATCH --account proj --qos=SCAVENGER\n"
      "#SBATCH --chdir=/scratch -C \"nvme&ib\" -d afterok:5\n#SBATCH -d afterany:6_2,afterok:5\necho hi\n");
  ASSERT_TRUE(r) << r.error().message;
  const JobSpec& s = r->spec;
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.time_limit_s, 1800);
  EXPECT_EQ(s.name, "two words");
  EXPECT_EQ(s.gpus, 16);
  EXPECT_EQ(s.gpu_type, "A100");
  EXPECT_EQ(s.project, "proj");
  EXPECT_EQ(s.qos, Qos::kScavenger);
  EXPECT_EQ(s.workdir, "/scratch");
  EXPECT_EQ(s.features, (std::vector<std::string>{"nvme", "ib"}));
  EXPECT_EQ(s.afterok, std::vector<JobId>{5});  // given twice, kept once
  EXPECT_EQ(s.after, (std::vector<Dependency>{{Dependency::Type::kAfterAny, 6, 2}}));
  EXPECT_TRUE(r->warnings.empty()) << all_warnings(*r);
}

TEST(Sbatch, GpuDirectives) {
  struct Case {
    std::string directive;
    int nodes, gpus, gpus_per_node;
    std::string type;
  };
  const std::vector<Case> cases = {
      {"--gres=gpu:4", 1, 0, 4, ""},
      {"--gres=gpu", 1, 0, 1, ""},
      {"--gres=gpu:a100", 1, 0, 1, "A100"},
      {"--gres=gpu:h100:8,nvme:1", 1, 0, 8, "H100"},
      {"--gpus-per-node=h200:8", 1, 0, 8, "H200"},
      {"--gpus=8", 0, 8, 0, ""},
      {"-N 3 --gpus-per-node 8", 3, 0, 8, ""},
      {"--gres=gpu:nvidia_h100_80gb_hbm3:8", 1, 0, 8, "H100"},
  };
  for (const Case& c : cases) {
    auto r = parse_sbatch_script("#SBATCH --time=10 " + c.directive + "\nhostname\n");
    ASSERT_TRUE(r) << c.directive << ": " << r.error().message;
    EXPECT_EQ(r->spec.nodes, c.nodes) << c.directive;
    EXPECT_EQ(r->spec.gpus, c.gpus) << c.directive;
    EXPECT_EQ(r->spec.gpus_per_node, c.gpus_per_node) << c.directive;
    EXPECT_EQ(r->spec.gpu_type, c.type) << c.directive;
  }
}

TEST(Sbatch, WarningsForWhatRailyardDoesDifferently) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"#SBATCH --qos=urgent --gpus=1 -t 5",
       "line 1: --qos=urgent: unknown QOS (Railyard has high, normal, scavenger)"},
      {"#SBATCH -p a,b --gpus=1 -t 5",
       "line 1: -p a,b: several partitions (any of) are not supported; using \"a\""},
      {"#SBATCH -N 2-4 --gpus-per-node=8 -t 5", "line 1: -N 2-4: node ranges are not supported"},
      {"#SBATCH --gres=gpu:nvidia_h100_80gb_hbm3:8 -t 5", "GPU type \"nvidia_h100_80gb_hbm3\" read as H100"},
      {"#SBATCH --gres=nvme:1,gpu:2 -t 5", "GRES \"nvme:1\" ignored: only gpu is supported"},
      {"#SBATCH --exclusive=user --gpus=1 -t 5",
       "--exclusive=user: only whole-node exclusivity is supported"},
      {"#SBATCH --gpus=1 -t 5 -C a|b", "only AND constraints"},
      {"#SBATCH -n 16 --gpus=1 -t 5", "line 1: -n 16: Railyard starts the script once"},
      {"#SBATCH --mem-per-cpu=4G --gpus=1 -t 5",
       "line 1: #SBATCH --mem-per-cpu=4G ignored: memory is per node: use --mem"},
      {"#SBATCH --frobnicate --gpus=1 -t 5",
       "line 1: #SBATCH --frobnicate ignored: not an sbatch option Railyard knows"},
      {"#SBATCH --begin=now+1hour --gpus=1 -t 5", "ignored: no deferred start: the job may start at once"},
      {"#SBATCH --priority=5000 --gpus=1 -t 5", "priority is clamped to 1000"},
      {"#SBATCH --gpus=1 -t 5 stray", "line 1: #SBATCH argument \"stray\" ignored: not an option"},
      {"#SBATCH --gpus=1 -t 5 --requeue=yes", "--requeue=yes: takes no value"},
      {"#SBATCH", "line 1: #SBATCH without an option ignored"},
      {"#SBATCH --gpus=1", "no --time: Railyard's default limit 01:00:00 applies"},
      {"#SBATCH -t 5", "no GPU request"},
      {"#!/usr/bin/env python3\n#SBATCH --gpus=1 -t 5",
       "line 1: interpreter \"python3\": Railyard runs the script with /bin/bash"},
      {"#SBATCH --gpus=1 -t 5\n  #SBATCH -N 2", "line 2: indented #SBATCH ignored"},
      {"#SBATCH --gpus=1 -t 5\nmpirun -np 8 ./a.out", "line 2: mpirun: Railyard runs this script once"},
  };
  for (const auto& [script, expected] : cases) {
    auto r = parse_sbatch_script(script + "\n");
    ASSERT_TRUE(r) << script << ": " << r.error().message;
    EXPECT_TRUE(has_warning(*r, expected)) << script << "\nwanted: " << expected << "\ngot:\n"
                                           << all_warnings(*r);
  }
}

TEST(Sbatch, StopsAtTheFirstCommand) {
  auto r = parse_sbatch_script(
      "#!/bin/bash\n\n# a comment\n#SBATCH --nodes=2\n\n#SBATCH --gpus-per-node=8\n"
      "set -e\n#SBATCH --nodes=16\n#SBATCH --time=5\n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->spec.nodes, 2);
  EXPECT_EQ(r->spec.time_limit_s, 3600);  // the --time after "set -e" is not read
  EXPECT_TRUE(has_warning(*r, "line 8: #SBATCH after the first command ignored")) << all_warnings(*r);
  EXPECT_TRUE(has_warning(*r, "line 9: #SBATCH after the first command ignored")) << all_warnings(*r);
}

TEST(Sbatch, CrlfAndTrailingComments) {
  auto r = parse_sbatch_script(
      "#!/bin/bash\r\n#SBATCH --nodes=2 # two\r\n#SBATCH --gres=gpu:8\r\n#SBATCH -t 1:00:00\r\n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->spec.nodes, 2);
  EXPECT_EQ(r->spec.gpus_per_node, 8);
  EXPECT_EQ(r->spec.time_limit_s, 3600);
  EXPECT_TRUE(r->warnings.empty()) << all_warnings(*r);
}

TEST(Sbatch, MalformedValuesNameTheLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"#!/bin/bash\n#SBATCH --nodes=abc", "line 2: --nodes=abc: expected a positive integer"},
      {"#SBATCH -N 0", "line 1: -N 0: expected a positive integer"},
      {"#SBATCH --time=1:2:3:4",
       "line 1: --time=1:2:3:4: expected MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"},
      {"#SBATCH -t 1-30", "line 1: -t 1-30: hours after \"D-\" must be below 24"},
      {"#SBATCH --gres=gpu:h100:x", "line 1: --gres=gpu:h100:x: expected gpu[:TYPE][:COUNT]"},
      {"#SBATCH --gpus=h100:", "line 1: --gpus=h100:: expected [TYPE:]COUNT"},
      {"#SBATCH --gpus-per-node=:8", "expected [TYPE:]COUNT"},
      {"#SBATCH --dependency=singleton",
       "line 1: --dependency=singleton: dependency type \"singleton\" is not supported (afterok, afterany, "
       "afternotok and aftercorr are)"},
      {"#SBATCH --nodes", "line 1: --nodes: needs a value"},
      {"#SBATCH -J \"unterminated", "line 1: unterminated quote in #SBATCH line"},
      {"#SBATCH --gres=gpu:a100:8 --gpus=h100:8", "GPU type H100 conflicts with A100 from line 1"},
      {"#SBATCH -N 2-x", "expected a node count or MIN-MAX"},
      {"#SBATCH -N 99999999999", "expected a positive integer"},
      {"#SBATCH --array=5-2", "line 1: --array=5-2: array \"5-2\": the range runs backwards"},
  };
  for (const auto& [script, expected] : cases) {
    auto r = parse_sbatch_script(script + "\n");
    ASSERT_FALSE(r) << script;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(expected), std::string::npos)
        << script << "\nerror: " << r.error().message << "\nwanted: " << expected;
  }
}

TEST(Sbatch, AnArrayScriptSeesItsTaskUnderSlurmsNamesToo) {
  auto r = parse_sbatch_script("#!/bin/bash\n#SBATCH -a 0-9%2 --gpus=1\necho $SLURM_ARRAY_TASK_ID\n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->spec.array);
  EXPECT_EQ(r->spec.array->text(), "0-9%2");
  ASSERT_EQ(r->spec.command.size(), 3u);
  EXPECT_EQ(r->spec.command[2].rfind("export SLURM_ARRAY_JOB_ID=\"$RAILYARD_ARRAY_JOB_ID\" "
                                     "SLURM_ARRAY_TASK_ID=\"$RAILYARD_ARRAY_TASK_ID\"\n#!/bin/bash\n",
                                     0),
            0u)
      << r->spec.command[2];
  auto plain = parse_sbatch_script("#!/bin/bash\n#SBATCH --gpus=1\necho hi\n");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->spec.command[2].rfind("#!/bin/bash\n", 0), 0u);  // no prelude without an array
}

TEST(Sbatch, ReportsEveryErrorAtOnce) {
  auto r = parse_sbatch_script("#SBATCH --nodes=abc\n#SBATCH --time=x\n");
  ASSERT_FALSE(r);
  EXPECT_EQ(
      r.error().message,
      "line 1: --nodes=abc: expected a positive integer; line 2: --time=x: expected MM, MM:SS, HH:MM:SS, "
      "D-HH, D-HH:MM or D-HH:MM:SS");
}

// pyxis' options, as NVIDIA's and most GPU sites' scripts write them.
TEST(Sbatch, PyxisContainerOptionsGiveTheContainer) {
  auto r = parse_sbatch_script(
      "#!/bin/bash\n#SBATCH -N 2 --gpus-per-node=8 -t 10\n"
      "#SBATCH --container-image=nvcr.io#nvidia/pytorch:24.04-py3\n"
      "#SBATCH --container-mounts=/lustre/ada:/data:ro,/scratch\n"
      "#SBATCH --container-mounts /home/ada/ckpt:/ckpt,/scratch:/scratch\n"
      "#SBATCH --container-workdir=/workspace --container-name=pt:no_exec --container-writable\n"
      "srun python train.py\n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->spec.container);
  const ContainerSpec& c = *r->spec.container;
  EXPECT_EQ(c.image, "nvcr.io/nvidia/pytorch:24.04-py3");
  EXPECT_EQ(c.mounts, (std::vector<Mount>{{"/lustre/ada", "/data", true},
                                          {"/scratch", "/scratch", false},
                                          {"/home/ada/ckpt", "/ckpt", false}}));  // /scratch once
  EXPECT_EQ(c.workdir, "/workspace");
  EXPECT_EQ(c.name, "pt");
  EXPECT_TRUE(c.writable);
  EXPECT_TRUE(has_warning(*r, "line 6: --container-name=pt:no_exec: flag \"no_exec\" ignored"))
      << all_warnings(*r);

  auto ro = parse_sbatch_script(
      "#!/bin/bash\n#SBATCH --container-writable --container-readonly --container-image=ubuntu -G 1\nls\n");
  ASSERT_TRUE(ro) << ro.error().message;
  ASSERT_TRUE(ro->spec.container);
  EXPECT_FALSE(ro->spec.container->writable);
  auto plain =
      parse_sbatch_script("#!/bin/bash\n#SBATCH -G 1 --container-readonly --no-container-mount-home\nls\n");
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_FALSE(plain->spec.container) << "the default: no container";
  EXPECT_FALSE(has_warning(*plain, "container")) << all_warnings(*plain);

  auto noted = parse_sbatch_script(
      "#!/bin/bash\n#SBATCH -G 1 -t 5 --container-image=ubuntu --container-mount-home "
      "--container-save=/x.sqsh\nls\n");
  ASSERT_TRUE(noted) << noted.error().message;
  EXPECT_TRUE(
      has_warning(*noted, "#SBATCH --container-mount-home ignored: the home directory is not mounted"))
      << all_warnings(*noted);
  EXPECT_TRUE(has_warning(*noted, "#SBATCH --container-save=/x.sqsh ignored: containers are not saved"))
      << all_warnings(*noted);
}

TEST(Sbatch, PyxisContainerRefusalsNameTheLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"#SBATCH --container-image=/images/pt.sqsh",
       "line 1: --container-image=/images/pt.sqsh: a file, not an image"},
      {"#SBATCH --container-image=\"nv cr.io\"", "line 1: --container-image=nv cr.io: contains a space"},
      {"#SBATCH --container-image=docker-archive:pt.tar",
       "docker-archive: needs the archive's absolute path"},
      {"#SBATCH --container-image=ubuntu --container-mounts=/a:/b,data:/data",
       "line 1: --container-mounts=/a:/b,data:/data: mount \"data:/data\": source \"data\": not an absolute "
       "path"},
      {"#SBATCH --container-image=ubuntu --container-mounts=/a:/",
       "mount \"/a:/\": target \"/\": cannot mount over the container's root"},
      {"#SBATCH --container-image=ubuntu --container-mounts=/a:/b:rbind",
       "option \"rbind\": expected ro or rw"},
      {"#SBATCH --container-image=ubuntu --container-workdir=workspace",
       "line 1: --container-workdir=workspace: a folder inside the container: not an absolute path"},
      {"#SBATCH --container-image=ubuntu --container-name=\"a b\"",
       "--container-name=a b: only letters, digits"},
      {"#SBATCH --container-mounts=/a:/b", "without --container-image: name the image to run in"},
      {"#SBATCH --container-name=pt", "without --container-image"},
      {"#SBATCH --container-image=ubuntu --container-mounts=/a:/data\n#SBATCH --container-mounts=/b:/data:ro",
       "container.mounts: two mounts at \"/data\" (\"/a:/data\" and \"/b:/data:ro\")"},
      {"#SBATCH --container-image", "line 1: --container-image: needs a value"},
  };
  for (const auto& [script, expected] : cases) {
    auto r = parse_sbatch_script("#!/bin/bash\n" + script + "\nhostname\n");
    ASSERT_FALSE(r) << script;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    std::string want = expected;
    if (want.starts_with("line 1")) want.replace(5, 1, "2");  // after the #! line
    EXPECT_NE(r.error().message.find(want), std::string::npos)
        << script << "\nerror: " << r.error().message << "\nwanted: " << want;
  }
}

TEST(Sbatch, RefusesWhatCannotBeAScript) {
  EXPECT_FALSE(parse_sbatch_script(std::string("#!/bin/bash\n\0", 13)));
  EXPECT_FALSE(parse_sbatch_script("#!/bin/bash\necho \xff\n"));
  auto big = parse_sbatch_script(std::string(kMaxScriptBytes + 1, '#'));
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("at most 262144"), std::string::npos);
}

}  // namespace
}  // namespace railyard::jobs
