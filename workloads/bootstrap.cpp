#include "workloads/bootstrap.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <thread>

namespace railyard::workloads {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

std::optional<int> env_number(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  int value = 0;
  const std::string_view view(text);
  const auto [end, ec] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (ec != std::errc() || end != view.data() + view.size()) return std::nullopt;
  return value;
}

Status send_all(int fd, const unsigned char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return internal_error(std::string("send: ") + std::strerror(errno));
    data += n;
    size -= static_cast<size_t>(n);
  }
  return ok();
}

Status recv_all(int fd, unsigned char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return internal_error("rank 0 closed the connection early");
    if (n < 0) return internal_error(std::string("recv: ") + std::strerror(errno));
    data += n;
    size -= static_cast<size_t>(n);
  }
  return ok();
}

// One connection attempt to each address of host:port; the connected socket or -1.
int try_connect(const std::string& host, int port, milliseconds io_timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{static_cast<time_t>(io_timeout.count() / 1000),
               static_cast<suseconds_t>(io_timeout.count() % 1000 * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

Result<LaunchInfo> detect_launch() {
  LaunchInfo info;
  if (const auto size = env_number("OMPI_COMM_WORLD_SIZE")) {
    info.kind = LaunchInfo::Kind::kMpirun;
    info.world = *size;
    info.rank = env_number("OMPI_COMM_WORLD_RANK").value_or(0);
    return info;
  }
  const auto world = env_number("WORLD_SIZE");
  if (!world) return info;
  info.kind = LaunchInfo::Kind::kEnv;
  info.world = *world;
  info.rank = env_number("RANK").value_or(0);
  if (info.world < 1 || info.rank < 0 || info.rank >= info.world) {
    return invalid("RANK/WORLD_SIZE out of range: " + std::to_string(info.rank) + "/" +
                   std::to_string(info.world));
  }
  const char* addr = std::getenv("MASTER_ADDR");
  info.master_addr = addr != nullptr ? addr : "";
  info.master_port = env_number("MASTER_PORT").value_or(0);
  if (info.world > 1 && (info.master_addr.empty() || info.master_port <= 0)) {
    return invalid("WORLD_SIZE > 1 needs MASTER_ADDR and MASTER_PORT");
  }
  return info;
}

Result<BlobServer> BlobServer::listen(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return internal_error(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return internal_error("cannot listen on port " + std::to_string(port) + ": " + why);
  }
  return BlobServer(fd, ntohs(addr.sin_port));
}

BlobServer::BlobServer(BlobServer&& other) noexcept : fd_(other.fd_), port_(other.port_) { other.fd_ = -1; }

BlobServer::~BlobServer() {
  if (fd_ >= 0) ::close(fd_);
}

Status BlobServer::serve(std::span<const unsigned char> blob, int clients, milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  const uint32_t length = htonl(static_cast<uint32_t>(blob.size()));
  for (int served = 0; served < clients;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()).count();
    pollfd waiting{fd_, POLLIN, 0};
    const int ready = left > 0 ? ::poll(&waiting, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      return internal_error("only " + std::to_string(served) + " of " + std::to_string(clients) +
                            " ranks fetched the NCCL id before the deadline");
    }
    const int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    auto sent = send_all(conn, reinterpret_cast<const unsigned char*>(&length), sizeof length);
    if (sent) sent = send_all(conn, blob.data(), blob.size());
    ::close(conn);
    if (sent) ++served;
  }
  return ok();
}

Result<std::vector<unsigned char>> fetch_blob(const std::string& host, int port, milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  for (;;) {
    const int fd = try_connect(host, port, timeout);
    if (fd >= 0) {
      uint32_t length = 0;
      auto got = recv_all(fd, reinterpret_cast<unsigned char*>(&length), sizeof length);
      if (got && ntohl(length) > (1u << 20)) got = internal_error("implausible blob length");
      std::vector<unsigned char> blob(got ? ntohl(length) : 0);
      if (got) got = recv_all(fd, blob.data(), blob.size());
      ::close(fd);
      if (!got) return got.error();
      return blob;
    }
    if (SteadyClock::now() >= deadline) {
      return internal_error("cannot reach rank 0 at " + host + ":" + std::to_string(port) +
                            " (MASTER_ADDR/MASTER_PORT)");
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
}

}  // namespace railyard::workloads
