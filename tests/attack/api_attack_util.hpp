// Helpers of the API attack tests (api_test.cpp): the scheduler's process id and resident memory, a WebSocket
// client that sends one frame, a fake HTTP server that records what reaches it, and running the CLI.
// POSIX only, no Beast (compile time).
#pragma once

#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace railyard::testing {

// The pid of the running program `bin` whose command line holds `arg` (0: none).
inline pid_t find_process(const std::string& bin, const std::string& arg) {
  DIR* proc = ::opendir("/proc");
  if (!proc) return 0;
  pid_t found = 0;
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd.rfind(bin + '\0', 0) == 0 && cmd.find(std::string(1, '\0') + arg + '\0') != std::string::npos) {
      found = pid;
      break;
    }
  }
  ::closedir(proc);
  return found;
}

// VmRSS of `pid` in KiB (0 when unknown).
inline long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

// A one-connection-at-a-time HTTP server on 127.0.0.1 answering every request with `answer` (a whole HTTP
// response) and recording each request's head. Stops on destruction.
class FakeHttpServer {
 public:
  explicit FakeHttpServer(std::string answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("fake server: cannot listen");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeHttpServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  FakeHttpServer(const FakeHttpServer&) = delete;
  FakeHttpServer& operator=(const FakeHttpServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The heads of the requests received so far.
  std::vector<std::string> heads() {
    std::lock_guard<std::mutex> lock(mu_);
    return heads_;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string head;
      char buf[4096];
      while (head.find("\r\n\r\n") == std::string::npos) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 2000) <= 0) break;
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        head.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        heads_.push_back(head);
      }
      ::send(c, answer_.data(), answer_.size(), MSG_NOSIGNAL);
      ::shutdown(c, SHUT_WR);
      ::close(c);
    }
  }

  std::string answer_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> heads_;
};

// An HTTP/1.1 response with a JSON body.
inline std::string http_answer(int status, const std::string& reason, const std::string& json) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
         std::to_string(json.size()) + "\r\n\r\n" + json;
}

struct CommandResult {
  int status = -1;  // the exit status
  std::string output;  // stdout and stderr
};

// Runs `command` with sh, stdout and stderr into `log`.
inline CommandResult run_command(const std::string& command, const std::string& log) {
  const int raw = std::system((command + " >" + log + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, ss.str()};
}

}  // namespace railyard::testing
