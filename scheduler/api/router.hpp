// Routes HTTP requests to the daemon's Service and renders the answers. No Beast here: requests and
// responses are the plain values of http.hpp. Every error is {"error": {"code", "message"}}.
//
// One route table (routes.cpp, Router::routes()) lists every route: method, path pattern, who may call it
// (Access) and its handler; nothing else decides who may do what. A request is matched against it (a path
// that some route has but not with this method: 405 with Allow), then its caller is checked. The caller is
// the bearer token's; on the Unix socket, a request without an Authorization header is made by the Unix
// user the kernel names (peer_auth.hpp), with a token it is the token's as on TCP. No or a bad
// token where one is needed: 401 (unknown, expired, revoked: the message says which); a valid token without
// the role: 403 naming the rule. Tokens are accepted only in the Authorization header: a `token` or
// `access_token` query parameter is refused with 400 before anything else. Every request to a mutating
// route (POST) is written to the audit log with its outcome: by the Service with the change it makes,
// else (refusals, failures) as a deferred row. tests/route_role_test.cpp holds its own copy of every route's
// Access and fails when the two differ.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/api/http.hpp"
#include "scheduler/api/peer_auth.hpp"
#include "scheduler/api/static_files.hpp"
#include "scheduler/daemon/agents.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::api {

// Who may call a route.
enum class Access {
  kAnonymous,  // anyone, no token: health checks, version, the leader, the dashboard's files
  kRead,       // anyone; with --private any valid token (cluster-wide reads: nodes, topology, metrics)
  kJobRead,    // anyone; with --private the owner of job {id} or an admin; a list shows a user their own jobs
  kUser,       // any valid token
  kOwnerOrAdmin,  // the owner of job {id} or an admin (a job that does not exist: 404)
  kAdmin,         // an admin token
  kExecToken,     // the allocation's exec token (railyard-agent-exec; checked by the agent hub)
  kAgent,         // an agent's WebSocket, which proves itself to the agent hub (PROTOCOL.md)
};
std::string_view to_string(Access access);

// A route as the table has it. `pattern`: the path with {name} for one segment; "/*" is every path outside
// /api/v1 that no other route takes (the dashboard's files).
struct RouteInfo {
  std::string_view method;
  std::string_view pattern;
  Access access;
};

struct RouterOptions {
  bool private_reads = false;
  std::string version = "0.1.0";
  std::string topology_json;  // served by GET /topology
  std::string web_root;       // static files served at / ("" = none)
  PeerPolicy peer;            // who is an admin among Unix-socket callers
};

inline constexpr size_t kMaxBatchJobs = 10'000;
inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 10'000;

class Router {
 public:
  Router(daemon::Service& service, RouterOptions options);
  // Logs, exec and node connection details need the hub; without it those routes answer 503.
  void set_agent_hub(daemon::AgentHub* hub) { hub_ = hub; }
  // High availability: the answers of /healthz and GET /api/v1/leader (ha/standby.hpp's ha_route). Without
  // it /healthz answers {"status": "ok", "role": "leader"} and /api/v1/leader 404.
  using HaRoute = std::function<std::optional<HttpResponse>(const HttpRequest&)>;
  void set_ha_route(HaRoute ha) { ha_ = std::move(ha); }
  void handle(HttpRequest&& req, const Reply& reply);
  // Every route, in the order they are matched.
  static std::vector<RouteInfo> routes();
  // Body limit by target: 64 MiB for the batch route, 1 MiB otherwise.
  static size_t body_limit(std::string_view target);
  // Submits (POST /jobs, /jobs:batch) may run while earlier submits of the same connection wait for their
  // commit: each gets its ids in the order it came, and none reads what another writes.
  static bool concurrent(const HttpRequest& req);

 private:
  struct Route;
  struct Call;
  struct Entry;
  static std::span<const Entry> table();
  void route(HttpRequest&& req, const Reply& reply);
  // The caller check of the entry's Access: nullopt when the call may go on, else the refusal.
  std::optional<HttpResponse> check_access(const Entry& entry, Call& call);
  HttpResponse static_file(const HttpRequest& req);
  // `who`: the caller when the request named one (null: anonymous); what it may see of each job.
  HttpResponse list_jobs(const Route& route, const daemon::Caller* who);
  HttpResponse job_show(const Route& route, const daemon::Caller* who);
  HttpResponse cluster_read(const Route& route);
  // `idempotency_key`: the query parameter of that name (Service::submit).
  void submit(Call& call, bool batch);
  HttpResponse job_action(Call& call);
  HttpResponse node_action(Call& call);
  HttpResponse node_key(Call& call);  // router_admin.cpp
  // router_more.cpp: job events/metrics/runs/logs, node show, accounting, allocation exec.
  HttpResponse job_events(const Route& route);
  HttpResponse job_metrics(const Route& route);
  HttpResponse job_runs(const Route& route);
  void job_logs(const Route& route, const Reply& reply);
  // GET: the node's image cache (its agent's engine); POST {"image": ...}: start pulling it there (202).
  void node_images(const HttpRequest& req, const Route& route, const Reply& reply);
  void alloc_exec(const HttpRequest& req, const Route& route, const Reply& reply);
  HttpResponse node_show(const Route& route);
  HttpResponse accounting(const Route& route);
  HttpResponse quota_list();
  HttpResponse quota_action(Call& call);
  HttpResponse fair_share(const Route& route);
  // router_admin.cpp: tokens and the audit log.
  HttpResponse token_create(Call& call);
  HttpResponse token_list(const Call& call);
  HttpResponse token_revoke(Call& call);
  HttpResponse audit_log(const Route& route);

  daemon::Service& service_;
  RouterOptions options_;
  StaticFiles static_files_;
  daemon::AgentHub* hub_ = nullptr;
  HaRoute ha_;
};

}  // namespace railyard::api
