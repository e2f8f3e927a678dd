// Raw-socket clients for the protocol-abuse tests (abuse_test.cpp): a WebSocket client that writes frames
// byte by byte (so a test can announce a 100 MB frame without sending it), and idle connections that hold a
// half-sent request. POSIX sockets only, no Beast (compile time).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace railyard::testing {

// A connected TCP socket to 127.0.0.1:port, or -1.
inline int connect_local(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Up to `n` bytes, waiting at most `timeout` for each read; "" once the peer closed (or reset) or nothing
// came.
inline std::string recv_some(int fd, size_t n, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return "";
  std::string out(n, '\0');
  const ssize_t got = ::recv(fd, out.data(), n, 0);
  out.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return out;
}

// Whether the peer closed the connection within `timeout` (data before the close is read and dropped).
inline bool closed_by_peer(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

// A WebSocket client over a raw socket. Frames it sends are masked with the key 0 (so the payload goes as
// is); frames it reads are the server's (unmasked).
class RawWebSocket {
 public:
  RawWebSocket(int port, const std::string& target) : fd_(connect_local(port)) {
    if (fd_ < 0) return;
    send_all(fd_, "GET " + target +
                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    while (buf_.find("\r\n\r\n") == std::string::npos) {
      const std::string got = recv_some(fd_, 4096, std::chrono::seconds(30));
      if (got.empty()) return;
      buf_ += got;
    }
    open_ = buf_.rfind("HTTP/1.1 101", 0) == 0;
    buf_.erase(0, buf_.find("\r\n\r\n") + 4);
  }
  ~RawWebSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawWebSocket(const RawWebSocket&) = delete;
  RawWebSocket& operator=(const RawWebSocket&) = delete;

  bool open() const { return open_; }

  // The header of a final frame of `length` bytes (opcode 1: text); the payload is the caller's to send.
  bool send_header(uint64_t length, int opcode = 1) {
    std::string h(1, static_cast<char>(0x80 | opcode));
    if (length < 126) {
      h += static_cast<char>(0x80 | length);
    } else if (length <= 0xffff) {
      h += static_cast<char>(0x80 | 126);
      for (int shift = 8; shift >= 0; shift -= 8) h += static_cast<char>((length >> shift) & 0xff);
    } else {
      h += static_cast<char>(0x80 | 127);
      for (int shift = 56; shift >= 0; shift -= 8) h += static_cast<char>((length >> shift) & 0xff);
    }
    h += std::string(4, '\0');  // the masking key
    return send_all(fd_, h);
  }
  bool send_payload(std::string_view bytes) { return send_all(fd_, bytes); }
  bool send_text(std::string_view text) { return send_header(text.size()) && send_payload(text); }

  struct Frame {
    int opcode = 0;  // 1 text, 8 close
    std::string payload;
    // A close frame's status code (1009: message too big), 0 when it has none.
    int close_code() const {
      return payload.size() >= 2 ? (static_cast<uint8_t>(payload[0]) << 8) | static_cast<uint8_t>(payload[1])
                                 : 0;
    }
  };
  // The next frame, or nullopt when the connection ended or nothing came within `timeout` per read.
  std::optional<Frame> read_frame(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    if (!fill(2, timeout)) return std::nullopt;
    Frame f;
    f.opcode = static_cast<uint8_t>(buf_[0]) & 0x0f;
    uint64_t len = static_cast<uint8_t>(buf_[1]) & 0x7f;
    size_t at = 2;
    const size_t extra = len == 126 ? 2 : len == 127 ? 8 : 0;
    if (!fill(at + extra, timeout)) return std::nullopt;
    if (extra > 0) {
      len = 0;
      for (size_t i = 0; i < extra; ++i) len = (len << 8) | static_cast<uint8_t>(buf_[at + i]);
      at += extra;
    }
    if (len > (size_t{1} << 24) || !fill(at + len, timeout)) return std::nullopt;
    f.payload = buf_.substr(at, len);
    buf_.erase(0, at + len);
    return f;
  }

 private:
  bool fill(size_t n, std::chrono::milliseconds timeout) {
    while (buf_.size() < n) {
      const std::string got = recv_some(fd_, 65536, timeout);
      if (got.empty()) return false;
      buf_ += got;
    }
    return true;
  }

  int fd_ = -1;
  bool open_ = false;
  std::string buf_;
};

}  // namespace railyard::testing
