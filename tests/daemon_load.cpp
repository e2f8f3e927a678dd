// Load client for `railyard-scheduler` (bench/bench_submit.sh runs it): N keep-alive clients submit jobs for
// a fixed time, one per request (`single`) or `batch_size` per request (`batch`); prints acknowledged jobs/s.
// With PIPELINE > 1 each client keeps that many requests in flight on its connection (HTTP/1.1 pipelining).
// Meanwhile one more connection sends GET /api/v1/health every 10 ms and reports the slowest answers: how
// long the event loop was busy (a commit's fsync, a pass's snapshot and apply) while the load ran.
//
//   daemon_load PORT TOKEN CLIENTS SECONDS single|batch [BATCH_SIZE] [PIPELINE]
// RAILYARD_LOAD_KEYS=1 (single, no pipelining): each submit with its own idempotency key, as the CLI sends them.
//   daemon_load PORT TOKEN 1 SECONDS plan        submit-to-placed latency on an idle cluster, one job at a time
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/daemon_client.hpp"

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

// `plan` mode: on an idle cluster, one job at a time (50 ms apart, at most 500): how long until the submit is
// acknowledged, and until GET /jobs/ID shows it placed (polled back to back).
int submit_to_plan(int port, const std::string& token, double seconds) {
  railyard::testing::HttpClient submitter(port), poller(port);
  std::vector<double> ack_ms, placed_ms;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int failures = 0;
  while (std::chrono::steady_clock::now() < end && placed_ms.size() < 500) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = submitter.request("POST", "/api/v1/jobs", R"({"name": "plan", "gpus": 1})", token);
    if (r.status != 201) return std::fprintf(stderr, "submit: %d %s\n", r.status, r.body.c_str()), 1;
    ack_ms.push_back(ms_since(t0));
    const std::string path = "/api/v1/jobs/" + std::to_string(r.json().value("id", 0));
    for (;;) {
      const auto j = poller.request("GET", path).json();
      if (j.value("state", "PENDING") != "PENDING") break;
      if (ms_since(t0) > 5000) {
        ++failures;
        break;
      }
    }
    placed_ms.push_back(ms_since(t0));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf(
      "mode=plan jobs=%zu not_placed_in_5s=%d ack_ms_p50=%.2f p99=%.2f placed_ms_p50=%.2f p99=%.2f max=%.2f\n",
      placed_ms.size(), failures, quantile(ack_ms, 0.5), quantile(ack_ms, 0.99), quantile(placed_ms, 0.5),
      quantile(placed_ms, 0.99), quantile(placed_ms, 1.0));
  return failures > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s PORT TOKEN CLIENTS SECONDS single|batch|plan [BATCH_SIZE] [PIPELINE]\n", argv[0]);
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const std::string token = argv[2];
  const int clients = std::atoi(argv[3]);
  const double seconds = std::atof(argv[4]);
  if (std::string(argv[5]) == "plan") return submit_to_plan(port, token, seconds);
  const bool batch = std::string(argv[5]) == "batch";
  const int batch_size = argc > 6 ? std::atoi(argv[6]) : 1000;
  const int pipeline = argc > 7 ? std::max(1, std::atoi(argv[7])) : 1;

  std::string body = R"({"name": "load", "gpus": 1, "time_limit": 600})";
  std::string target = "/api/v1/jobs";
  if (batch) {
    body = R"({"jobs": [)";
    for (int i = 0; i < batch_size; ++i) body += std::string(i ? "," : "") + R"({"name": "load", "gpus": 1})";
    body += "]}";
    target = "/api/v1/jobs:batch";
  }
  std::atomic<long> jobs{0}, requests{0}, errors{0};
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  std::vector<std::vector<double>> submit_ms(static_cast<size_t>(clients));  // one-at-a-time mode: each answer
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      railyard::testing::HttpClient c(port);
      auto count = [&](const railyard::testing::HttpResult& r) {
        if (r.status != 201) return void(++errors);
        ++requests;
        jobs += batch ? batch_size : 1;
      };
      if (pipeline == 1) {
        // RAILYARD_LOAD_KEYS=1: every submit carries an idempotency key, as the CLI's do (issue 30).
        static std::atomic<long> next_key{0};
        const bool keys = std::getenv("RAILYARD_LOAD_KEYS") != nullptr;
        while (std::chrono::steady_clock::now() < end) {
          const auto t0 = std::chrono::steady_clock::now();
          count(c.request("POST", keys ? target + "?idempotency_key=k" + std::to_string(next_key++) : target, body,
                          token));
          submit_ms[static_cast<size_t>(t)].push_back(ms_since(t0));
        }
        return;
      }
      int in_flight = 0;
      for (; in_flight < pipeline; ++in_flight) c.send("POST", target, body, token);
      while (in_flight > 0) {
        auto r = c.receive();
        --in_flight;
        if (r.status == 0) return void(errors += in_flight + 1);  // connection lost
        count(r);
        if (std::chrono::steady_clock::now() < end) {
          c.send("POST", target, body, token);
          ++in_flight;
        }
      }
    });
  std::vector<double> probe_ms;
  std::thread probe([&] {
    railyard::testing::HttpClient c(port);
    while (std::chrono::steady_clock::now() < end) {
      const auto t0 = std::chrono::steady_clock::now();
      if (c.request("GET", "/api/v1/health").status == 200)
        probe_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  for (auto& t : threads) t.join();
  probe.join();
  std::sort(probe_ms.begin(), probe_ms.end());
  auto quantile = [&](double q) {
    return probe_ms.empty() ? 0.0
                            : probe_ms[static_cast<size_t>(q * static_cast<double>(probe_ms.size() - 1))];
  };
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> answers;
  for (const auto& v : submit_ms) answers.insert(answers.end(), v.begin(), v.end());
  std::printf(
      "mode=%s clients=%d pipeline=%d batch_size=%d requests=%ld jobs=%ld errors=%ld seconds=%.2f "
      "requests_per_s=%.0f jobs_per_s=%.0f health_ms_p50=%.1f p99=%.1f max=%.1f submit_ms_p50=%.2f p99=%.2f\n",
      batch ? "batch" : "single", clients, pipeline, batch ? batch_size : 1, requests.load(), jobs.load(),
      errors.load(), elapsed, requests / elapsed, jobs / elapsed, quantile(0.5), quantile(0.99),
      quantile(1.0), ::quantile(answers, 0.5), ::quantile(answers, 0.99));
  return errors > 0 ? 1 : 0;
}
