// Test helpers for the scheduler daemon: run the real `railyard-scheduler` as a child process, and talk
// HTTP/1.1 to it over a plain POSIX socket (keep-alive), so the tests need no Beast (compile time).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace railyard::testing {

// Two dgx-h100 nodes under one leaf switch: the cluster of the API tests that need no placement choice.
inline constexpr const char* kOneLeafCluster =
    R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n[1-2]"}]})";

struct HttpResult {
  int status = 0;  // 0: no answer (connection failed)
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

class HttpClient {
 public:
  explicit HttpClient(int port) : port_(port) {}
  // Over the Unix socket at `unix_path` (railyard-scheduler --unix-socket).
  explicit HttpClient(std::string unix_path) : port_(0), unix_path_(std::move(unix_path)) {}
  ~HttpClient() { close_fd(); }
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResult request(const std::string& method, const std::string& target, const std::string& body = "",
                     const std::string& token = "") {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!send(method, target, body, token)) return {};
      HttpResult r;
      if (read_response(r)) return r;
      close_fd();  // stale keep-alive connection: retry once on a new one
    }
    return {};
  }

  // Pipelining: send() requests without waiting, then receive() their answers in order (no retry).
  bool send(const std::string& method, const std::string& target, const std::string& body = "",
            const std::string& token = "") {
    if (fd_ < 0 && !connect_fd()) return false;
    send_all(request_text(method, target, body, token));  // errors show up as a failed read
    return true;
  }
  bool send_raw(const std::string& bytes) {
    if (fd_ < 0 && !connect_fd()) return false;
    send_all(bytes);
    return true;
  }
  HttpResult receive() {
    HttpResult r;
    if (!read_response(r)) return {};
    return r;
  }
  static std::string request_text(const std::string& method, const std::string& target,
                                  const std::string& body = "", const std::string& token = "") {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
    if (!body.empty() || method == "POST")
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    return req + "\r\n" + body;
  }

 private:
  bool connect_unix() {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (unix_path_.size() >= sizeof a.sun_path) return false;
    unix_path_.copy(a.sun_path, unix_path_.size());
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close_fd();
      return false;
    }
    buf_.clear();
    return true;
  }
  bool connect_fd() {
    if (!unix_path_.empty()) return connect_unix();
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close_fd();
      return false;
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    buf_.clear();
    return true;
  }
  void close_fd() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  bool fill() {
    char tmp[65536];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  bool read_response(HttpResult& r) {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!fill()) return false;
    const std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    if (head.size() < 12) return false;
    r.status = std::atoi(head.c_str() + 9);
    size_t len = 0;
    bool close_after = false;
    for (size_t p = head.find("\r\n"); p != std::string::npos; p = head.find("\r\n", p + 2)) {
      std::string line = head.substr(p + 2, head.find("\r\n", p + 2) - p - 2);
      for (auto& ch : line) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (line.rfind("content-length:", 0) == 0) len = std::strtoul(line.c_str() + 15, nullptr, 10);
      if (line.rfind("connection:", 0) == 0 && line.find("close") != std::string::npos) close_after = true;
    }
    while (buf_.size() < len)
      if (!fill()) return false;
    r.body = buf_.substr(0, len);
    buf_.erase(0, len);
    if (close_after) close_fd();
    return true;
  }

  int port_;
  std::string unix_path_;
  int fd_ = -1;
  std::string buf_;
};

// A temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "railyard-daemon-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A program run in the background with stdout and stderr appended to `log`; SIGTERM and wait on destruction.
class ChildProcess {
 public:
  ChildProcess(const std::string& bin, const std::vector<std::string>& args, const std::string& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<char*> argv{const_cast<char*>(bin.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      std::_Exit(127);
    }
  }
  ~ChildProcess() { stop(SIGTERM); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `sig` and waits; returns the wait status (0 when already stopped).
  int stop(int sig) {
    int status = 0;
    if (pid_ > 0) {
      ::kill(pid_, sig);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    return status;
  }

 private:
  pid_t pid_ = -1;
};

// Runs a command, returns its standard output (stderr passes through).
inline std::string run_capture(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

// `railyard-scheduler token create`, returning the token (the last line of its output).
inline std::string create_token(const std::string& bin, const std::string& db, const std::string& user,
                                const std::string& role) {
  std::string out = run_capture(bin + " token create --db " + db + " --user " + user + " --role " + role);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  const size_t nl = out.rfind('\n');
  return nl == std::string::npos ? out : out.substr(nl + 1);
}

// The daemon as a child process; its port is read from "listening on HOST:PORT" on its stdout.
class DaemonProcess {
 public:
  DaemonProcess(const std::string& bin, std::vector<std::string> args) {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<char*> argv{const_cast<char*>(bin.c_str())};
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      std::_Exit(127);
    }
    ::close(out[1]);
    out_ = out[0];
    port_ = read_port();
  }
  ~DaemonProcess() { stop(SIGTERM); }
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  int port() const { return port_; }
  // Ends the daemon with `sig` (SIGKILL for a crash) and waits for it; returns its wait status.
  int stop(int sig) {
    int status = 0;
    if (pid_ > 0) {
      ::kill(pid_, sig);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    if (out_ >= 0) ::close(out_);
    out_ = -1;
    return status;
  }

 private:
  int read_port() {
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char buf[256];
      ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
      const size_t at = text.find("listening on ");
      if (at == std::string::npos) continue;
      const size_t eol = text.find('\n', at);
      if (eol == std::string::npos) continue;
      const std::string addr = text.substr(at + 13, eol - at - 13);
      return std::atoi(addr.c_str() + addr.rfind(':') + 1);
    }
    return 0;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int port_ = 0;
};

}  // namespace railyard::testing
