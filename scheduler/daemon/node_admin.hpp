// Node administration: drain, resume and remove a node (admin only), each a change of the node's health
// with an event naming who made it; a node's agent key issued or rotated (scheduler/PROTOCOL.md, "Node keys").
//
// Runs on the loop.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "scheduler/daemon/caller.hpp"
#include "scheduler/lifecycle/job_table.hpp"

namespace railyard::daemon {

class NodeAdmin {
 public:
  using Clock = std::function<int64_t()>;  // seconds since the epoch
  // Where a change goes. `commit`: written synced, applied, observers told, a pass requested; `audit`: a
  // request's audit row on its own (one that changes nothing).
  struct Sink {
    std::function<Status(store::WriteBatch&)> commit;
    std::function<void(store::AuditRecord)> audit;
    std::function<Result<std::optional<store::NodeKeyRecord>>(const std::string&)> find_key;
  };

  NodeAdmin(const lifecycle::JobTable& table, Clock clock, Sink sink)
      : table_(table), clock_(std::move(clock)), sink_(std::move(sink)) {}

  // Drain (health kDrain with a reason) or resume (kUp). A removed node may only be resumed (kConflict
  // otherwise).
  Status set_health(const std::string& name, sched::NodeHealth health, std::string reason, const Caller& who,
                    const store::AuditRecord* audit = nullptr);
  // Health kRemoved (never placed on, not capacity, its agent refused) until resumed. kConflict, naming the
  // job, while a STARTING/RUNNING job or a GPU hold is on the node. Removing a removed node changes nothing.
  Status remove(const std::string& name, const Caller& who, const store::AuditRecord* audit = nullptr);
  // A new agent key for a node of the cluster, committed (and so replicated) with an event; the key, shown
  // once. Issue: kConflict when the node has one, unless `force` (replaced at once). Rotate: kNotFound when it
  // has none; the old key keeps working `grace_s` seconds (0: none), or until the agent uses the new one.
  Result<std::string> issue_key(const std::string& name, bool rotate, int64_t grace_s, bool force,
                                const Caller& who, const store::AuditRecord* audit = nullptr);

 private:
  const lifecycle::JobTable& table_;
  Clock clock_;
  Sink sink_;
};

}  // namespace railyard::daemon
