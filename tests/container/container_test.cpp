// Image jobs on a root agent with real podman (issue 45): each rank in the image as the job's user, with
// its GPUs only, inside its memory limit; mpi and env jobs that train to their target; cancel, an agent's
// death and a missing image leave nothing running and say why; an agent without an engine gets no image job.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <set>
#include <sstream>

#include "tests/container/container_cluster.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

#define SKIP_WITHOUT_CONTAINERS()                                            \
  if (auto why = container_skip_reason(); !why.empty()) GTEST_SKIP() << why

json image_job(const std::string& image, const std::string& script, int gpus = 1) {
  return {{"name", "image"},
          {"gpus", gpus},
          {"launcher", "none"},
          {"command", {"/bin/sh", "-c", script}},
          {"container", {{"image", image}}}};
}

std::string alloc_of(int64_t id) { return std::to_string(id) + ".1"; }

bool wait_running(AttackCluster& c, int64_t id) {
  return until([&] { return c.state(id) == "RUNNING"; }, std::chrono::seconds(60));
}

// The trainer's directory, mounted read-only at its own path: the image brings the runtime, the job its code
// (as users mount theirs from a shared file system).
std::string workloads() { return fs::path(RAILYARD_TRAIN).parent_path().string(); }

json training_job(const std::string& launcher) {
  const std::string w = workloads();
  return {{"name", "train-" + launcher},
          {"nodes", 2},
          {"gpus_per_node", 2},
          {"launcher", launcher},
          {"time_limit", "10m"},
          {"command", {RAILYARD_TRAIN, "--target-accuracy", "0.9"}},
          {"target", {{"metric", "eval_accuracy"}, {"value", 0.9}}},
          {"container", {{"image", kRuntime}, {"mounts", {w + ":" + w + ":ro"}}}}};
}

TEST(ImageJob, RankRunsAsTheJobsUserInTheImageWithoutPrivileges) {
  SKIP_WITHOUT_CONTAINERS();
  AttackCluster cluster;
  json spec = image_job(kBusybox,
                        "id -u; id -g; echo \"X=$X\"; grep CapEff /proc/self/status; "
                        "touch /etc/x 2>/dev/null && echo root-writable || echo root-read-only; "
                        "test -f /bin/busybox && echo in-image");
  spec["env"] = {{"X", "a value; with $pecial chars"}};
  const int64_t id = cluster.submit(spec);
  ASSERT_EQ(cluster.wait_done(id), "COMPLETED") << cluster.job(id).dump() << read_small(cluster.agent_log());
  const std::string out = read_small(cluster.alloc_dir(id) + "/rank-0.out");
  std::istringstream lines(out);
  std::string uid, gid;
  lines >> uid >> gid;
  EXPECT_EQ(uid, std::to_string(::getpwnam("nobody")->pw_uid)) << out;
  EXPECT_EQ(gid, std::to_string(::getpwnam("nobody")->pw_gid)) << out;
  EXPECT_NE(out.find("X=a value; with $pecial chars"), std::string::npos) << out;
  EXPECT_NE(out.find("CapEff:\t0000000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("root-read-only"), std::string::npos) << out;
  EXPECT_NE(out.find("in-image"), std::string::npos) << out;
  // The env file the engine read is root's, in a directory only root enters, and gone with the job.
  EXPECT_TRUE(until([&] { return !fs::exists(cluster.agent_state() + "/nodes/n1/containers/" + alloc_of(id)); }))
      << "the allocation's env files outlived it";
  EXPECT_TRUE(until([&] { return containers_of(cluster, alloc_of(id)).empty(); })) << containers_of(cluster, alloc_of(id));
}

TEST(ImageJob, TwoNodeMpiJobTrainsToItsTargetInTheImage) {
  SKIP_WITHOUT_CONTAINERS();
  AttackCluster cluster;
  const int64_t id = cluster.submit(training_job("mpi"));
  ASSERT_EQ(cluster.wait_done(id, std::chrono::seconds(180)), "COMPLETED")
      << cluster.job(id).dump() << read_small(cluster.alloc_dir(id) + "/rank-0.err")
      << read_small(cluster.alloc_dir(id) + "/exec-n1-0.err") << read_small(cluster.agent_log());
  EXPECT_TRUE(cluster.job(id)["time_to_train_s"].is_number()) << cluster.job(id).dump();
  // Every node's ranks ran under an orted its agent started in the image: node 0's too (mpirun hosts none).
  for (const std::string node : {"n1", "n2"})
    EXPECT_TRUE(fs::exists(cluster.alloc_dir(id, node) + "/exec-" + node + "-0.out")) << node;
  const std::string out = read_small(cluster.alloc_dir(id) + "/rank-0.out");
  EXPECT_NE(out.find("\"status\": \"success\""), std::string::npos) << out;
  EXPECT_NE(out.find("sklearn-digits"), std::string::npos) << "the trainer found no data set: " << out;
  EXPECT_TRUE(until([&] { return containers_of(cluster, alloc_of(id)).empty(); })) << containers_of(cluster, alloc_of(id));
}

// The env launcher's ranks in the image: four of them on two nodes meet through a directory they share
// (a mount), and rank 0 reports its quality as MLPerf logging does. (railyard-train's env backend is NCCL:
// GPUs only; on a GPU node TwoNodeMpiJob's trainer runs under --backend nccl the same way.)
TEST(ImageJob, TwoNodeEnvJobReachesItsTargetInTheImage) {
  SKIP_WITHOUT_CONTAINERS();
  AttackCluster cluster;
  const std::string shared = cluster.file("shared");
  fs::create_directories(shared);
  const struct passwd* nobody = ::getpwnam("nobody");
  ASSERT_EQ(::chown(shared.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  const std::string script =
      "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $NODE_RANK $MASTER_ADDR\" > /shared/rank-$RANK; "
      "[ \"$RANK\" = 0 ] || exit 0; "
      "while [ $(ls /shared | grep -c rank-) -lt \"$WORLD_SIZE\" ]; do sleep 0.1; done; "
      "cat /shared/rank-*; "
      "echo ':::MLLOG {\"namespace\": \"\", \"time_ms\": '$(date +%s)'000, \"event_type\": \"INTERVAL_START\", "
      "\"key\": \"run_start\", \"value\": null, \"metadata\": {\"file\": \"sh\", \"lineno\": 1}}'; sleep 1; "
      "echo ':::MLLOG {\"namespace\": \"\", \"time_ms\": '$(date +%s)'000, \"event_type\": \"POINT_IN_TIME\", "
      "\"key\": \"eval_accuracy\", \"value\": 0.95, \"metadata\": {\"file\": \"sh\", \"lineno\": 2, \"epoch_num\": 1}}'; "
      "echo ':::MLLOG {\"namespace\": \"\", \"time_ms\": '$(date +%s)'000, \"event_type\": \"INTERVAL_END\", "
      "\"key\": \"run_stop\", \"value\": null, \"metadata\": {\"file\": \"sh\", \"lineno\": 3, \"status\": \"success\"}}'";
  json spec = {{"name", "env-image"},
               {"nodes", 2},
               {"gpus_per_node", 2},
               {"launcher", "env"},
               {"command", {"/bin/sh", "-c", script}},
               {"target", {{"metric", "eval_accuracy"}, {"value", 0.9}}},
               {"container", {{"image", kBusybox}, {"mounts", {shared + ":/shared"}}}}};
  const int64_t id = cluster.submit(spec);
  ASSERT_EQ(cluster.wait_done(id, std::chrono::seconds(120)), "COMPLETED")
      << cluster.job(id).dump() << read_small(cluster.alloc_dir(id) + "/rank-0.err") << read_small(cluster.agent_log());
  EXPECT_TRUE(cluster.job(id)["time_to_train_s"].is_number()) << cluster.job(id).dump();
  const std::string out = read_small(cluster.alloc_dir(id) + "/rank-0.out");
  for (const char* rank : {"0 4 0 0 ", "1 4 1 0 ", "2 4 0 1 ", "3 4 1 1 "})
    EXPECT_NE(out.find(rank), std::string::npos) << rank << " missing from " << out;
}

TEST(ImageJob, OnlyItsOwnGpusAreVisibleInTheContainer) {
  SKIP_WITHOUT_CONTAINERS();
  // Stand-in device nodes (the numbers of /dev/null) where the agent looks for the GPUs' devices.
  TempDir devs;
  const std::string dev = devs.file("dev");
  fs::create_directories(dev);
  for (int g = 0; g < 8; ++g) ASSERT_EQ(::mknod((dev + "/nvidia" + std::to_string(g)).c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  ASSERT_EQ(::mknod((dev + "/nvidiactl").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  AttackCluster cluster(AttackOptions{{}, {"--dev-dir", dev}, true});
  const int64_t id = cluster.submit(image_job(kBusybox, "echo $CUDA_VISIBLE_DEVICES; ls /dev | grep nvidia", 2));
  ASSERT_EQ(cluster.wait_done(id), "COMPLETED") << cluster.job(id).dump() << read_small(cluster.agent_log());
  std::istringstream lines(read_small(cluster.alloc_dir(id) + "/rank-0.out"));
  std::string visible, name;
  lines >> visible;
  std::set<std::string> seen, want = {"nvidiactl"};
  while (lines >> name) seen.insert(name);
  for (size_t pos = 0; pos <= visible.size();) {
    const size_t comma = std::min(visible.find(',', pos), visible.size());
    want.insert("nvidia" + visible.substr(pos, comma - pos));
    pos = comma + 1;
  }
  EXPECT_EQ(want.size(), 3u) << visible;
  EXPECT_EQ(seen, want) << "CUDA_VISIBLE_DEVICES=" << visible;
}

TEST(ImageJob, CancelLeavesNoContainer) {
  SKIP_WITHOUT_CONTAINERS();
  AttackCluster cluster;
  // A rank that ignores SIGTERM: only the kill after the grace period ends it.
  const int64_t id = cluster.submit(image_job(kBusybox, "trap '' TERM; while true; do sleep 1; done"));
  ASSERT_TRUE(wait_running(cluster, id)) << cluster.job(id).dump();
  ASSERT_TRUE(until([&] { return !containers_of(cluster, alloc_of(id)).empty(); })) << "no container for " << alloc_of(id);
  auto r = cluster.http().request("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", "", cluster.admin_token());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(cluster.wait_done(id), "CANCELLED");
  EXPECT_TRUE(until([&] { return containers_of(cluster, alloc_of(id)).empty(); })) << containers_of(cluster, alloc_of(id));
}

TEST(ImageJob, AgentKilledAndRestartedReapsItsContainers) {
  SKIP_WITHOUT_CONTAINERS();
  AttackCluster cluster;
  const int64_t id = cluster.submit(image_job(kBusybox, "sleep 600"));
  ASSERT_TRUE(wait_running(cluster, id)) << cluster.job(id).dump();
  std::string name;
  ASSERT_TRUE(until([&] { return !(name = containers_of(cluster, alloc_of(id))).empty(); }));
  ASSERT_EQ(name.find('\n'), std::string::npos) << "one rank, one container: " << name;
  // The agent and the engine client it started die (kill -9, as an OOM kill of the agent's unit would):
  // the container itself lives on, with nothing left that would stop it but the restarted agent.
  cluster.stop_agent(SIGKILL);
  // Its whole process group, as the agent recorded it ("[p]odman": a pattern that does not match the shell
  // running pgrep).
  const std::string pgid = capture("ps -o pgid= -p $(pgrep -o -f '[p]odman.* --name " + name + " ') | tr -d ' '");
  ASSERT_FALSE(pgid.empty());
  shell("kill -9 -" + pgid);
  ASSERT_TRUE(until([&] { return shell("pgrep -g " + pgid + " >/dev/null") != 0; }));
  EXPECT_EQ(capture("podman inspect --format '{{.State.Running}}' " + name), "true");
  cluster.start_agent();
  EXPECT_TRUE(until([&] { return containers_of(cluster, alloc_of(id)).empty(); }, std::chrono::seconds(60)))
      << containers_of(cluster, alloc_of(id)) << read_small(cluster.agent_log());
  const std::string end = cluster.wait_done(id);
  EXPECT_TRUE(end == "FAILED" || end == "NODE_FAIL") << end;
}

TEST(ImageJob, MissingImageFailsWithAMessageNamingIt) {
  SKIP_WITHOUT_CONTAINERS();
  AttackCluster cluster;
  const std::string image = "localhost/railyard-no-such-image:1";
  const int64_t id = cluster.submit(image_job(image, "true"));
  EXPECT_EQ(cluster.wait_done(id), "FAILED");
  const std::string reason = reason_of(cluster, id);
  EXPECT_NE(reason.find("cannot pull image " + image), std::string::npos) << reason;
}

TEST(ImageJob, ArchiveImageIsLoadedOnlyWhenTheUserCanReadIt) {
  SKIP_WITHOUT_CONTAINERS();
  AttackCluster cluster;
  const std::string archive = cluster.file("busybox.tar");
  ASSERT_EQ(shell(std::string("podman save --quiet --format docker-archive -o ") + archive + " " + kBusybox), 0);
  ::chmod(archive.c_str(), 0644);
  const int64_t id = cluster.submit(image_job("docker-archive:" + archive, "echo from-archive"));
  ASSERT_EQ(cluster.wait_done(id), "COMPLETED") << cluster.job(id).dump() << read_small(cluster.agent_log());
  EXPECT_NE(read_small(cluster.alloc_dir(id) + "/rank-0.out").find("from-archive"), std::string::npos);
  // root's own archive is not loaded for nobody: the engine would read it as root.
  const std::string secret = cluster.file("root-only.tar");
  ASSERT_EQ(shell("cp " + archive + " " + secret), 0);
  ::chmod(secret.c_str(), 0600);
  const int64_t refused = cluster.submit(image_job("docker-archive:" + secret, "true"));
  EXPECT_EQ(cluster.wait_done(refused), "FAILED");
  EXPECT_NE(reason_of(cluster, refused).find("cannot read " + secret), std::string::npos)
      << cluster.job(refused).dump();
}

TEST(ImageJob, NodeWithoutAnEngineGetsNoImageJob) {
  SKIP_WITHOUT_CONTAINERS();
  AttackCluster cluster(AttackOptions{{}, {"--no-containers"}, true});
  const int64_t image = cluster.submit(image_job(kBusybox, "echo ran"));
  const int64_t host = cluster.submit_script("true");
  EXPECT_EQ(cluster.wait_done(host), "COMPLETED");
  std::string reason;
  EXPECT_TRUE(until([&] {
    reason = reason_of(cluster, image);
    return reason.find("runs containers") != std::string::npos;
  })) << cluster.job(image).dump();
  EXPECT_EQ(cluster.state(image), "PENDING");
  // The same nodes with an engine: the job starts there.
  cluster.stop_agent();
  cluster.start_agent_with({});
  EXPECT_EQ(cluster.wait_done(image), "COMPLETED") << cluster.job(image).dump();
}

TEST(ImageJob, MemoryLimitHoldsInsideTheContainer) {
  SKIP_WITHOUT_CONTAINERS();
  AttackCluster cluster;
  // awk doubles a string until it is killed: its own memory, past the job's 256 MiB.
  json spec = image_job(kBusybox, "awk 'BEGIN { s = \"x\"; while (1) s = s s }' && echo survived");
  spec["mem_mb"] = 256;
  const int64_t id = cluster.submit(spec);
  EXPECT_EQ(cluster.wait_done(id), "OUT_OF_MEMORY") << cluster.job(id).dump();
  EXPECT_EQ(read_small(cluster.alloc_dir(id) + "/rank-0.out").find("survived"), std::string::npos);
}

}  // namespace
}  // namespace railyard::testing
