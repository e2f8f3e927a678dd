// Routes /api/v1/... requests to the daemon's Service and renders the answers. No Beast here: requests and
// responses are the plain values of http.hpp. Every error is {"error": {"code", "message"}}.
//
// Auth: mutating routes (POST) need a bearer token; read routes too when `private_reads`. Admin routes
// (nodes drain/resume) need the admin role; a user may act only on their own jobs.
#pragma once

#include <string>

#include "scheduler/api/http.hpp"
#include "scheduler/api/static_files.hpp"
#include "scheduler/daemon/agents.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::api {

struct RouterOptions {
  bool private_reads = false;
  std::string version = "0.1.0";
  std::string topology_json;  // served by GET /topology
  std::string web_root;       // static files served at / ("" = none)
};

inline constexpr size_t kMaxBatchJobs = 10'000;
inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 10'000;

class Router {
 public:
  Router(daemon::Service& service, RouterOptions options);
  // Logs, exec and node connection details need the hub; without it those routes answer 503.
  void set_agent_hub(daemon::AgentHub* hub) { hub_ = hub; }
  void handle(HttpRequest&& req, const Reply& reply);
  // Body limit by target: 64 MiB for the batch route, 1 MiB otherwise.
  static size_t body_limit(std::string_view target);
  // Submits (POST /jobs, /jobs:batch) may run while earlier submits of the same connection wait for their
  // commit: each gets its ids in the order it came, and none reads what another writes.
  static bool concurrent(const HttpRequest& req);

 private:
  struct Route;
  void route(HttpRequest&& req, const Reply& reply);
  HttpResponse dispatch(const HttpRequest& req, const Route& route, const daemon::Caller* who);
  HttpResponse list_jobs(const Route& route);
  // `idempotency_key`: the query parameter of that name (Service::submit).
  void submit(const HttpRequest& req, const daemon::Caller& who, bool batch, const std::string& idempotency_key,
              const Reply& reply);
  HttpResponse job_action(const Route& route, const daemon::Caller& who);
  HttpResponse node_action(const HttpRequest& req, const Route& route, const daemon::Caller& who);
  // router_more.cpp: job events/metrics/runs/logs, node show, accounting, allocation exec.
  HttpResponse job_events(const Route& route);
  HttpResponse job_metrics(const Route& route);
  HttpResponse job_runs(const Route& route);
  void job_logs(const Route& route, const daemon::Caller* who, const Reply& reply);
  void alloc_exec(const HttpRequest& req, const Route& route, const Reply& reply);
  HttpResponse node_show(const Route& route);
  HttpResponse accounting(const Route& route);

  daemon::Service& service_;
  RouterOptions options_;
  StaticFiles static_files_;
  daemon::AgentHub* hub_ = nullptr;
};

}  // namespace railyard::api
