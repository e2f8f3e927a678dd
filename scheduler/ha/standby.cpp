#include "scheduler/ha/standby.hpp"

#include <nlohmann/json.hpp>

namespace railyard::ha {

using nlohmann::json;

namespace {

json leader_object(const Elector& e) {
  auto leader = e.leader();
  if (!leader) return nullptr;
  return {{"name", leader->name}, {"address", leader->address}, {"epoch", leader->epoch},
          {"since_ms", leader->since_ms}};
}

std::string path_of(const api::HttpRequest& req) { return req.target.substr(0, req.target.find('?')); }

}  // namespace

std::string leader_json(const Elector& e, const Position& position) {
  const json leader = leader_object(e);
  const std::string leader_name = leader.is_null() ? "" : leader["name"].get<std::string>();
  json members = json::array();
  for (const auto& m : e.members())
    members.push_back({{"name", m.name},
                       {"address", m.address},
                       {"since_ms", m.since_ms},
                       {"role", m.name == leader_name ? "leader" : "standby"}});
  json self = {{"name", e.options().name},
               {"address", e.options().address},
               {"role", e.leading() ? "leader" : "standby"}};
  if (position) {
    const LogPosition p = position();
    self["applied"] = p.applied;
    if (!p.failure.empty()) self["following"] = p.failure;
  }
  return json{{"self", self}, {"leader", leader}, {"members", members}}.dump();
}

std::optional<api::HttpResponse> ha_route(const api::HttpRequest& req, const Elector& e, const Position& position) {
  const std::string path = path_of(req);
  if (path == "/healthz")
    return api::HttpResponse{
        200, "application/json", json{{"status", "ok"}, {"role", e.leading() ? "leader" : "standby"}}.dump(), {}};
  if (path == "/api/v1/leader" && (req.method == "GET" || req.method == "HEAD"))
    return api::HttpResponse{200, "application/json", leader_json(e, position), {}};
  return std::nullopt;
}

api::HttpResponse standby_answer(const api::HttpRequest& req, const Elector& e) {
  const json leader = leader_object(e);
  const std::string address = leader.is_null() ? "" : leader["address"].get<std::string>();
  const std::string path = path_of(req);
  if (!address.empty() && req.method == "GET" && path.rfind("/api/", 0) != 0)
    return api::HttpResponse{307, "text/plain", "the leader is " + address + "\n", {{"Location", address + req.target}}};
  json body = {{"error",
                {{"code", "not_leader"},
                 {"message", "this scheduler (" + e.options().name + ") is a standby; " +
                                 (address.empty() ? std::string("no leader is elected yet: retry")
                                                  : "the leader is " + address)}}},
               {"leader", leader}};
  return api::HttpResponse{503, "application/json", body.dump(), {{"Retry-After", "1"}}};
}

}  // namespace railyard::ha
