// The scheduling core's input: everything one pass may look at, and nothing else (no clock, no I/O).
// The daemon builds a Snapshot from SQLite state and agent reports; the simulator from its virtual cluster.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "jobs/spec.hpp"
#include "topology/cluster.hpp"

namespace railyard::sched {

using jobs::JobId;
using topology::GpuId;
using topology::NodeId;

// kRemoved: taken out of the cluster by an admin (POST /nodes/{name}/remove) until resumed; like kDown it
// is never placed on, and its GPUs are not capacity.
enum class NodeHealth { kUp, kDrain, kDown, kRemoved };
std::string_view to_string(NodeHealth h);

// One GPU slice held by a MIG job: slots [first_slot, first_slot + slots) of GPU `gpu`'s 8 memory slots.
struct MigSlice {
  GpuId gpu = -1;
  int first_slot = 0;
  int slots = 0;
  std::string profile;
};

// Specs are borrowed: the shell owns them and keeps them alive for the duration of schedule().
struct RunningJob {
  JobId id = 0;
  const jobs::JobSpec* spec = nullptr;
  std::vector<GpuId> gpus;         // whole GPUs held (empty for MIG jobs)
  std::vector<MigSlice> slices;    // MIG slices held
  int64_t start_time = 0;
  // When its GPUs are expected back: start + time_limit, or a large number for jobs without limit.
  int64_t expected_end() const;
};

struct PendingJob {
  JobId id = 0;
  const jobs::JobSpec* spec = nullptr;
  int64_t submit_time = 0;
  bool held = false;
  // When a pass first made the job wait for a compact placement (PendingReason::kCompact), as the shell
  // recorded it from that pass's plan (PendingInfo::compact_since) and passes back every pass after; -1:
  // not yet (the wait starts now).
  int64_t compact_wait_since = -1;
};

// Whether a dependency (JobSpec::any_dependency) is met.
enum class DependencyState { kWaiting, kSatisfied, kNeverSatisfied };
// Why a job waits on `d` ("waits for job 12", "waits for task 3 of array 12 to end"), and why `d` can no
// longer be met ("job 12 did not complete successfully"); shared by passes and array task creation.
std::string dependency_waiting(const jobs::Dependency& d);
std::string dependency_broken(const jobs::Dependency& d);

struct PolicyConfig {
  enum class Placement { kTopology, kFirstFit };
  Placement placement = Placement::kTopology;  // first-fit: topology-oblivious baseline for comparisons
  bool backfill = true;            // false: strict priority order (FIFO when priorities are equal)
  int reservation_depth = 8;       // top blocked jobs that get a reservation
  bool preemption = true;          // high may preempt scavenger
  // Multifactor priority weights (see scheduler/README.md for the formula). The size weight is off by
  // default: with it on (1,000) later big jobs went ahead of earlier small ones, and waits were longer in the
  // replays and simulations (bench/RESULTS.md, "The size weight").
  double weight_qos = 10000, weight_age = 1000, weight_fairshare = 5000, weight_size = 0;
  int64_t age_max_s = 7 * 24 * 3600;
  double allreduce_bytes = 1e9;    // message size of the allreduce estimate reported with each placement
  bool explain = true;             // false: skip building reason messages (simulator fast path)
  // Compactness wait (an automatic `--switches=N@max-time`): a multi-node job whose best placement now
  // spans more leaf groups than its minimum waits for a placement on its minimum, counted from when a pass
  // first found it placeable only that way (PendingJob::compact_wait_since); then it takes the best
  // placement there is. With a compact reservation (reservation_depth of them per pass, apart from the
  // ordinary ones) on which the cost model makes it faster, it waits until that reservation starts, at
  // most compact_wait_max_s; so does a job that fills the leaf groups of its minimum (no node to spare) for
  // a reservation starting within compact_wait_max_s. Where the fabric makes the scattered placement as
  // fast (a non-blocking tree), or without a reservation: compact_wait_share × its time limit, at least
  // compact_wait_s, at most compact_wait_max_s (a job without a limit: compact_wait_max_s with a
  // reservation, compact_wait_s without). compact_wait_s = 0 turns the wait off.
  // Why wait at all where the allreduce is as fast: a scattered start breaks islands in every leaf group it
  // touches for as long as it runs, which is why the wait scales with the job's limit. The load sweeps in
  // bench/RESULTS.md ("Placement under contention", "The compact wait's share") measure the trade.
  int64_t compact_wait_s = 300;
  int64_t compact_wait_max_s = 7 * 24 * 3600;
  double compact_wait_share = 12;
  // Exact shortcuts: a necessary-condition check before the placer in compact reservation searches, tries of
  // a reservation search skipped while too few nodes got GPUs back since the last failed one
  // (find_reservation), and a placement reused for the next job of the same shape in a pass while nothing it
  // reads changed. The plans are the same without them, which the scheduler's property tests and the
  // simulator tests check by turning them off.
  bool search_shortcuts = true;
};

// What changed in Snapshot::pending since the previous snapshot of the same source (a JobTable), so that
// a shell's sched::Scheduler brings the queue it keeps across passes up to date in O(changes) instead of
// reading every waiting job again: each job added or changed since (as it is now), and each one gone.
// `from` is the generation of the previous snapshot the source gave, `to` this one's; a Scheduler that did
// not see `from` (or saw another source) rebuilds its queue from `pending`.
struct PendingChanges {
  uint64_t source = 0;
  uint64_t from = 0, to = 0;
  std::vector<PendingJob> current;
  std::vector<JobId> gone;
};

struct Snapshot {
  const topology::Cluster* cluster = nullptr;
  std::vector<NodeHealth> health;                       // per NodeId; empty = all up
  // Per NodeId: 1 where the node's agent runs image jobs (it reported a container engine); empty = every
  // node does. Image jobs (spec.container) are placed only there.
  std::vector<char> containers;
  std::vector<RunningJob> running;
  std::vector<PendingJob> pending;
  // Set by a source that journals its queue (lifecycle::JobTable): then sched::Scheduler keeps the queue
  // in priority order across passes, and a pass examines only the jobs whose outcome can differ from the
  // last pass's (cycle.hpp). Unset: every pass examines every job.
  std::shared_ptr<const PendingChanges> pending_changes;
  std::map<jobs::Dependency, DependencyState> dependencies;  // of pending jobs; missing = waiting
  std::unordered_map<std::string, double> user_usage;     // decayed GPU-seconds (see FairShareLedger)
  std::unordered_map<std::string, double> project_usage;
  std::unordered_map<std::string, int> user_quota;        // max GPUs in use at once; missing = unlimited
  std::unordered_map<std::string, int> project_quota;
  std::unordered_map<std::string, double> user_shares;    // fair-share shares (> 0); missing = 1
  std::unordered_map<std::string, double> project_shares;
  PolicyConfig config;
  int64_t now = 0;                                        // seconds, any epoch
  // A bound on the pass (the daemon's --pass-budget-ms): asked between jobs, once per kBudgetStride of them
  // (so the first kBudgetStride are always examined); when it answers true the pass stops there and
  // Plan::unexamined lists the jobs it did not reach. Unset: every job. The cut point then depends on
  // whoever answers (a clock), but what the pass decided up to it is what a full pass decides for those jobs.
  std::function<bool()> out_of_time;
};
inline constexpr size_t kBudgetStride = 64;

}  // namespace railyard::sched
