// Latency for other clients while a slow-loris crowd holds connections (bench/abuse_p99.sh runs it).
//
//   abuse_load PORT TOKEN SCHEDULER_PID CONNECTIONS SECONDS
//
// First SECONDS without the crowd, then SECONDS with it: CONNECTIONS sockets that each send half a request
// header and nothing more; one that the scheduler closes (header timeout, or 503 over --max-connections) is
// opened again a second later, as a persistent attacker would. Meanwhile two clients time GET /api/v1/jobs
// back to back: one on a keep-alive connection opened before the crowd, one on a new connection per request.
// Prints p50/p99/max of each, how many answers were not 200, how many of the crowd were held, and the
// scheduler's VmRSS (from /proc) before and during.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/abuse_util.hpp"
#include "tests/daemon_client.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using railyard::testing::HttpClient;

struct Sample {
  std::vector<double> ms;
  int not_ok = 0;
};

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

long rss_kib(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// GET /api/v1/jobs back to back for `seconds`: on `keep` (keep-alive), or on a new connection each time.
Sample measure(int port, const std::string& token, HttpClient* keep, double seconds) {
  Sample s;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    int status = 0;
    if (keep) {
      status = keep->request("GET", "/api/v1/jobs?limit=10", "", token).status;
    } else {
      HttpClient fresh(port);
      status = fresh.request("GET", "/api/v1/jobs?limit=10", "", token).status;
    }
    s.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (status != 200) ++s.not_ok;
    if (!keep && status != 200)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // refused: back off
  }
  return s;
}

void print(const char* phase, const char* client, const Sample& s) {
  std::printf("%-7s %-10s requests %6zu  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  not-200 %d\n", phase,
              client, s.ms.size(), quantile(s.ms, 0.5), quantile(s.ms, 0.99), quantile(s.ms, 1.0), s.not_ok);
}

// Keeps `n` half-sent requests open until `stop`; reopens a closed one after a second. `held` is how many
// are open and not yet closed by the scheduler.
void crowd(int port, size_t n, const std::atomic<bool>& stop, std::atomic<size_t>& held,
           std::atomic<long>& reopened) {
  const std::string half = "GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  std::vector<pollfd> fds(n, pollfd{-1, POLLIN, 0});
  std::vector<Clock::time_point> closed_at(n, Clock::now() - std::chrono::seconds(2));
  while (!stop) {
    size_t open = 0;
    for (size_t i = 0; i < n && !stop; ++i) {
      if (fds[i].fd >= 0 || Clock::now() - closed_at[i] < std::chrono::seconds(1)) continue;
      fds[i].fd = railyard::testing::connect_local(port);
      if (fds[i].fd >= 0) railyard::testing::send_all(fds[i].fd, half);
      ++reopened;
    }
    ::poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < n; ++i) {
      if (fds[i].fd < 0) continue;
      // Any event means answered (503) or closed: either way the scheduler let go of it.
      if (fds[i].revents != 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        closed_at[i] = Clock::now();
        continue;
      }
      ++open;
    }
    held = open;
  }
  for (auto& p : fds)
    if (p.fd >= 0) ::close(p.fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: abuse_load PORT TOKEN SCHEDULER_PID CONNECTIONS SECONDS\n");
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const std::string token = argv[2];
  const int pid = std::atoi(argv[3]);
  const size_t n = std::stoul(argv[4]);
  const double seconds = std::atof(argv[5]);

  HttpClient keep(port);
  if (keep.request("GET", "/api/v1/jobs", "", token).status != 200) {
    std::fprintf(stderr, "abuse_load: GET /api/v1/jobs is not 200 before the crowd\n");
    return 1;
  }
  std::printf("RSS before: %ld KiB\n", rss_kib(pid));
  // Keep-alive last: its connection must not sit idle past the header timeout before the crowd comes.
  print("before", "new-conn", measure(port, token, nullptr, seconds));
  print("before", "keep-alive", measure(port, token, &keep, seconds));

  std::atomic<bool> stop{false};
  std::atomic<size_t> held{0};
  std::atomic<long> reopened{0};
  std::thread attacker(crowd, port, n, std::cref(stop), std::ref(held), std::ref(reopened));
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the crowd connects
  std::printf("crowd of %zu: %zu held after 3 s, RSS %ld KiB\n", n, held.load(), rss_kib(pid));
  const Sample during_keep = measure(port, token, &keep, seconds);
  const size_t held_mid = held.load();
  const long rss_mid = rss_kib(pid);
  const Sample during_new = measure(port, token, nullptr, seconds);
  print("during", "keep-alive", during_keep);
  print("during", "new-conn", during_new);
  std::printf(
      "crowd: %zu held mid-run, %zu at the end, %ld connects in all; RSS during: %ld KiB, at the end %ld "
      "KiB\n",
      held_mid, held.load(), reopened.load(), rss_mid, rss_kib(pid));
  stop = true;
  attacker.join();
  return 0;
}
