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
  if (s.authed) send(s, {{"type", "hello"}, {"v", 1}});
  subs_[key] = std::move(s);
  return WsHandlers{[this, key](std::string_view text) { on_message(key, text); },
                    [this, key] { subs_.erase(key); }};
}

void WatchHub::on_message(WsPeer* peer, std::string_view text) {
  auto it = subs_.find(peer);
  if (it == subs_.end() || it->second.authed) return;  // watchers have nothing else to say
  Sub& s = it->second;
  auto parsed = parse_json_bounded(text);
  json m = parsed ? std::move(*parsed) : json();
  std::optional<daemon::Caller> who;
  std::string refusal =
      parsed ? "first frame must be a valid auth" : "first frame: " + parsed.error().message;
  if (m.is_object() && m.value("type", "") == "auth" && m.contains("token") && m["token"].is_string()) {
    auto c = service_.authenticate(m["token"].get<std::string>());
    if (c && c->caller) who = c->caller;
    if (c && !c->caller) refusal = c->refusal;
  }
  if (!who) {
    send(s, {{"type", "error"}, {"code", "unauthorized"}, {"message", refusal}});
    return s.peer->close();
  }
  s.authed = true;
  if (!who->admin()) s.only_user = who->user;  // --private: a user sees only their own jobs
  send(s, {{"type", "hello"}, {"v", 1}});
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
    std::optional<json> frame;
    for (auto& [p, s] : subs_) {
      if (!s.authed || (s.job && *s.job != id) || (s.only_user && *s.only_user != r->spec.user)) continue;
      if (!frame) frame = json{{"type", "job"}, {"job", job_json(*r, table)}};
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
    if (s.authed && (!s.job || *s.job == job) && (!s.only_user || (r && r->spec.user == *s.only_user)))
      send(s, {{"type", "metrics"}, {"job", job}, {"events", events}});
}

}  // namespace railyard::api
