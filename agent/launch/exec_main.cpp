// railyard-agent-exec <host> <command...>: the rsh agent mpirun uses instead of ssh
// (`--mca plm_rsh_agent railyard-agent-exec`). mpirun calls it once per remote host with orted's command.
//
// With RAILYARD_URL, RAILYARD_ALLOC_ID and RAILYARD_EXEC_TOKEN set (the agent sets them for every process
// of an allocation), the helper hands the command to <host>'s agent through the scheduler
// (scheduler/PROTOCOL.md, "railyard-agent-exec"):
//   POST $RAILYARD_URL/api/v1/allocs/$RAILYARD_ALLOC_ID/exec   Authorization: Bearer $RAILYARD_EXEC_TOKEN
//   {"node":"<host>","argv":["orted",...]}
// and exits 0 on 200 (the agent started orted under its supervision), 1 with the answer on stderr
// otherwise. It does not wait for orted as ssh would: the agent reports orted's failure instead
// (scheduler/PROTOCOL.md, "railyard-agent-exec"). RAILYARD_URL may be https:// (verified against
// RAILYARD_CA_FILE, else the system's CAs).
//
// Without them (a tool run by hand, the agent_launch_test), it runs the command here, as ssh would run
// it on the remote host (the words joined by spaces, through /bin/sh -c), with the host's settings:
//   OMPI_MCA_btl_vader_backing_directory=<state>/vader/<host>  (one shared-memory dir per emulated node;
//                                                               without it ranks crash in the vader BTL)
//   OMPI_MCA_orte_tmpdir_base=<state>/ompi/<host>  (one Open MPI session directory per emulated node: two
//                                                  orteds of a job on one machine race to mkdir the same
//                                                  job-family directory in /tmp, and the loser exits)
//   RAILYARD_NODE=<host>, CUDA_VISIBLE_DEVICES from RAILYARD_ALLOC_GPUS ("node0:0,1;node1:2,3")
// <state> comes from RAILYARD_AGENT_STATE_DIR, which the launcher sets in mpirun's environment.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "agent/launch/plan.hpp"
#include "common/net/http_client.hpp"

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

// POSTs the exec request to one scheduler: 0 (done), 1 (refused), or -1 (not answered by a leader: a
// transport failure or a standby's 503, so another URL may be tried).
int forward_one(const std::string& url, const std::string& alloc, const std::string& token,
                const std::string& host, const std::string& body) {
  auto parsed = railyard::net::parse_http_url(url, "RAILYARD_URL");
  if (!parsed) {
    std::fprintf(stderr, "railyard-agent-exec: %s\n", parsed.error().message.c_str());
    return 2;
  }
  const char* ca_file = std::getenv("RAILYARD_CA_FILE");
  // The scheduler answers after the agent started the command.
  railyard::net::HttpClient client(url, *parsed, std::chrono::seconds(120), ca_file ? ca_file : "");
  auto reply = client.request("POST", "/api/v1/allocs/" + alloc + "/exec", body, token);
  if (!reply) {
    std::fprintf(stderr, "railyard-agent-exec: %s\n", reply.error().message.c_str());
    return -1;
  }
  if (reply->status == 200) return 0;
  if (reply->status == 503) {
    std::fprintf(stderr, "railyard-agent-exec: %s answered 503 (not the leader?): %s\n", url.c_str(),
                 reply->body.c_str());
    return -1;
  }
  std::fprintf(stderr, "railyard-agent-exec: exec on %s refused (HTTP %d): %s\n", host.c_str(), reply->status,
               reply->body.c_str());
  return 1;
}

// RAILYARD_URL may list several schedulers (high availability, comma-separated): each is tried in turn, for
// up to 30 s, until the leader answers.
int forward(const std::string& urls, const std::string& alloc, const std::string& token,
            const std::string& host, int argc, char** argv) {
  std::string body = "{\"node\":" + json_string(host) + ",\"argv\":[";
  for (int i = 2; i < argc; ++i) body += (i > 2 ? "," : "") + json_string(argv[i]);
  body += "]}";
  std::vector<std::string> list;
  for (size_t start = 0; start <= urls.size();) {
    const size_t comma = std::min(urls.find(',', start), urls.size());
    if (comma > start) list.push_back(urls.substr(start, comma - start));
    start = comma + 1;
  }
  if (list.size() <= 1) {
    const int rc = forward_one(urls, alloc, token, host, body);
    return rc < 0 ? 1 : rc;
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (size_t k = 0;; ++k) {
    const int rc = forward_one(list[k % list.size()], alloc, token, host, body);
    if (rc >= 0) return rc;
    if (std::chrono::steady_clock::now() > until) return 1;
    if (k % list.size() == list.size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: railyard-agent-exec <host> <command...>\n");
    return 2;
  }
  std::string host = argv[1];
  // An image job's hostfile names every node with this suffix (plan.hpp): the node is the name without it.
  const std::string suffix = railyard::agent::kMpiDaemonHostSuffix;
  if (host.size() > suffix.size() && host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0)
    host.resize(host.size() - suffix.size());
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
  const std::filesystem::path session = base / "ompi" / host;
  for (const auto& dir : {vader, session}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      std::fprintf(stderr, "railyard-agent-exec: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
      return 1;
    }
  }
  setenv("OMPI_MCA_btl_vader_backing_directory", vader.c_str(), 1);
  setenv("OMPI_MCA_orte_tmpdir_base", session.c_str(), 1);
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
