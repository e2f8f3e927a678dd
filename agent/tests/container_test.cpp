// Image jobs' command lines and inputs (agent/launch/container.hpp, plan.hpp), without an engine: what the
// engine is told, what an env file holds, where ranks start and how mpirun is set up for daemons in an image.
#include "agent/launch/container.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "agent/launch/plan.hpp"
#include "jobs/container.hpp"
#include "agent/tests/test_util.hpp"

namespace railyard::agent {
namespace {

namespace fs = std::filesystem;

// argv[i + 1] after the first occurrence of `flag`, or "<none>".
std::string after(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "<none>" : *(it + 1);
}

std::vector<std::string> all_after(const std::vector<std::string>& argv, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag) out.push_back(argv[i + 1]);
  return out;
}

ContainerProcess process() {
  ContainerProcess p;
  p.image = "nvcr.io/nvidia/pytorch:24.04-py3";
  p.command = {"python", "train.py"};
  p.env_file = "/state/containers/7.1/rank0.env";
  p.user = Credentials{"alice", 1000, 1000, {1000, 27}, "/home/alice"};
  p.workdir = "/workspace";
  p.mounts = {{"/lustre/alice", "/data", true}, {"/state/jobs/7/7.1", "/state/jobs/7/7.1", false}};
  p.cgroup_parent = "/railyard/7-7.1-n1";
  p.gpus = {2, 3};
  p.name = "railyard-7.1-n1-rank0-abcd";
  p.labels = {{"railyard.alloc", "7.1"}};
  return p;
}

TEST(Container, RunArgvRunsAsTheUserWithoutPrivilegesInTheJobsGroup) {
  TempDir dir;
  ContainerOptions o;
  o.dev = (dir.path() / "dev").string();  // no GPU devices here
  o.cdi_dirs = {};
  const auto argv = make_podman(o, "runc", "4.3.1")->run_argv(process());
  EXPECT_EQ(argv.front(), "podman");
  EXPECT_EQ(after(argv, "--runtime"), "runc");
  EXPECT_EQ(after(argv, "--user"), "1000:1000");
  EXPECT_EQ(all_after(argv, "--group-add"), std::vector<std::string>{"27"});
  EXPECT_EQ(after(argv, "--cap-drop"), "all");
  EXPECT_EQ(after(argv, "--security-opt"), "no-new-privileges");
  EXPECT_EQ(after(argv, "--network"), "host");
  EXPECT_EQ(after(argv, "--ipc"), "host");
  EXPECT_EQ(after(argv, "--env-file"), "/state/containers/7.1/rank0.env");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--cgroup-parent=/railyard/7-7.1-n1"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--read-only"), argv.end());
  EXPECT_EQ(all_after(argv, "--volume"),
            (std::vector<std::string>{"/lustre/alice:/data:ro", "/state/jobs/7/7.1:/state/jobs/7/7.1:rw"}));
  EXPECT_EQ(after(argv, "--workdir"), "/workspace");
  EXPECT_EQ(after(argv, "--label"), "railyard.alloc=7.1");
  // The image, then the command, last.
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(argv.end() - 3, argv.end()),
            (std::vector<std::string>{"nvcr.io/nvidia/pytorch:24.04-py3", "python", "train.py"}));
  EXPECT_EQ(all_after(argv, "--device"), std::vector<std::string>{}) << "no GPU device exists here";
  // Nothing of the job's environment is on the command line.
  for (const auto& a : argv) EXPECT_EQ(a.find("SECRET"), std::string::npos) << a;
}

TEST(Container, WritableImagesAreNotReadOnly) {
  auto p = process();
  p.writable = true;
  const auto argv = make_podman(ContainerOptions{}, "", "4.3.1")->run_argv(p);
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--read-only"), argv.end());
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--runtime"), argv.end()) << "podman's own runtime";
}

TEST(Container, OnlyTheJobsGpuDevicesAndTheDriversAreGiven) {
  TempDir dir;
  const std::string dev = (dir.path() / "dev").string(), libs = (dir.path() / "lib").string();
  fs::create_directories(dev);
  fs::create_directories(libs);
  for (const std::string name : {"nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm"})
    ASSERT_EQ(::mknod((dev + "/" + name).c_str(), S_IFCHR | 0600, makedev(1, 3)), 0) << name;
  std::ofstream(libs + "/libcuda.so.550.54") << "";
  std::ofstream(libs + "/libnvidia-ml.so.1") << "";
  std::ofstream(libs + "/libz.so.1") << "";
  ContainerOptions o;
  o.dev = dev;
  o.cdi_dirs = {};
  o.driver_lib_dirs = {fs::path(libs)};
  const auto argv = make_podman(o, "", "4.3.1")->run_argv(process());
  EXPECT_EQ(all_after(argv, "--device"),
            (std::vector<std::string>{dev + "/nvidia2:/dev/nvidia2", dev + "/nvidia3:/dev/nvidia3",
                                      dev + "/nvidiactl:/dev/nvidiactl", dev + "/nvidia-uvm:/dev/nvidia-uvm"}));
  const auto volumes = all_after(argv, "--volume");
  EXPECT_NE(std::find(volumes.begin(), volumes.end(), libs + "/libcuda.so.550.54:" + libs + "/libcuda.so.550.54:ro"),
            volumes.end());
  EXPECT_NE(std::find(volumes.begin(), volumes.end(), libs + "/libnvidia-ml.so.1:" + libs + "/libnvidia-ml.so.1:ro"),
            volumes.end());
  for (const auto& v : volumes) EXPECT_EQ(v.find("libz"), std::string::npos) << v;
}

TEST(Container, CdiDevicesWhenTheNodeHasASpecForItsGpus) {
  TempDir dir;
  fs::create_directories((dir.path() / "cdi").string());
  std::ofstream((dir.path() / "cdi/nvidia.yaml").string()) << "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n";
  ContainerOptions o;
  o.cdi_dirs = {dir.path() / "cdi"};
  auto podman = make_podman(o, "", "4.3.1");
  EXPECT_NE(podman->describe().find("CDI"), std::string::npos);
  EXPECT_EQ(all_after(podman->run_argv(process()), "--device"),
            (std::vector<std::string>{"nvidia.com/gpu=2", "nvidia.com/gpu=3"}));
}

TEST(Container, EnvFileHoldsEachVariableOnItsLineOrRefusesIt) {
  auto text = env_file_text({"A=1", "B=two words; $(not run)", "C="});
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_EQ(*text, "A=1\nB=two words; $(not run)\nC=\n");
  auto newline = env_file_text({"KEY=line1\nINJECTED=1"});
  ASSERT_FALSE(newline);
  EXPECT_NE(newline.error().message.find("KEY"), std::string::npos);
  // A name podman would read as a comment, a host wildcard or nothing at all.
  for (const std::string bad : {"#X=1", "PATH*=x", "=x", "1A=x", "NOEQUALS"})
    EXPECT_FALSE(env_file_text({bad})) << bad;
}

TEST(Container, RanksStartInTheContainerWorkdirOrAMountedJobWorkdirElseTmp) {
  jobs::JobSpec spec;
  spec.container = jobs::ContainerSpec{};
  spec.workdir = "/home/alice/proj";
  EXPECT_EQ(container_workdir(spec), "/tmp") << "the node's path is not in the image";
  spec.container->mounts = {{"/home/alice", "/home/alice", false}};
  EXPECT_EQ(container_workdir(spec), "/home/alice/proj");
  spec.container->mounts = {{"/home/alice/projects", "/home/alice/projects", false}};
  EXPECT_EQ(container_workdir(spec), "/tmp") << "a mount of a sibling path does not show it";
  spec.container->workdir = "/workspace";
  EXPECT_EQ(container_workdir(spec), "/workspace");
}

TEST(Container, MpirunOfAnImageJobHostsNoRankAndStartsRanksInTheImagesWorkdir) {
  auto inv = emulated_inventory("dgx-h100", "node0");
  LaunchRequest r;
  r.job_id = 42;
  r.alloc_id = "42.1";
  r.spec.launcher = jobs::Launcher::kMpi;
  r.spec.command = {"train"};
  r.spec.container = jobs::ContainerSpec{"img", {}, "/workspace", false, ""};
  r.nodes = {{"node0", {0, 1}}, {"node1", {2, 3}}};
  MpiSettings s{"mpirun", "/bin/railyard-agent-exec", "/h", "/state", false, "", true};
  auto plan = plan_mpirun(r, *inv, {}, s);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->hostfile_text, "node0.railyard-orted slots=2\nnode1.railyard-orted slots=2\n");
  const auto& a = plan->process.argv;
  EXPECT_EQ(after(a, "--wdir"), "/workspace");
  bool fqdn = false;
  for (size_t i = 0; i + 2 < a.size(); ++i) fqdn |= a[i] == "--mca" && a[i + 1] == "orte_keep_fqdn_hostnames" && a[i + 2] == "1";
  EXPECT_TRUE(fqdn);
  s.daemons_in_image = false;
  r.spec.container.reset();
  plan = plan_mpirun(r, *inv, {}, s);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->hostfile_text, "node0 slots=2\nnode1 slots=2\n") << "host jobs as before";
  EXPECT_EQ(after(plan->process.argv, "--wdir"), "<none>");
}

TEST(Container, NamesAreUniquePerNodeDirectoryAndValidForTheEngine) {
  const auto a = container_name("7.1", "dgx/001", "rank0", "/a/nodes/dgx001");
  const auto b = container_name("7.1", "dgx/001", "rank0", "/b/nodes/dgx001");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("railyard-7.1-dgx_001-rank0-", 0), 0u) << a;
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }));
}

TEST(Container, AnEngineThatDoesNotAnswerIsGivenUpOnNotWaitedFor) {
  TempDir dir;
  const fs::path engine = dir.path() / "hung-engine";
  std::ofstream(engine) << "#!/bin/sh\nexec sleep 600\n";
  fs::permissions(engine, fs::perms::owner_all);
  ContainerOptions o;
  o.engine = engine.string();
  o.state_dir = dir.path();
  o.command_timeout = std::chrono::milliseconds(300);
  auto r = detect_container_runtime(o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("did not finish within"), std::string::npos) << r.error().message;
}

TEST(Container, ArchiveReferencesNameTheirFile) {
  EXPECT_EQ(jobs::archive_path("docker-archive:/images/a.tar"), "/images/a.tar");
  EXPECT_EQ(jobs::archive_path("oci-archive:/images/b.tar:latest"), "/images/b.tar");
  EXPECT_EQ(jobs::archive_path("nvcr.io/nvidia/pytorch:24.04-py3"), "");
  EXPECT_TRUE(is_archive_image("oci-archive:/x.tar"));
  EXPECT_FALSE(is_archive_image("localhost/x:1"));
}

TEST(Container, MountsTheUserCannotReadAreRefusedNamingThem) {
  if (::geteuid() != 0 || ::getpwnam("nobody") == nullptr) GTEST_SKIP() << "needs root and the user nobody";
  auto nobody = resolve_job_user("nobody", false);
  ASSERT_TRUE(nobody && *nobody);
  TempDir dir;
  ::chmod(dir.path().c_str(), 0755);
  fs::create_directories((dir.path() / "open").string());
  fs::create_directories((dir.path() / "closed").string());
  ::chmod((dir.path() / "closed").string().c_str(), 0700);
  fs::create_symlink((dir.path() / "closed").string(), (dir.path() / "link").string());
  auto ok = checked_mounts({{(dir.path() / "open").string() + "/", "/x", true}}, *nobody);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->front().source, fs::canonical((dir.path() / "open").string()).string());
  for (const std::string src : {(dir.path() / "closed").string(), (dir.path() / "link").string(), std::string("/nonexistent/x")}) {
    auto refused = checked_mounts({{src, "/x", false}}, *nobody);
    ASSERT_FALSE(refused) << src;
    EXPECT_NE(refused.error().message.find("cannot read " + src), std::string::npos) << refused.error().message;
  }
}

}  // namespace
}  // namespace railyard::agent
