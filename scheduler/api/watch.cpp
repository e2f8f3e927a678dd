#include "scheduler/api/watch.hpp"

#include <set>

#include "common/json_text.hpp"
#include "scheduler/api/auth.hpp"
#include "scheduler/api/router_util.hpp"
#include "scheduler/api/views.hpp"

namespace railyard::api {

using nlohmann::json;

WatchHub::WatchHub(daemon::Service& service, bool private_reads)
    : service_(service), private_(private_reads) {}

void WatchHub::start() {
  service_.add_observer([this](const store::WriteBatch& b) { on_batch(b); });
}

void WatchHub::send(Sub& s, const json& frame) {
  s.peer->send(frame.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::optional<Result<daemon::Caller>> WatchHub::caller_of(const HttpRequest& req) const {
  if (!req.authorization.empty()) {
    auto token = bearer_token(req.authorization);
    if (!token) return Result<daemon::Caller>(Error{ErrorCode::kPermission, "malformed Authorization header"});
    auto auth = service_.authenticate(*token);
    if (!auth) return Result<daemon::Caller>(auth.error());
    if (!auth->caller) return Result<daemon::Caller>(Error{ErrorCode::kPermission, auth->refusal});
    return Result<daemon::Caller>(*auth->caller);
  }
  if (req.peer) {
    auto who = peer_caller(*req.peer, peer_policy_);
    if (who || private_) return who;  // without --private an unknown uid watches as anyone does
  }
  return std::nullopt;
}

std::optional<WsHandlers> WatchHub::accept(const HttpRequest& req, const std::shared_ptr<WsPeer>& peer) {
  Sub s{peer, std::nullopt, !private_, std::nullopt};
  const size_t q = req.target.find('?');
  if (q != std::string::npos) {
    std::string_view qs = std::string_view(req.target).substr(q + 1);
    if (qs.substr(0, 4) != "job=") return std::nullopt;
    auto id = to_int(qs.substr(4));
    if (!id) return std::nullopt;
    s.job = *id;
  }
  WsPeer* key = peer.get();
  Sub& added = subs_[key] = std::move(s);
  if (auto who = caller_of(req); who && *who) {
    identify(added, std::move(*who));
  } else if (who) {  // refused once the upgrade is done: the session cannot close before it is accepted
    service_.loop().post([this, weak = std::weak_ptr<WsPeer>(peer), e = who->error()] {
      auto p = weak.lock();
      if (auto it = p ? subs_.find(p.get()) : subs_.end(); it != subs_.end() && it->second.peer == p)
        identify(it->second, e);
    });
  } else if (added.authed) {
    send(added, {{"type", "hello"}, {"v", 1}});
  } else {
    service_.loop().post_after(kWatchAuthDeadline, [this, weak = std::weak_ptr<WsPeer>(peer)] { expire_auth(weak); });
  }
  return WsHandlers{[this, key](std::string_view text) { on_message(key, text); },
                    [this, key] { subs_.erase(key); }};
}

void WatchHub::expire_auth(const std::weak_ptr<WsPeer>& weak) {
  auto peer = weak.lock();
  if (!peer) return;
  auto it = subs_.find(peer.get());
  if (it == subs_.end() || it->second.peer != peer || it->second.authed) return;
  send(it->second, {{"type", "error"},
                    {"code", "unauthorized"},
                    {"message", "no auth frame within " + std::to_string(kWatchAuthDeadline.count()) +
                                    " s (the scheduler runs with --private)"}});
  peer->close();
}

void WatchHub::identify(Sub& s, Result<daemon::Caller> who) {
  if (!who) {
    send(s, {{"type", "error"}, {"code", "unauthorized"}, {"message", who.error().message}});
    return s.peer->close();
  }
  const bool was_authed = s.authed;
  s.viewer = std::move(*who);
  s.authed = true;
  if (!was_authed) send(s, {{"type", "hello"}, {"v", 1}});
}

// An auth frame names the watcher: required first with --private, optional (once) without.
void WatchHub::on_message(WsPeer* peer, std::string_view text) {
  auto it = subs_.find(peer);
  if (it == subs_.end() || it->second.viewer) return;  // watchers have nothing else to say
  Sub& s = it->second;
  auto parsed = parse_json_bounded(text);
  json m = parsed ? std::move(*parsed) : json();
  const bool auth_frame = m.is_object() && m.value("type", "") == "auth";
  if (s.authed && !auth_frame) return;
  if (!auth_frame || !m.contains("token") || !m["token"].is_string())
    return identify(s, Error{ErrorCode::kPermission, parsed ? "first frame must be a valid auth"
                                                            : "first frame: " + parsed.error().message});
  auto c = service_.authenticate(m["token"].get<std::string>());
  if (!c) return identify(s, c.error());
  if (!c->caller) return identify(s, Error{ErrorCode::kPermission, c->refusal});
  identify(s, *c->caller);
}

void WatchHub::on_batch(const store::WriteBatch& b) {
  if (subs_.empty()) return;
  const auto& table = service_.table();
  std::set<jobs::JobId> ids;
  for (const auto& r : b.inserts) ids.insert(r.id);
  for (const auto& r : b.updates) ids.insert(r.id);
  // A task's change changes its array's progress (array_tasks) too. Updates carry no spec: look it up.
  for (const auto& list : {&b.inserts, &b.updates})
    for (const auto& r : *list)
      if (const auto* cur = table.find(r.id); cur && cur->spec.array_job != 0)
        ids.insert(cur->spec.array_job);
  for (jobs::JobId id : ids) {
    const auto* r = table.find(id);
    if (!r) continue;
    std::optional<json> full, hidden;  // built once each: the owner's and admins' view, everyone else's
    for (auto& [p, s] : subs_) {
      if (!s.authed || (s.job && *s.job != id) || (only_own(s) && s.viewer->user != r->spec.user)) continue;
      const daemon::Caller* viewer = s.viewer ? &*s.viewer : nullptr;
      std::optional<json>& frame = sees_env(*r, viewer) ? full : hidden;
      if (!frame) frame = json{{"type", "job"}, {"job", job_json(*r, table, viewer)}};
      send(s, *frame);
    }
  }
  if (b.nodes.empty()) return;
  std::set<std::string> names;
  for (const auto& n : b.nodes) names.insert(n.name);
  for (auto& n : nodes_json(table)) {
    if (!names.count(n["name"].get<std::string>())) continue;
    const json frame = {{"type", "node"}, {"node", n}};
    for (auto& [p, s] : subs_)
      if (s.authed && !s.job) send(s, frame);
  }
}

void WatchHub::on_metrics(jobs::JobId job, const json& events) {
  const store::JobRecord* r = service_.table().find(job);
  for (auto& [p, s] : subs_)
    if (s.authed && (!s.job || *s.job == job) && (!only_own(s) || (r && r->spec.user == s.viewer->user)))
      send(s, {{"type", "metrics"}, {"job", job}, {"events", events}});
}

}  // namespace railyard::api
