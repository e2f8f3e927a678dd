// sched::Scheduler: the pass for a shell that schedules one cluster again and again (cycle.hpp).
#include <algorithm>
#include <unordered_map>

#include "scheduler/core/cycle.hpp"
#include "scheduler/core/pass.hpp"
#include "scheduler/queue/pending_queue.hpp"

namespace railyard::sched {

// Between passes `work` keeps the last pass's usage: the running jobs of its snapshot (`held`, job i with
// owner i) and the plan's starts (`started`, owner running.size() + k), plus reservations. The next pass
// brings it to the new running list by difference: reservations dropped, the GPUs of jobs that left given
// back, jobs that moved in the list relabelled, new ones taken. A usage does not depend on the order GPUs
// were taken and given in (usage.hpp), so that equals a fresh build. MIG slices and preemption (a victim's
// GPUs overlap its preemptor's until it leaves) rebuild instead. `dues` follows the same difference.
struct Scheduler::State {
  struct Held {
    JobId id = 0;
    int64_t end = 0;
    const GpuId* buffer = nullptr;  // the snapshot's vector this was copied from
    std::vector<GpuId> gpus;
  };
  const topology::Cluster* cluster = nullptr;
  std::vector<NodeHealth> health;
  std::vector<char> containers;  // the classes' (a change of which nodes run image jobs rebuilds them)
  std::unique_ptr<NodeClasses> classes;
  std::unique_ptr<ClusterUsage> empty;  // fresh usage for `health`
  std::unique_ptr<ClusterUsage> work;   // the pass's usage
  bool reusable = false;                // `work` holds `held` and `started` (and reservations)
  std::vector<Held> held;               // by position in the last snapshot's running list
  std::vector<Held> started;            // the last plan's starts, in plan order
  std::vector<Releases::Entry> dues;    // the running jobs' releases by expected end
  bool held_slices = false;             // some job in `held` holds MIG slices (not recorded there)
  PendingQueue queue;                   // the waiting jobs, for snapshots with Snapshot::pending_changes

  static Held held_of(const RunningJob& r) { return {r.id, r.expected_end(), r.gpus.data(), r.gpus}; }
  // Whether running job `r` is what `work` holds as `h`: the same id and GPUs. Contract with the shell: a
  // job that stays with the same `gpus` buffer kept its GPUs and expected end unmodified (the simulator's
  // case), so that check reads no job memory; any other is compared by value.
  static bool same(const Held& h, const RunningJob& r) {
    if (h.id != r.id || h.gpus.size() != r.gpus.size() || !r.slices.empty()) return false;
    return h.buffer == r.gpus.data() || h.gpus == r.gpus;
  }

  void rebuild(const Snapshot& s) {
    if (work)
      work->reset_to(*empty);
    else
      work = std::make_unique<ClusterUsage>(*empty);
    held.clear();
    held_slices = false;
    for (size_t i = 0; i < s.running.size(); ++i) {
      const RunningJob& r = s.running[i];
      if (i + 4 < s.running.size()) __builtin_prefetch(s.running[i + 4].gpus.data());  // a miss per job otherwise
      work->take(r.gpus, static_cast<int32_t>(i));
      for (const auto& sl : r.slices) work->take_slice(sl);
      held_slices = held_slices || !r.slices.empty();
      held.push_back(held_of(r));
    }
    dues = Releases::dues_of(*cluster, s.running);
  }

  // Brings `work` from held + started to s.running; false (nothing changed) when a rebuild is needed.
  bool update(const Snapshot& s) {
    if (held_slices) return false;
    const size_t n = s.running.size();
    std::vector<uint32_t> changed;
    for (size_t i = 0; i < n; ++i) {
      const RunningJob& r = s.running[i];
      if (!r.slices.empty()) return false;
      if (i < held.size() && same(held[i], r)) {
        if (held[i].buffer == r.gpus.data()) continue;
        held[i].buffer = r.gpus.data();
        if (held[i].end != r.expected_end()) changed.push_back(static_cast<uint32_t>(i));  // its limit changed
        continue;
      }
      changed.push_back(static_cast<uint32_t>(i));
    }
    // What `work` holds at the changed positions, past the new list's end, and the starts: each with its owner.
    std::vector<std::pair<Held, int32_t>> displaced;
    for (uint32_t i : changed)
      if (i < held.size()) displaced.emplace_back(std::move(held[i]), static_cast<int32_t>(i));
    for (size_t j = n; j < held.size(); ++j) displaced.emplace_back(std::move(held[j]), static_cast<int32_t>(j));
    for (size_t k = 0; k < started.size(); ++k)
      displaced.emplace_back(std::move(started[k]), static_cast<int32_t>(held.size() + k));
    std::unordered_map<JobId, size_t> by_id;
    for (size_t d = 0; d < displaced.size(); ++d) by_id.emplace(displaced[d].first.id, d);
    std::vector<char> kept(displaced.size(), 0);
    std::vector<uint32_t> to_take;
    work->drop_reservations();
    for (uint32_t i : changed) {
      const RunningJob& r = s.running[i];
      auto it = by_id.find(r.id);
      if (it != by_id.end() && !kept[it->second] && displaced[it->second].first.gpus == r.gpus) {
        kept[it->second] = 1;
        if (displaced[it->second].second != static_cast<int32_t>(i)) work->relabel(r.gpus, static_cast<int32_t>(i));
      } else {
        to_take.push_back(i);
      }
    }
    for (size_t d = 0; d < displaced.size(); ++d)
      if (!kept[d]) work->give(displaced[d].first.gpus);
    for (uint32_t i : to_take) work->take(s.running[i].gpus, static_cast<int32_t>(i));
    // held and dues follow: drop the changed and vanished positions, add the changed ones as they are now.
    held.resize(n);
    std::vector<char> stale(std::max(n, dues.size()), 0);
    for (uint32_t i : changed) held[i] = held_of(s.running[i]), stale[i] = 1;
    std::erase_if(dues, [&](const Releases::Entry& d) { return d.index >= n || stale[d.index]; });
    const auto mid = static_cast<std::ptrdiff_t>(dues.size());
    for (uint32_t i : changed) Releases::append(dues, *cluster, held[i].end, i, s.running[i].gpus, {});
    std::sort(dues.begin() + mid, dues.end(), Releases::by_end);
    std::inplace_merge(dues.begin(), dues.begin() + mid, dues.end(), Releases::by_end);
    return true;
  }

  // After a pass on `s` that returned `plan`: what `work` now holds, if the next pass may start from it.
  void remember(const Plan& plan) {
    reusable = std::all_of(plan.starts.begin(), plan.starts.end(),
                           [](const Placement& p) { return p.preempts.empty() && p.slices.empty(); });
    started.clear();
    if (!reusable) return;
    for (const Placement& p : plan.starts) started.push_back({p.job, 0, nullptr, p.gpus});
  }
};

Scheduler::Scheduler() : state_(std::make_unique<State>()) {}
Scheduler::~Scheduler() = default;
Scheduler::Scheduler(Scheduler&&) noexcept = default;
Scheduler& Scheduler::operator=(Scheduler&&) noexcept = default;

Plan Scheduler::schedule(const Snapshot& snapshot) {
  if (!snapshot.cluster) return {};
  State& st = *state_;
  if (st.cluster != snapshot.cluster || st.containers != snapshot.containers) {
    st = State{};
    st.cluster = snapshot.cluster;
    st.containers = snapshot.containers;
    st.classes = std::make_unique<NodeClasses>(*snapshot.cluster, snapshot.containers);
  }
  if (!st.empty || st.health != snapshot.health) {
    st.health = snapshot.health;
    st.empty = std::make_unique<ClusterUsage>(*st.cluster, *st.classes, st.health);
    st.reusable = false;
  }
  if (!st.reusable || !st.work || !st.update(snapshot)) st.rebuild(snapshot);
  st.reusable = false;
  PendingQueue* queue = nullptr;
  if (snapshot.pending_changes) {
    st.queue.update(snapshot, *st.classes);
    queue = &st.queue;
  } else if (st.queue.size() > 0) {
    st.queue.clear();
  }
  Plan plan = run_pass(snapshot, *st.classes, *st.work, st.dues, true, queue);
  st.remember(plan);
  if (queue) {
    std::vector<JobId> gated;
    for (const PendingInfo& p : plan.pending)
      if (p.reason == PendingReason::kHeld || p.reason == PendingReason::kDependency) gated.push_back(p.job);
    queue->after_pass(gated);
  }
  return plan;
}

}  // namespace railyard::sched
