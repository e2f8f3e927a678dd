// Node administration: drain, resume and remove a node (admin only), each a change of the node's health
// with an event naming who made it.
//
// Runs on the loop.
#pragma once

#include <functional>
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

 private:
  const lifecycle::JobTable& table_;
  Clock clock_;
  Sink sink_;
};

}  // namespace railyard::daemon
