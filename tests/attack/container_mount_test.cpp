// A job's mounts are read by a root engine (issue 45): a job may mount only what its user could read on the
// node, however the path is spelled. Each refusal names the mount; nothing of the target reaches the job.
#include <gtest/gtest.h>

#include "tests/container/container_cluster.hpp"

namespace railyard::testing {
namespace {

namespace fs = std::filesystem;

std::string mount_job_end(AttackCluster& cluster, const std::string& mount, int64_t& id) {
  id = cluster.submit({{"name", "mount"},
                       {"gpus", 1},
                       {"launcher", "none"},
                       {"command", {"/bin/sh", "-c", "cat /x/secret /x 2>&1; ls /x"}},
                       {"container", {{"image", kBusybox}, {"mounts", {mount}}}}});
  return cluster.wait_done(id);
}

TEST(ContainerMountAttack, APathTheUserCannotReadIsRefused) {
  if (auto why = container_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  AttackCluster cluster;
  const std::string secret_dir = cluster.file("root-only");
  fs::create_directories(secret_dir);
  ::chmod(secret_dir.c_str(), 0700);
  make_root_secret(secret_dir + "/secret", "root's secret");
  const std::string file = make_root_secret(cluster.file("root-file"), "root's file");
  // A link the job's user made, pointing at root's directory: resolved as that user, and refused.
  const std::string link_dir = cluster.file("nobody-dir");
  fs::create_directories(link_dir);
  const struct passwd* nobody = ::getpwnam("nobody");
  ASSERT_EQ(::chown(link_dir.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  fs::create_symlink(secret_dir, link_dir + "/link");

  for (const std::string source : {std::string("/root"), secret_dir, file, link_dir + "/link"}) {
    int64_t id = 0;
    EXPECT_EQ(mount_job_end(cluster, source + ":/x", id), "FAILED") << source;
    const std::string reason = reason_of(cluster, id);
    EXPECT_NE(reason.find("cannot read " + source), std::string::npos) << source << ": " << reason;
    EXPECT_EQ(read_small(cluster.alloc_dir(id) + "/rank-0.out").find("secret"), std::string::npos) << source;
  }
  // What nobody may read is mounted.
  const std::string open_dir = cluster.file("readable");
  fs::create_directories(open_dir);
  std::ofstream(open_dir + "/secret") << "not a secret";
  ::chmod((open_dir + "/secret").c_str(), 0644);
  int64_t id = 0;
  EXPECT_EQ(mount_job_end(cluster, open_dir + ":/x:ro", id), "COMPLETED") << cluster.job(id).dump();
  EXPECT_NE(read_small(cluster.alloc_dir(id) + "/rank-0.out").find("not a secret"), std::string::npos);
}

}  // namespace
}  // namespace railyard::testing
