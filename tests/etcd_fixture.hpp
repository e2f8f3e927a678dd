// One real etcd member on 127.0.0.1 for tests (ha/ tests): started from a temporary data directory, killed
// and removed at the end. Skip a test where find_etcd() finds none (deploy/bootstrap.sh installs etcd-server).
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/net/http_client.hpp"

extern char** environ;

namespace railyard::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline std::string find_etcd() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/sbin"})
    if (fs::exists(std::string(dir) + "/etcd")) return std::string(dir) + "/etcd";
  return "";
}

// A port of 127.0.0.1 free now, below the ephemeral range (an outgoing connection cannot take it meanwhile).
inline int free_port() {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(20000, 30000);
  for (int i = 0; i < 100; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int port = pick(rng);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (ok) return port;
  }
  return 0;
}

// Certificates made with the openssl command in `dir`: ca.pem (ca.key) signs server.pem (for 127.0.0.1) and
// client.pem; other-client.pem is signed by an unrelated CA. False when openssl failed.
inline bool make_etcd_certificates(const fs::path& dir) {
  const auto run = [](const std::string& cmd) {
    return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
  };
  const std::string d = dir.string() + "/";
  std::ofstream(d + "san.ext") << "subjectAltName=IP:127.0.0.1\n";
  bool ok = run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=etcd-test-ca -keyout " + d +
                "ca.key -out " + d + "ca.pem") &&
            run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=other-ca -keyout " + d +
                "other.key -out " + d + "other.pem");
  for (const std::string name : {"server", "client", "other-client"}) {
    const std::string ca = name == "other-client" ? "other" : "ca";
    ok = ok &&
         run("openssl req -newkey rsa:2048 -nodes -subj /CN=" + name + " -keyout " + d + name + ".key -out " +
             d + name + ".csr") &&
         run("openssl x509 -req -days 2 -in " + d + name + ".csr -CA " + d + ca + ".pem -CAkey " + d + ca +
             ".key -CAcreateserial -extfile " + d + "san.ext -out " + d + name + ".pem");
  }
  return ok;
}

// One etcd member with its data in a temporary directory, killed and removed at the end.
class Etcd {
 public:
  // `tls_dir`: certificates of make_etcd_certificates; the member then serves https and requires a client
  // certificate its CA signed (--client-cert-auth), as a production etcd does.
  bool start(const std::string& binary, const fs::path& tls_dir = {}) {
    dir_ = fs::temp_directory_path() / ("railyard_etcd_" + std::to_string(::getpid()) + "_" + std::to_string(++instances_));
    fs::create_directories(dir_);
    const int client = free_port(), peer = free_port();
    url_ = std::string(tls_dir.empty() ? "http" : "https") + "://127.0.0.1:" + std::to_string(client);
    const std::string p = "http://127.0.0.1:" + std::to_string(peer);
    std::vector<std::string> args{binary, "--name", "e1", "--data-dir", (dir_ / "data").string(),
                                  "--listen-client-urls", url_, "--advertise-client-urls", url_,
                                  "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                                  "--initial-cluster", "e1=" + p};
    net::ClientTls tls;
    if (!tls_dir.empty()) {
      for (std::string flag : {"--cert-file=server.pem", "--key-file=server.key", "--trusted-ca-file=ca.pem"})
        args.push_back(flag.replace(flag.find('=') + 1, 0, tls_dir.string() + "/"));
      args.push_back("--client-cert-auth");
      tls = {(tls_dir / "ca.pem").string(), (tls_dir / "client.pem").string(),
             (tls_dir / "client.key").string()};
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = (dir_ / "etcd.log").string();
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    const int spawned = ::posix_spawn(&pid_, binary.c_str(), &files, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    if (spawned != 0) {
      pid_ = -1;
      return false;
    }
    auto parsed = net::parse_http_url(url_);
    if (!parsed) return false;
    net::HttpClient health(url_, *parsed, 500ms, tls);
    for (auto until = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < until;) {
      if (auto r = health.request("GET", "/health"); r && r->status == 200) return true;
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {  // exited: the log says why
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  ~Etcd() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  const std::string& url() const { return url_; }
  std::string log() const {
    std::ifstream in(dir_ / "etcd.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  static inline std::atomic<int> instances_{0};
  pid_t pid_ = -1;
  fs::path dir_;
  std::string url_;
};

}  // namespace railyard::testing
