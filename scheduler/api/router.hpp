// Routes /api/v1/... requests to the daemon's Service and renders the answers. No Beast here: requests and
// responses are the plain values of http.hpp. Every error is {"error": {"code", "message"}}.
//
// Auth: mutating routes (POST) need a bearer token; read routes too when `private_reads`. Admin routes
// (nodes drain/resume) need the admin role; a user may act only on their own jobs.
#pragma once

#include <string>

#include "scheduler/api/http.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::api {

struct RouterOptions {
  bool private_reads = false;
  std::string version = "0.1.0";
  std::string topology_json;  // served by GET /topology
};

inline constexpr size_t kMaxBatchJobs = 10'000;
inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 10'000;

class Router {
 public:
  Router(daemon::Service& service, RouterOptions options);
  void handle(HttpRequest&& req, const Reply& reply);
  // Body limit by target: 64 MiB for the batch route, 1 MiB otherwise.
  static size_t body_limit(std::string_view target);

 private:
  struct Route;
  void route(HttpRequest&& req, const Reply& reply);
  HttpResponse dispatch(const HttpRequest& req, const Route& route, const daemon::Caller* who);
  HttpResponse list_jobs(const Route& route);
  void submit(const HttpRequest& req, const daemon::Caller& who, bool batch, const Reply& reply);
  HttpResponse job_action(const Route& route, const daemon::Caller& who);
  HttpResponse node_action(const HttpRequest& req, const Route& route, const daemon::Caller& who);

  daemon::Service& service_;
  RouterOptions options_;
};

}  // namespace railyard::api
