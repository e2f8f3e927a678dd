// Images coming to a node (issue 45): a launch waits for its image's pull, saying so in the job's reason;
// jobs naming one image share one pull; an admin prefetches an image and lists a node's cache. Registries
// on 127.0.0.1 made by the test: Debian's docker-registry, and a listener that never answers (a registry
// that hangs).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tests/container/container_cluster.hpp"

namespace railyard::testing {
namespace {

using nlohmann::json;

// A TCP port on 127.0.0.1 that accepts connections (the kernel's backlog) and never answers.
class SilentPort {
 public:
  SilentPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("cannot listen on 127.0.0.1");
    port_ = ntohs(a.sin_port);
  }
  ~SilentPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// docker-registry serving on a free loopback port, over plain HTTP, holding the busybox test image as
// `repo:<pid>` (image()) and nowhere else: its local name is dropped, so only a pull brings it back (and
// dropped again at the end). The agent's engine reaches it through a registries.conf given with
// --engine-env (agent_options()).
class LocalRegistry {
 public:
  LocalRegistry(const std::string& dir, const std::string& repo) : dir_(dir) {
    port_ = SilentPort().port();  // free now; the registry takes it next
    image_ = "127.0.0.1:" + std::to_string(port_) + "/" + repo + ":" + std::to_string(::getpid());
    std::ofstream(dir_ + "/config.yml") << "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: " << dir_
                                       << "/data\nhttp:\n  addr: 127.0.0.1:" << port_ << "\n";
    std::ofstream(conf()) << "[[registry]]\nlocation = \"127.0.0.1:" << port_ << "\"\ninsecure = true\n";
    process_ = std::make_unique<ChildProcess>("/usr/bin/docker-registry",
                                              std::vector<std::string>{"serve", dir_ + "/config.yml"},
                                              dir_ + "/registry.log");
    ok_ = until([&] { return shell("curl -sf http://127.0.0.1:" + std::to_string(port_) + "/v2/ >/dev/null") == 0; }) &&
          shell(std::string("podman push --quiet --tls-verify=false ") + kBusybox + " " + image_ + " >/dev/null 2>&1") == 0;
    drop_local();
  }
  ~LocalRegistry() { drop_local(); }
  bool ok() const { return ok_; }
  std::string log() const { return read_small(dir_ + "/registry.log"); }
  const std::string& image() const { return image_; }
  AttackOptions agent_options() const { return AttackOptions{{}, {"--engine-env", "CONTAINERS_REGISTRIES_CONF=" + conf()}, true}; }

 private:
  std::string conf() const { return dir_ + "/registries.conf"; }
  void drop_local() const { shell("podman rmi " + image_ + " >/dev/null 2>&1"); }

  std::string dir_;
  int port_ = 0;
  std::string image_;
  std::unique_ptr<ChildProcess> process_;
  bool ok_ = false;
};

std::string skip_reason() {
  if (auto why = container_skip_reason(); !why.empty()) return why;
  if (shell("test -x /usr/bin/docker-registry") != 0) return "docker-registry is not installed (deploy/bootstrap.sh)";
  return {};
}

json image_job(const std::string& image, const std::string& script) {
  return {{"name", "pull"},
          {"gpus", 1},
          {"launcher", "none"},
          {"command", {"/bin/sh", "-c", script}},
          {"container", {{"image", image}}}};
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t pos = 0; (pos = text.find(what, pos)) != std::string::npos; pos += what.size()) ++n;
  return n;
}

TEST(ImagePull, LaunchWaitingForItsImageSaysSoAndCancelEndsIt) {
  if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  SilentPort hang;
  TempDir conf_dir;
  const std::string conf = conf_dir.file("registries.conf");
  std::ofstream(conf) << "[[registry]]\nlocation = \"127.0.0.1:" << hang.port() << "\"\ninsecure = true\n";
  AttackCluster cluster(AttackOptions{{}, {"--engine-env", "CONTAINERS_REGISTRIES_CONF=" + conf}, true});
  const std::string image = "127.0.0.1:" + std::to_string(hang.port()) + "/slow:1";
  const int64_t id = cluster.submit(image_job(image, "true"));
  std::string reason;
  EXPECT_TRUE(until([&] {
    reason = reason_of(cluster, id);
    return reason.find("pulling image " + image) != std::string::npos;
  })) << cluster.job(id).dump();
  EXPECT_EQ(cluster.state(id), "STARTING");
  auto r = cluster.http().request("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", "", cluster.admin_token());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(cluster.wait_done(id), "CANCELLED");
}

TEST(ImagePull, JobsNamingOneImageShareOnePull) {
  if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir reg_dir;
  LocalRegistry registry(reg_dir.file(""), "shared");
  ASSERT_TRUE(registry.ok()) << registry.log();
  AttackCluster cluster(registry.agent_options());
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(cluster.submit(image_job(registry.image(), "echo pulled")));
  for (int64_t id : ids) EXPECT_EQ(cluster.wait_done(id), "COMPLETED") << cluster.job(id).dump();
  EXPECT_EQ(count(read_small(cluster.agent_log()), "pulling image " + registry.image()), 1)
      << read_small(cluster.agent_log());
}

TEST(ImagePull, AdminPrefetchesAnImageAndNodeImagesListsIt) {
  if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir reg_dir;
  LocalRegistry registry(reg_dir.file(""), "prefetched");
  ASSERT_TRUE(registry.ok()) << registry.log();
  AttackCluster cluster(registry.agent_options());
  const json body = {{"image", registry.image()}};
  // Only an admin prefetches.
  EXPECT_EQ(cluster.http().request("POST", "/api/v1/nodes/n1/images", body.dump(), cluster.nobody_token()).status, 403);
  auto r = cluster.http().request("POST", "/api/v1/nodes/n1/images", body.dump(), cluster.admin_token());
  ASSERT_EQ(r.status, 202) << r.body;
  auto listed = [&] {
    auto l = cluster.http().request("GET", "/api/v1/nodes/n1/images", "", cluster.nobody_token());
    if (l.status != 200) return false;
    const auto answer = l.json();
    for (const auto& i : answer["images"])
      for (const auto& n : i["names"])
        if (n == registry.image()) return true;
    return false;
  };
  EXPECT_TRUE(until(listed)) << cluster.http().request("GET", "/api/v1/nodes/n1/images", "", cluster.admin_token()).body;
  // The CLI's view of the same.
  const std::string table = capture(std::string(RAILYARD_BIN) + " node images n1 --url " + cluster.url() +
                                    " --token " + cluster.admin_token());
  EXPECT_NE(table.find(registry.image()), std::string::npos) << table;
  EXPECT_EQ(cluster.http().request("POST", "/api/v1/nodes/n1/images", R"({"image":"Not An Image"})",
                                   cluster.admin_token()).status, 400);
  EXPECT_EQ(cluster.http().request("GET", "/api/v1/nodes/nope/images", "", cluster.admin_token()).status, 404);
}

}  // namespace
}  // namespace railyard::testing
