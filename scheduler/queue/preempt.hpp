// Preemption: a high-QoS job that does not fit may take GPUs from scavenger jobs. Victims are chosen per
// node to lose the fewest GPUs (smallest jobs first, redundant ones dropped), and nodes are chosen inside the
// smallest domain (node, leaf, spine...) that can hold the job, so the freed GPUs are together.
// Preempted jobs are requeued by the shell, never lost.
#pragma once

#include <optional>
#include <vector>

#include "scheduler/model/snapshot.hpp"
#include "scheduler/model/usage.hpp"
#include "scheduler/placement/placer.hpp"

namespace railyard::sched {

struct PreemptionChoice {
  Choice choice;
  std::vector<int32_t> victims;  // indices into snapshot.running, sorted
};

// `gone` marks running jobs already chosen as victims in this pass (they are not chosen twice).
std::optional<PreemptionChoice> plan_preemption(const Snapshot& snapshot, const ClusterUsage& usage, const Request& req,
                                                const std::vector<char>& gone);

}  // namespace railyard::sched
