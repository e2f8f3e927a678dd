#include "scheduler/daemon/node_admin.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/protocol/key_file.hpp"

namespace railyard::daemon {

Status NodeAdmin::set_health(const std::string& name, sched::NodeHealth health, std::string reason,
                             const Caller& who, const store::AuditRecord* audit) {
  if (auto s = need_admin(who, "changing a node"); !s) return s;
  const topology::NodeId id = table_.cluster().find_node(name);
  if (id < 0) return not_found("node " + name + " not found");
  if (table_.health(id) == sched::NodeHealth::kRemoved && health != sched::NodeHealth::kUp)
    return Error{ErrorCode::kConflict, "node " + name + " is removed: resume it first"};
  store::WriteBatch b;
  const std::string what = std::string(sched::to_string(health)) + (reason.empty() ? "" : ": " + reason);
  b.nodes.push_back({name, health, std::move(reason)});
  b.events.push_back({"node:" + name, clock_(), who.user, what});
  if (audit) b.audit.push_back(*audit);
  if (auto s = sink_.commit(b); !s) return s;
  spdlog::info("node {} {} by {}", name, what, who.user);
  return ok();
}

Status NodeAdmin::remove(const std::string& name, const Caller& who, const store::AuditRecord* audit) {
  if (auto s = need_admin(who, "changing a node"); !s) return s;
  const topology::NodeId id = table_.cluster().find_node(name);
  if (id < 0) return not_found("node " + name + " not found");
  if (table_.health(id) == sched::NodeHealth::kRemoved) {
    if (audit) sink_.audit(*audit);
    return ok();
  }
  auto on_node = [&](const std::vector<std::string>& nodes) {
    return std::find(nodes.begin(), nodes.end(), name) != nodes.end();
  };
  for (const auto& [job, r] : table_.jobs())
    if ((r.state == jobs::JobState::kStarting || r.state == jobs::JobState::kRunning) && on_node(r.nodes))
      return Error{ErrorCode::kConflict,
                   "node " + name + " runs job " + std::to_string(job) +
                       ": drain it first and wait for its jobs to end (or cancel them)"};
  for (const auto& [alloc, h] : table_.gpu_holds())
    if (on_node(h.nodes))
      return Error{ErrorCode::kConflict, "node " + name + " still holds the GPUs of allocation " + alloc +
                                             " (its kill is not confirmed yet): try again once it is"};
  store::WriteBatch b;
  b.nodes.push_back({name, sched::NodeHealth::kRemoved, "removed by " + who.user});
  b.events.push_back({"node:" + name, clock_(), who.user, "removed"});
  if (audit) b.audit.push_back(*audit);
  if (auto s = sink_.commit(b); !s) return s;
  spdlog::info("node {} removed by {}", name, who.user);
  return ok();
}

Result<std::string> NodeAdmin::issue_key(const std::string& name, bool rotate, int64_t grace_s, bool force,
                                        const Caller& who, const store::AuditRecord* audit) {
  if (auto s = need_admin(who, "issuing a node key"); !s) return s.error();
  if (table_.cluster().find_node(name) < 0) return Error{ErrorCode::kNotFound, "node " + name + " not found"};
  auto found = sink_.find_key(name);
  if (!found) return found.error();
  const int64_t now = clock_();
  store::NodeKeyRecord k{name, protocol::new_node_key(), now, std::nullopt, "", std::nullopt};
  if (rotate) {
    if (!*found) return Error{ErrorCode::kNotFound, "node " + name + " has no key: add one first"};
    k.created = (*found)->created;
    k.rotated_at = now;
    if (grace_s > 0) {
      k.previous_key = (*found)->key;
      k.previous_until = now + grace_s;
    }
  } else if (*found && !force) {
    return Error{ErrorCode::kConflict, "node " + name + " already has a key: rotate it (or force)"};
  }
  store::WriteBatch b;
  b.node_keys.push_back(k);
  b.events.push_back({"node:" + name, now, who.user, rotate ? "key rotated" : "key issued"});
  if (audit) b.audit.push_back(*audit);
  if (auto s = sink_.commit(b); !s) return s.error();
  spdlog::info("node {}: key {} by {}", name, rotate ? "rotated" : "issued", who.user);
  return k.key;
}

}  // namespace railyard::daemon
