// The HTTP face of high availability (issue 30), for railyard-scheduler's main.cpp: what every instance
// answers at /healthz and GET /api/v1/leader, and what a standby answers to everything else (it serves
// nothing but those two: API requests get 503 with the leader's address, other GETs a 307 to the leader).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "scheduler/api/http.hpp"
#include "scheduler/ha/elector.hpp"

namespace railyard::ha {

// With replicated state (issue 46): how far this scheduler's database is in the leader's log (the last entry
// it wrote or applied), and why a standby stopped following it ("" while it follows).
struct LogPosition {
  int64_t applied = 0;
  std::string failure;
};
using Position = std::function<LogPosition()>;

// {"self": {"name", "address", "role": "leader"|"standby"[, "applied", "following"]}, "leader": {"name",
//  "address", "epoch", "since_ms"} or null, "members": [{"name", "address", "since_ms", "role"}]}
// ("applied" and "following" with replicated state: `position` set).
std::string leader_json(const Elector& elector, const Position& position = {});

// /healthz and GET /api/v1/leader: their answer; nullopt for any other request.
std::optional<api::HttpResponse> ha_route(const api::HttpRequest& req, const Elector& elector,
                                          const Position& position = {});

// A standby's answer to a request ha_route() did not take.
api::HttpResponse standby_answer(const api::HttpRequest& req, const Elector& elector);

}  // namespace railyard::ha
