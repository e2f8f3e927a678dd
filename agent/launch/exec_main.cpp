// railyard-agent-exec <host> <command...>: the rsh agent mpirun uses instead of ssh
// (`--mca plm_rsh_agent railyard-agent-exec`). mpirun calls it once per remote host with orted's command.
//
// With RAILYARD_URL, RAILYARD_ALLOC_ID and RAILYARD_EXEC_TOKEN set (the agent sets them for every process
// of an allocation), the helper hands the command to <host>'s agent through the scheduler
// (scheduler/PROTOCOL.md, "railyard-agent-exec"):
//   POST $RAILYARD_URL/api/v1/allocs/$RAILYARD_ALLOC_ID/exec   Authorization: Bearer $RAILYARD_EXEC_TOKEN
//   {"node":"<host>","argv":["orted",...]}
// and exits 0 on 200 (the agent started orted under its supervision), 1 with the answer on stderr
// otherwise. A plain HTTP/1.1 client over a socket keeps this helper small and dependency-free.
//
// Without them (a tool run by hand, the agent_launch_test), it runs the command here, as ssh would run
// it on the remote host (the words joined by spaces, through /bin/sh -c), with the host's settings:
//   OMPI_MCA_btl_vader_backing_directory=<state>/vader/<host>  (one shared-memory dir per emulated node;
//                                                               without it ranks crash in the vader BTL)
//   RAILYARD_NODE=<host>, CUDA_VISIBLE_DEVICES from RAILYARD_ALLOC_GPUS ("node0:0,1;node1:2,3")
// <state> comes from RAILYARD_AGENT_STATE_DIR, which the launcher sets in mpirun's environment.
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace {

// "node0:0,1;node1:2,3" -> "0,1" for node0; nullopt-like "" with found=false when the host is absent.
bool gpus_of(const std::string& placement, const std::string& host, std::string& gpus) {
  size_t pos = 0;
  while (pos <= placement.size()) {
    const size_t end = std::min(placement.find(';', pos), placement.size());
    const std::string item = placement.substr(pos, end - pos);
    const size_t colon = item.find(':');
    if (colon != std::string::npos && item.substr(0, colon) == host) {
      gpus = item.substr(colon + 1);
      return true;
    }
    pos = end + 1;
  }
  return false;
}

bool safe_host(const std::string& host) {
  return !host.empty() && host.find('/') == std::string::npos && host != "." && host != "..";
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

int connect_to(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd >= 0) {
    timeval tv{120, 0};  // the scheduler answers after the agent started the command
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  return fd;
}

// POSTs the exec request; returns the exit code of the helper.
int forward(const std::string& url, const std::string& alloc, const std::string& token,
            const std::string& host, int argc, char** argv) {
  std::string rest = url.rfind("http://", 0) == 0 ? url.substr(7) : "";
  if (rest.empty()) {
    std::fprintf(stderr, "railyard-agent-exec: RAILYARD_URL must be http://HOST:PORT, not '%s'\n",
                 url.c_str());
    return 2;
  }
  const std::string authority = rest.substr(0, rest.find('/'));
  const size_t colon = authority.rfind(':');
  const std::string name = authority.substr(0, colon);
  const std::string port = colon == std::string::npos ? "80" : authority.substr(colon + 1);
  std::string body = "{\"node\":" + json_string(host) + ",\"argv\":[";
  for (int i = 2; i < argc; ++i) body += (i > 2 ? "," : "") + json_string(argv[i]);
  body += "]}";
  const std::string request = "POST /api/v1/allocs/" + alloc + "/exec HTTP/1.1\r\nHost: " + authority +
                              "\r\nAuthorization: Bearer " + token +
                              "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
  const int fd = connect_to(name, port);
  if (fd < 0) {
    std::fprintf(stderr, "railyard-agent-exec: cannot connect to %s\n", authority.c_str());
    return 1;
  }
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = write(fd, request.data() + sent, request.size() - sent);
    if (n <= 0) {
      std::fprintf(stderr, "railyard-agent-exec: write to %s: %s\n", authority.c_str(), std::strerror(errno));
      close(fd);
      return 1;
    }
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) response.append(buf, static_cast<size_t>(n));
  close(fd);
  int status = 0;
  if (std::sscanf(response.c_str(), "HTTP/1.%*d %d", &status) != 1) {
    std::fprintf(stderr, "railyard-agent-exec: no HTTP answer from %s\n", authority.c_str());
    return 1;
  }
  if (status == 200) return 0;
  const size_t start = response.find("\r\n\r\n");
  const std::string answer = start == std::string::npos ? response : response.substr(start + 4);
  std::fprintf(stderr, "railyard-agent-exec: exec on %s refused (HTTP %d): %s\n", host.c_str(), status,
               answer.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: railyard-agent-exec <host> <command...>\n");
    return 2;
  }
  const std::string host = argv[1];
  if (!safe_host(host)) {
    std::fprintf(stderr, "railyard-agent-exec: bad host name '%s'\n", host.c_str());
    return 2;
  }
  const char* url = std::getenv("RAILYARD_URL");
  const char* alloc = std::getenv("RAILYARD_ALLOC_ID");
  const char* token = std::getenv("RAILYARD_EXEC_TOKEN");
  if (url && alloc && token && *url && *alloc && *token) return forward(url, alloc, token, host, argc, argv);

  const char* state = std::getenv("RAILYARD_AGENT_STATE_DIR");
  const std::filesystem::path base = state != nullptr ? state : "/tmp/railyard-agent";
  const std::filesystem::path vader = base / "vader" / host;
  std::error_code ec;
  std::filesystem::create_directories(vader, ec);
  if (ec) {
    std::fprintf(stderr, "railyard-agent-exec: cannot create %s: %s\n", vader.c_str(), ec.message().c_str());
    return 1;
  }
  setenv("OMPI_MCA_btl_vader_backing_directory", vader.c_str(), 1);
  setenv("RAILYARD_NODE", host.c_str(), 1);
  std::string gpus;
  if (const char* placement = std::getenv("RAILYARD_ALLOC_GPUS"); placement && gpus_of(placement, host, gpus))
    setenv("CUDA_VISIBLE_DEVICES", gpus.c_str(), 1);
  std::string command;
  for (int i = 2; i < argc; ++i) command += (i > 2 ? " " : "") + std::string(argv[i]);
  execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
  std::perror("railyard-agent-exec: /bin/sh");
  return 127;
}
