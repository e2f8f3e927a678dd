#include "scheduler/core/cycle.hpp"

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <unordered_map>

#include "scheduler/core/pass.hpp"
#include "scheduler/core/reservation.hpp"
#include "scheduler/placement/placer.hpp"
#include "scheduler/placement/request.hpp"
#include "scheduler/queue/pending_queue.hpp"
#include "scheduler/queue/preempt.hpp"
#include "scheduler/queue/priority.hpp"
#include "topology/cost.hpp"

namespace railyard::sched {

std::string_view to_string(NodeHealth h) {
  switch (h) {
    case NodeHealth::kUp: return "up";
    case NodeHealth::kDrain: return "drain";
    case NodeHealth::kDown: return "down";
    case NodeHealth::kRemoved: return "removed";
  }
  return "unknown";
}

std::string_view to_string(PendingReason r) {
  switch (r) {
    case PendingReason::kNone: return "none";
    case PendingReason::kHeld: return "held";
    case PendingReason::kDependency: return "dependency";
    case PendingReason::kQuotaUser: return "quota_user";
    case PendingReason::kQuotaProject: return "quota_project";
    case PendingReason::kResources: return "resources";
    case PendingReason::kReservation: return "reservation";
    case PendingReason::kPriority: return "priority";
    case PendingReason::kPreempting: return "preempting";
    case PendingReason::kCompact: return "compact";
  }
  return "unknown";
}

int64_t RunningJob::expected_end() const {
  if (!spec || spec->time_limit_s <= 0) return kForever;
  return start_time + spec->time_limit_s;
}

std::string dependency_waiting(const jobs::Dependency& d) {
  using T = jobs::Dependency::Type;
  const std::string what = "waits for " + d.target();
  switch (d.type) {
    case T::kAfterAny:
      return what + " to end";
    case T::kAfterNotOk:
      return what + " to end without completing (afternotok)";
    default:
      return what;
  }
}

std::string dependency_broken(const jobs::Dependency& d) {
  switch (d.type) {
    case jobs::Dependency::Type::kAfterNotOk:
      return d.target() + " completed successfully (afternotok)";
    case jobs::Dependency::Type::kAfterAny:
      return d.target() + " does not exist";
    default:
      return d.target() + " did not complete successfully";
  }
}

namespace {

// Failures already seen in this pass for one shape: usage only shrinks while the pass places jobs, so a
// shape that did not fit for a window ending at E does not fit for any window ending at or after E.
struct FailMemo {
  using Key = ShapeKey;
  using KeyHash = ShapeKeyHash;
  struct Seen {
    int64_t min_end;
    std::string message;
  };
  std::unordered_map<Key, Seen, KeyHash> seen;

  static std::optional<Key> key_of(const Request& r) { return shape_key(r); }
  const Seen* find(const Request& r) const {
    auto k = key_of(r);
    if (!k) return nullptr;
    auto it = seen.find(*k);
    return it != seen.end() && r.window.end >= it->second.min_end ? &it->second : nullptr;
  }
  // Whether a request of shape `k` with a window ending at `end` failed in this pass already.
  bool failed(const Key& k, int64_t end) const {
    auto it = seen.find(k);
    return it != seen.end() && end >= it->second.min_end;
  }
  void add(const Request& r, std::string message) {
    if (auto k = key_of(r)) {
      auto [it, inserted] = seen.try_emplace(*k, Seen{r.window.end, std::move(message)});
      if (!inserted && r.window.end < it->second.min_end) it->second = {r.window.end, std::move(message)};
    }
  }
};

class Pass {
 public:
  // `usage` is built over `classes` of s.cluster with s.health: empty (fresh or reset), or, with
  // `holds_running`, already exactly what taking every running job (job i with owner i) would make of an
  // empty one. `dues`: the running jobs by expected end (Releases::dues_of), or empty to build it on demand.
  Pass(const Snapshot& s, const NodeClasses& classes, ClusterUsage& usage,
       std::span<const Releases::Entry> dues = {}, bool holds_running = false)
      : s_(s), classes_(classes), usage_(usage), gone_(s.running.size(), 0), releases_(*s.cluster, s.running, dues) {
    const bool quotas = !s.user_quota.empty() || !s.project_quota.empty();
    for (size_t i = 0; i < s.running.size(); ++i) {
      const auto& r = s.running[i];
      if (!holds_running) {
        if (i + 4 < s.running.size()) __builtin_prefetch(s.running[i + 4].gpus.data());  // a miss per job otherwise
        usage_.take(r.gpus, static_cast<int32_t>(i));
        for (const auto& sl : r.slices) usage_.take_slice(sl);
      }
      if (quotas) charge(*r.spec, static_cast<int>(r.gpus.size() + r.slices.size()));
    }
  }

  Plan run() {
    auto priorities = compute_priorities(s_);
    const auto order = priority_order(s_, priorities);
    for (size_t i = 0; i < order.size(); ++i) {
      if (i > 0 && i % kBudgetStride == 0 && s_.out_of_time && s_.out_of_time()) {
        plan_.unexamined.reserve(order.size() - i);
        for (; i < order.size(); ++i) plan_.unexamined.push_back(s_.pending[order[i]].id);
        break;
      }
      consider(s_.pending[order[i]], priorities[order[i]]);
    }
    return std::move(plan_);
  }

  // The same pass over a queue kept across passes (queue/pending_queue.hpp), `queue` brought to s_ already.
  // Jobs are taken in the order run() takes them (the merge of the buckets' heads by P). Every job is
  // examined until the ordinary reservations are all given (or, without backfill, a job blocks the rest);
  // from then on a job can only start, or preempt, or do nothing a later job would notice: the pass skips
  // a bucket whole once no job of it can start (fewer free GPUs in its classes than it needs, or its shape
  // failed for a window no longer than its shortest: usage only shrinks as the pass goes), and a job of a
  // live bucket whose shape failed for a window no longer than its own, unless it may preempt. Such jobs
  // would only be told again why they wait; they keep what the last pass told them. So does a compact wait
  // whose verdict stands (still_parked), wherever it is. Marked jobs (new or changed, or gated) are examined
  // wherever they are. Plan::unexamined lists the marked jobs a budget cut left.
  Plan run(PendingQueue& queue) {
    const uint64_t pass = queue.next_pass();
    const PriorityModel& model = queue.model();
    const auto users = fair_shares(s_.user_usage, s_.user_shares, queue.user_jobs());
    const auto projects = fair_shares(s_.project_usage, s_.project_shares, queue.project_jobs());
    std::vector<Priority> fair(queue.parties().size(), 0);
    for (size_t i = 0; i < fair.size(); ++i) {
      auto u = users.find(queue.parties()[i].first);
      auto p = projects.find(queue.parties()[i].second);
      if (u != users.end() && p != projects.end()) fair[i] = model.fair(u->second.factor, p->second.factor);
    }
    auto& buckets = queue.buckets();
    std::vector<PendingQueue::Key> offsets(buckets.size());
    for (size_t b = 0; b < buckets.size(); ++b) offsets[b] = queue.offset(buckets[b], fair[buckets[b].party], s_.now);

    // The marked jobs, in order: a list walked beside the buckets.
    constexpr uint32_t kMarked = UINT32_MAX;
    std::vector<PendingQueue::Item> marked;
    for (JobId id : queue.marked()) {
      PendingQueue::Entry* e = queue.find(id);
      if (!e || !e->marked || e->listed == pass) continue;
      e->listed = pass;
      PendingQueue::Item item = e->item;
      item.key += offsets[e->bucket];
      marked.push_back(item);
    }
    std::sort(marked.begin(), marked.end());

    struct Head {
      PendingQueue::Item item;  // key: P
      uint32_t bucket;
      std::set<PendingQueue::Item>::const_iterator next;  // in the bucket, after `item`
      size_t next_marked = 0;
      bool operator<(const Head& o) const { return o.item < item; }  // a max-heap of the first in order
    };
    std::vector<Head> heap;
    auto push = [&](Head h) {
      heap.push_back(std::move(h));
      std::push_heap(heap.begin(), heap.end());
    };
    auto head_of = [&](uint32_t b, std::set<PendingQueue::Item>::const_iterator it) {
      PendingQueue::Item item = *it;
      item.key += offsets[b];
      return Head{item, b, std::next(it)};
    };
    for (uint32_t b = 0; b < buckets.size(); ++b)
      if (!buckets[b].jobs.empty()) heap.push_back(head_of(b, buckets[b].jobs.begin()));
    if (!marked.empty()) heap.push_back(Head{marked.front(), kMarked, {}, 1});
    std::make_heap(heap.begin(), heap.end());

    // Whether a scavenger job runs: a high one may then start whatever the free GPUs. Asked for high
    // buckets only, and found once per pass (a walk over the running jobs).
    std::optional<bool> scavengers;
    auto preemptible = [&] {
      if (!scavengers)
        scavengers = s_.config.preemption && std::any_of(s_.running.begin(), s_.running.end(), [](const auto& r) {
                       return r.spec && r.spec->qos == jobs::Qos::kScavenger;
                     });
      return *scavengers;
    };
    bool narrow = false;
    auto free_in = [&](const std::vector<char>& eligible) {
      int free = 0;
      for (int c = 0; c < classes_.count(); ++c)
        if (eligible[c]) free += usage_.class_free(c);
      return free;
    };
    auto alive = [&](const PendingQueue::Bucket& b) {
      if (blocked_by_) return false;
      if (!b.shape || (b.high && preemptible())) return true;
      return free_in(b.eligible) >= b.need && !memo_.failed(*b.shape, end_of(b.limit_floor));
    };
    size_t examined = 0;
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end());
      Head h = std::move(heap.back());
      heap.pop_back();
      const PendingQueue::Item item = h.item;
      PendingQueue::Entry& e = *item.entry;
      if (h.bucket == kMarked) {
        if (h.next_marked < marked.size()) push(Head{marked[h.next_marked], kMarked, {}, h.next_marked + 1});
      } else {
        const PendingQueue::Bucket& b = buckets[h.bucket];
        if (narrow && !alive(b)) continue;  // the bucket is done with for this pass
        if (h.next != b.jobs.end()) push(head_of(h.bucket, h.next));
        if (narrow && !e.marked && !(b.high && preemptible()) &&
            memo_.failed(*b.shape, end_of(e.job.spec->time_limit_s)))
          continue;
      }
      if (e.seen == pass) continue;
      if (examined > 0 && examined % kBudgetStride == 0 && s_.out_of_time && s_.out_of_time()) {
        for (const auto& m : marked)
          if (m.entry->seen != pass) plan_.unexamined.push_back(m.id);
        break;
      }
      e.seen = pass;
      ++examined;
      current_ = Examined{&e, &buckets[e.bucket]};
      consider(e.job, static_cast<Priority>(item.key));
      current_ = Examined{};
      narrow = narrow || reservations_ >= s_.config.reservation_depth || blocked_by_;
    }
    return std::move(plan_);
  }

 private:
  // The end of a window starting now for a time limit (0: none).
  int64_t end_of(int64_t limit) const { return limit > 0 && limit < kForever ? s_.now + limit : kForever; }

  void charge(const jobs::JobSpec& spec, int gpus) {
    if (s_.user_quota.empty() && s_.project_quota.empty()) return;  // nobody to hold to a quota
    user_used_[spec.user] += gpus;
    project_used_[spec.project] += gpus;
  }

  void pend(const PendingJob& job, Priority priority, PendingReason reason, std::string message) {
    plan_.pending.push_back({job.id, reason, s_.config.explain ? std::move(message) : std::string(),
                             std::nullopt, priority_points(priority), std::nullopt});
  }

  // The held and dependency gates, first for every job: their verdict depends on the job and the jobs it
  // names alone (not on the cluster, the other jobs or the job's request), so the daemon leaves a job it
  // closed out of later passes until one of those changes (JobTable::park). False when the job waits (or
  // was rejected: a dependency that can never be met).
  bool gates_open(const PendingJob& job, Priority priority) {
    if (job.held) return pend(job, priority, PendingReason::kHeld, "held"), false;
    const bool blocked = job.spec->any_dependency([&](const jobs::Dependency& d) {
      auto it = s_.dependencies.find(d);
      const auto state = it == s_.dependencies.end() ? DependencyState::kWaiting : it->second;
      if (state == DependencyState::kNeverSatisfied) {
        plan_.rejected.push_back({job.id, "dependency: " + dependency_broken(d)});
        return true;
      }
      if (state == DependencyState::kWaiting)
        return pend(job, priority, PendingReason::kDependency, dependency_waiting(d)), true;
      return false;
    });
    return !blocked;
  }

  // The user and project quotas; false when the job waits for its user's or project's GPUs.
  bool within_quota(const PendingJob& job, Priority priority, int gpus) {
    const auto& spec = *job.spec;
    if (auto q = s_.user_quota.find(spec.user); q != s_.user_quota.end() && user_used_[spec.user] + gpus > q->second) {
      pend(job, priority, PendingReason::kQuotaUser,
           "quota of user " + spec.user + " reached (" + std::to_string(user_used_[spec.user]) + " of " +
               std::to_string(q->second) + " GPUs in use, needs " + std::to_string(gpus) + ")");
      return false;
    }
    if (auto q = s_.project_quota.find(spec.project);
        q != s_.project_quota.end() && project_used_[spec.project] + gpus > q->second) {
      pend(job, priority, PendingReason::kQuotaProject,
           "quota of project " + spec.project + " reached (" + std::to_string(project_used_[spec.project]) + " of " +
               std::to_string(q->second) + " GPUs in use, needs " + std::to_string(gpus) + ")");
      return false;
    }
    return true;
  }

  // `short_by`: as place_topology's (0 for first-fit and services).
  std::optional<Choice> place(const ClusterUsage& usage, const Request& req, int* short_by = nullptr) const {
    if (short_by) *short_by = 0;
    if (req.replicas == 1)
      return s_.config.placement == PolicyConfig::Placement::kFirstFit ? place_first_fit(usage, req)
                                                                       : place_topology(usage, req, short_by);
    ClusterUsage scratch = usage;  // services: every replica placed on its own, all or none
    Choice all;
    for (int i = 0; i < req.replicas; ++i) {
      auto one = place_topology(scratch, req);
      if (!one) return std::nullopt;
      scratch.take(one->gpus, ClusterUsage::kMig - 1);
      for (const auto& sl : one->slices) scratch.take_slice(sl);
      all.gpus.insert(all.gpus.end(), one->gpus.begin(), one->gpus.end());
      all.slices.insert(all.slices.end(), one->slices.begin(), one->slices.end());
    }
    std::sort(all.gpus.begin(), all.gpus.end());
    return all;
  }

  void start(const PendingJob& job, Request& req, Choice choice, std::vector<int32_t> victims) {
    Placement p;
    p.job = job.id;
    p.gpus = std::move(choice.gpus);
    p.slices = std::move(choice.slices);
    for (int32_t v : victims) {
      gone_[v] = 1;
      p.preempts.push_back(s_.running[v].id);
      usage_.give(s_.running[v].gpus);
    }
    const int32_t owner = static_cast<int32_t>(s_.running.size() + plan_.starts.size());
    ++epoch_;
    usage_.take(p.gpus, owner);
    for (const auto& sl : p.slices) usage_.take_slice(sl);
    for (int32_t v : victims) usage_.take(s_.running[v].gpus, v);  // the rest stays busy until they leave
    const auto& c = *s_.cluster;
    for (GpuId g : p.gpus)
      if (p.nodes.empty() || p.nodes.back() != c.node_of(g)) p.nodes.push_back(c.node_of(g));
    for (const auto& sl : p.slices) p.nodes.push_back(c.node_of(sl.gpu));
    std::sort(p.nodes.begin(), p.nodes.end());
    p.nodes.erase(std::unique(p.nodes.begin(), p.nodes.end()), p.nodes.end());
    p.leaves_spanned = c.leaves_spanned(p.nodes);
    p.min_leaves = c.min_leaves_for_nodes(static_cast<int>(p.nodes.size()));
    if (!p.gpus.empty()) {
      p.span = c.smallest_domain(p.gpus).level;
      p.allreduce_s = topology::estimate_allreduce(c, p.gpus, s_.config.allreduce_bytes).seconds;
    } else {
      p.span = topology::Level::kGpu;
    }
    charge(*job.spec, static_cast<int>(p.gpus.size() + p.slices.size()));
    releases_.add(req.window.end, p.gpus, p.slices);
    plan_.starts.push_back(std::move(p));
  }

  void consider(const PendingJob& job, Priority priority) {
    const auto& spec = *job.spec;
    if (current_.entry) {
      if (still_parked(*current_.entry, *current_.bucket, job)) return;
      current_.entry->compact_parked = -1;
    }
    if (!gates_open(job, priority)) return;
    auto made = make_request(spec, *s_.cluster, classes_);
    if (!made) return void(plan_.rejected.push_back({job.id, made.error().message}));
    Request req = std::move(made).value();
    if (!within_quota(job, priority, req.shape.total * req.replicas)) return;
    if (auto short_by = beyond_present(req)) return pend(job, priority, PendingReason::kResources, *short_by);
    if (req.needs_containers && std::none_of(req.eligible.begin(), req.eligible.end(), [](char e) { return e; }))
      return pend(job, priority, PendingReason::kResources,
                  "waits for a node that runs containers: no agent of a node that fits reported a container "
                  "engine (podman)");
    if (blocked_by_) {
      return pend(job, priority, PendingReason::kPriority,
                  "waits behind higher-priority job " + std::to_string(*blocked_by_) + " (no backfill)");
    }
    req.window = {s_.now, spec.time_limit_s > 0 ? s_.now + spec.time_limit_s : kForever};
    const FailMemo::Seen* seen = memo_.find(req);
    std::optional<Choice> choice;
    if (!seen && enough_free(req)) choice = place_now(req);
    const bool may_preempt = spec.qos == jobs::Qos::kHigh && s_.config.preemption;
    if (choice && may_preempt) {
      if (auto pc = compact_by_preemption(req, *choice)) return start(job, req, std::move(pc->choice), pc->victims);
    }
    if (choice && wait_for_compact(job, priority, req, *choice)) return;
    if (choice) return start(job, req, std::move(*choice), {});
    if (may_preempt) {
      if (auto pc = plan_preemption(s_, usage_, req, gone_)) {
        if (wait_for_compact(job, priority, req, pc->choice, /*preempts=*/true)) return;
        return start(job, req, std::move(pc->choice), pc->victims);
      }
    }
    not_placed(job, priority, req, seen);
  }

  // With nodes removed (s.health kRemoved), whether `req` is beyond what the other nodes could ever hold:
  // then it waits, saying so, instead of for resources that cannot free up (make_request counts every node,
  // so it is not rejected: an admin may resume the nodes). nullopt when it is within.
  std::optional<std::string> beyond_present(const Request& req) const {
    const int removed_count = usage_.removed_nodes();
    if (removed_count == 0) return std::nullopt;
    const std::vector<int>& present = usage_.present_nodes();
    int gpus = 0, capable = 0;
    for (int c = 0; c < classes_.count(); ++c) {
      if (!req.eligible[c]) continue;
      const int per_node = s_.cluster->profiles()[classes_.class_profile[c]].gpus;
      gpus += per_node * present[c];
      capable += per_node >= req.shape.k_max() ? present[c] : 0;
    }
    const int wanted = req.shape.total * req.replicas;
    const std::string removed =
        std::to_string(removed_count) + " node" + (removed_count == 1 ? " is" : "s are") + " removed";
    if (wanted > gpus)
      return "needs " + std::to_string(wanted) + " GPUs and " + removed + ": the others have " + std::to_string(gpus);
    if (req.shape.nodes > capable)
      return "needs " + std::to_string(req.shape.nodes) + " nodes with " + std::to_string(req.shape.k_max()) +
             " GPUs each and " + removed + ": the others are " + std::to_string(capable);
    return std::nullopt;
  }

  // Leaf groups `gpus` (sorted: placer output) span, and the fewest that could hold as many nodes on an empty
  // cluster. In GPU order nodes come in order and each leaf group spanned is one run (leaf groups cover
  // contiguous node ranges), so both are counted in one walk.
  std::pair<int, int> leaves_of(const std::vector<GpuId>& gpus) const {
    const auto& c = *s_.cluster;
    int nodes = 0, leaves = 0;
    NodeId prev_node = -1;
    topology::DomainId prev_leaf = -1;
    for (GpuId g : gpus) {
      const NodeId n = c.node_of(g);
      if (n == prev_node) continue;
      prev_node = n;
      ++nodes;
      const topology::DomainId leaf = c.node(n).leaf();
      leaves += leaf != prev_leaf;
      prev_leaf = leaf;
    }
    return {leaves, c.min_leaves_for_nodes(nodes)};
  }

  bool compact_waits(const Request& req) const { return !req.is_mig() && compact_waits(req.shape.nodes, req.replicas); }
  // The same for a request of `nodes` nodes and `replicas` replicas, not MIG.
  bool compact_waits(int nodes, int replicas) const {
    return s_.config.compact_wait_s > 0 && s_.config.placement == PolicyConfig::Placement::kTopology && nodes > 1 &&
           replicas == 1;
  }

  // A high-QoS job whose best placement now spans more leaf groups than its minimum preempts scavenger jobs
  // for a set on its minimum when there is one (the victims are chosen as for a job that does not fit at
  // all: queue/preempt.hpp), instead of waiting for compactness or starting scattered. nullopt when no
  // preemption makes it compact.
  std::optional<PreemptionChoice> compact_by_preemption(const Request& req, const Choice& choice) const {
    if (!compact_waits(req)) return std::nullopt;
    const auto [spanned, needed] = leaves_of(choice.gpus);
    if (spanned <= needed) return std::nullopt;
    auto pc = plan_preemption(s_, usage_, req, gone_);
    if (!pc || pc->victims.empty() || leaves_of(pc->choice.gpus).first > needed) return std::nullopt;
    return pc;
  }

  // The compactness wait (PolicyConfig::compact_wait_*). `choice` is the job's best placement now (for a
  // high-QoS job that fits only by preempting, the one preemption gives it); when it spans more leaf groups
  // than the minimum, the job pends with kCompact and reserves the earliest node set on its minimum (lower
  // jobs backfill around it as around any reservation, so they keep out of that set unless they end before
  // it starts). How long it may wait, counted from the first pass that found it
  // placeable only scattered (PendingJob::compact_wait_since):
  //   - with a compact reservation (within reservation_depth of them this pass) on which the cost model
  //     makes the job faster (its allreduce there > 0.5 % quicker than on `choice`), or for a job without a
  //     time limit, or for a job that fills its fewest leaf groups (fills_leaf_groups) when the reservation
  //     starts within compact_wait_max_s of the wait's beginning: until the reservation starts, which
  //     running jobs' limits bound, at most compact_wait_max_s for a reservation that keeps moving back;
  //   - otherwise (the fabric makes the scattered set as fast, or no reservation: past the budget, no
  //     search): compact_wait_share × its time limit, at least compact_wait_s, at most compact_wait_max_s.
  //     Such a wait only keeps leaf groups whole for later jobs, which a scattered job breaks for as long as
  //     it runs, so it is worth a multiple of that, no more.
  // A job within the budget for which no compact set is reachable as running jobs end (e.g. a drained node
  // in every leaf group) starts now. True when the job waits. `preempts`: `choice` needs preemption (the
  // message says so).
  bool wait_for_compact(const PendingJob& job, Priority priority, Request& req, const Choice& choice,
                        bool preempts = false) {
    const auto& cfg = s_.config;
    if (!compact_waits(req)) return false;
    const auto leaves = leaves_of(choice.gpus);  // not a structured binding: the lambda below captures it
    const int spanned = leaves.first, needed = leaves.second;
    if (spanned <= needed) return false;
    const bool fills = fills_leaf_groups(req, needed);
    const int64_t since = job.compact_wait_since >= 0 ? job.compact_wait_since : s_.now;
    const bool budget = compact_reservations_ < cfg.reservation_depth;
    const int64_t limit = req.window.end >= kForever ? 0 : req.window.end - req.window.start;
    const int64_t longest = std::max(cfg.compact_wait_s, cfg.compact_wait_max_s);
    const int64_t shared = shared_compact_wait(limit);
    int64_t deadline = since + (budget ? longest : shared);
    if (s_.now >= deadline) return false;
    std::optional<FoundReservation> found;
    std::optional<double> slower;  // the scattered set's allreduce over the compact one's, when > 1.005
    bool drains = false;           // a job that fills its leaf groups waits for this set to drain
    if (budget) {
      auto compact = [&](const ClusterUsage& u, const Request& r, int*) -> std::optional<Choice> {
        if (cfg.search_shortcuts && r.shape.whole_nodes && !u.whole_nodes_in_leaves(r.shape.nodes, needed))
          return std::nullopt;
        auto c = place(u, r);
        if (c && leaves_of(c->gpus).first > needed) c.reset();
        return c;
      };
      found = find_reservation(releases_, usage_, req, s_.now, compact, undo_);
      if (!found) return false;
      // A job that fills its leaf groups waits for a set freeing within the longest wait (by the running
      // jobs' limits); a later one would only hold it back for nothing the cost model counts.
      drains = fills && found->start_time <= deadline;
      // The cost model is asked when its answer can change what the job does (or a message wants it):
      // when the shorter wait is over, or ends before the reservation starts. Else the job waits for the
      // reservation either way, and is woken at the shorter wait's end to be asked then.
      const bool matters =
          cfg.explain || (!drains && limit > 0 && std::max(s_.now, found->start_time) >= since + shared);
      if (matters) slower = allreduce_ratio(choice.gpus, found->gpus);
      if (!slower && !drains && limit > 0) deadline = since + shared;
      if (s_.now >= deadline) return false;
    }
    pend(job, priority, PendingReason::kCompact,
         cfg.explain ? compact_message(req, spanned, needed, drains, found, slower, deadline, preempts)
                     : std::string());
    plan_.pending.back().estimated_start = found ? std::min(found->start_time, deadline) : deadline;
    plan_.pending.back().compact_since = since;
    plan_.wake_at = std::min(plan_.wake_at.value_or(deadline), deadline);
    if (!cfg.backfill) blocked_by_ = job.id;
    if (!found) {
      if (current_.entry && !preempts) current_.entry->compact_parked = deadline;
      return true;
    }
    ++compact_reservations_;
    hold(job.id, req, std::move(*found));
    return true;
  }

  // Whether the job's nodes fill the `needed` leaf groups it spans at the fewest, with no node to spare (a
  // 32-node job on 32-node groups). Such a set exists only once whole groups drain, which under load takes
  // as long as the longest job in them, far beyond a wait scaled by the job's own limit; and a scattered
  // start keeps every group it touches from holding another such job while it runs. So these jobs wait
  // for a compact reservation that frees within compact_wait_max_s whatever the cost model says.
  bool fills_leaf_groups(const Request& req, int needed) const {
    return s_.cluster->min_leaves_for_nodes(req.shape.nodes + 1) > needed;
  }

  // The compact wait of a job with time limit `limit` (0: none) when it has no reservation to wait for:
  // compact_wait_share × the limit, at least compact_wait_s, at most the longest wait.
  int64_t shared_compact_wait(int64_t limit) const {
    const auto& cfg = s_.config;
    const int64_t longest = std::max(cfg.compact_wait_s, cfg.compact_wait_max_s);
    const double share = cfg.compact_wait_share * static_cast<double>(limit);  // clamped before the cast
    return share >= static_cast<double>(longest) ? longest : std::max(cfg.compact_wait_s, static_cast<int64_t>(share));
  }

  // Whether consider() would make the job of queue entry `e` (in bucket `b`) wait for a compact placement
  // without a reservation, with the deadline the last pass that examined it gave it (Entry::compact_parked):
  // then that pass's verdict stands (reason, estimated start, compact_since), and the job is passed over as
  // the narrow phase passes over jobs whose shape failed, its deadline still waking the scheduler. Certain
  // only when everything the verdict reads is known without the job's request: the job unchanged (not
  // marked), not held, without dependencies, not high QoS (which may preempt), no quotas or removed nodes
  // (which could make it wait for another reason); no compact reservation left to search for this pass; the
  // same deadline, not reached; its shape not failed this pass; and the placement now known, as place_now()
  // would give it (its answer for this shape still exact: PlacedShape), spanning more leaf groups than the
  // fewest. Without reason messages only (explain off): with them, the message says how the placement now
  // spans, which may have changed.
  bool still_parked(const PendingQueue::Entry& e, const PendingQueue::Bucket& b, const PendingJob& job) {
    const auto& cfg = s_.config;
    const auto& spec = *job.spec;
    if (e.compact_parked < 0 || e.marked || !b.shape || job.held || job.compact_wait_since < 0) return false;
    // A shape key is never a MIG request's (shape_key).
    if (cfg.explain || !cfg.backfill || !cfg.search_shortcuts || !compact_waits(b.shape->nodes, b.shape->replicas))
      return false;
    if (compact_reservations_ < cfg.reservation_depth || blocked_by_) return false;
    if ((spec.qos == jobs::Qos::kHigh && cfg.preemption) || !s_.user_quota.empty() || !s_.project_quota.empty() ||
        usage_.removed_nodes() > 0 || spec.any_dependency([](const jobs::Dependency&) { return true; }))
      return false;
    const int64_t end = spec.time_limit_s > 0 ? s_.now + spec.time_limit_s : kForever;  // consider()'s window
    const int64_t deadline = job.compact_wait_since + shared_compact_wait(end >= kForever ? 0 : end - s_.now);
    if (deadline != e.compact_parked || s_.now >= deadline || memo_.failed(*b.shape, end)) return false;
    auto it = placed_.find(PlacedKey{*b.shape, overlapping(end)});
    if (it == placed_.end()) return false;
    PlacedShape& p = it->second;
    if (p.epoch != epoch_ || !p.choice) return false;
    if (p.spanned < 0) std::tie(p.spanned, p.needed) = leaves_of(p.choice->gpus);
    if (p.spanned <= p.needed) return false;
    plan_.wake_at = std::min(plan_.wake_at.value_or(deadline), deadline);
    return true;
  }

  // Holds `found` for the job: its GPUs reserved for [start, start + time limit), a time for later searches
  // to try at when it ends, and the plan's reservation.
  void hold(JobId job, const Request& req, FoundReservation found) {
    const Window held{found.start_time, req.window.end >= kForever
                                            ? kForever
                                            : found.start_time + (req.window.end - req.window.start)};
    usage_.reserve(found.gpus, held);
    ++epoch_;
    reservation_starts_.insert(
        std::upper_bound(reservation_starts_.begin(), reservation_starts_.end(), found.start_time), found.start_time);
    releases_.add(held.end, {}, {});  // a time when later reservations may fit: after this one ends
    plan_.reservations.push_back({job, found.start_time, std::move(found.gpus)});
  }

  // The placer for a job now (window [now, now + limit)), its answer reused (search_shortcuts) from an
  // earlier job of this pass with the same request shape and as many of this pass's reservations beginning
  // before its window's end, while that is exact: the placer reads the usage,
  // the shape, the eligible classes and the layout, and the window only through the reservations that
  // overlap it. With no start since (epoch_) the usage is as it was (reservation searches undo what they
  // release). With no reservation since (epoch_ too), the reservations are the same, all beginning at or
  // after now, so as many of them beginning before the window's end is the same set overlapping it. A job
  // placed now either starts or waits for compactness; the wait leaves the usage unchanged, so that is where
  // a later job of the same shape finds the answer.
  std::optional<Choice> place_now(const Request& req) {
    const auto key = FailMemo::key_of(req);
    if (!key || !s_.config.search_shortcuts || req.replicas != 1 ||
        s_.config.placement != PolicyConfig::Placement::kTopology)
      return place(usage_, req);
    // Total and nodes fix GPUs per node (Shape::per_node).
    auto [it, added] = placed_.try_emplace(PlacedKey{*key, overlapping(req.window.end)});
    PlacedShape& p = it->second;
    if (!added && p.epoch == epoch_) return p.choice;
    p = {epoch_, place(usage_, req)};
    return p.choice;
  }

  // This pass's reservations beginning before `end`.
  size_t overlapping(int64_t end) const {
    return static_cast<size_t>(std::lower_bound(reservation_starts_.begin(), reservation_starts_.end(), end) -
                               reservation_starts_.begin());
  }

  // How much slower the cost model rates an allreduce on `scattered` than on `compact`; nullopt when it is
  // within 0.5 % (a non-blocking fabric: the wait buys the job nothing).
  std::optional<double> allreduce_ratio(const std::vector<GpuId>& scattered, const std::vector<GpuId>& compact) const {
    const auto& c = *s_.cluster;
    const double on_scattered = topology::estimate_allreduce(c, scattered, s_.config.allreduce_bytes).seconds;
    const double on_compact = topology::estimate_allreduce(c, compact, s_.config.allreduce_bytes).seconds;
    if (on_compact > 0 && on_scattered > on_compact * 1.005) return on_scattered / on_compact;
    return std::nullopt;
  }

  // "waiting 3 min for 4 nodes in 1 leaf group (su002), reserved from t=…; now: 3 leaf groups, allreduce
  // 1.8x slower; starts anyway at t=…" — what the wait buys, by the cost model, and until when; with
  // `preempts`, "now: 3 leaf groups by preempting scavenger jobs ...; preempts them at t=…".
  std::string compact_message(const Request& req, int spanned, int needed, bool drains,
                              const std::optional<FoundReservation>& found, std::optional<double> slower,
                              int64_t deadline, bool preempts) const {
    const auto& c = *s_.cluster;
    std::string m = "waiting";
    if (found) m += " " + format_duration(found->start_time - s_.now);
    m += " for " + std::to_string(req.shape.nodes) + " nodes in " + std::to_string(needed) + " leaf group" +
         (needed == 1 ? "" : "s");
    if (found) {
      std::vector<NodeId> nodes;
      for (GpuId g : found->gpus)
        if (nodes.empty() || nodes.back() != c.node_of(g)) nodes.push_back(c.node_of(g));
      if (needed == 1 && !nodes.empty()) m += " (" + c.domain(c.node(nodes.front()).leaf()).name + ")";
      m += ", reserved from t=" + std::to_string(found->start_time);
    } else {
      m += ", no reservation (" + std::to_string(compact_reservations_) + " compact waits ahead hold one)";
    }
    m += "; now: " + std::to_string(spanned) + " leaf groups";
    if (preempts) m += " by preempting scavenger jobs";
    if (slower) {
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.2fx", *slower);
      m += std::string(", allreduce ") + ratio + " slower";
    } else if (found && drains) {
      m += ", as fast by the cost model (the job fills whole leaf groups: it waits for them to drain)";
    } else if (found) {
      m += ", as fast by the cost model (the wait keeps leaf groups whole)";
    }
    return m + (preempts ? "; preempts them at t=" : "; starts anyway at t=") + std::to_string(deadline);
  }

  static std::string format_duration(int64_t s) {
    if (s < 120) return std::to_string(std::max<int64_t>(s, 0)) + " s";
    if (s < 7200) return std::to_string(s / 60) + " min";
    if (s < 172800) return std::to_string(s / 3600) + " h";
    return std::to_string(s / 86400) + " d";
  }

  bool enough_free(const Request& req) const {
    int free = 0;
    for (int c = 0; c < classes_.count(); ++c)
      if (req.eligible[c]) free += usage_.class_free(c);
    return free >= req.shape.total * req.replicas || req.is_mig();
  }

  void not_placed(const PendingJob& job, Priority priority, Request& req, const FailMemo::Seen* seen) {
    std::string message;
    if (seen) message = seen->message;
    else if (s_.config.explain) message = explain_no_fit(usage_, req);
    if (!seen) memo_.add(req, message);
    PendingReason reason = PendingReason::kResources;
    if (s_.config.explain && !seen && usage_.any_reservations() && enough_free(req)) {
      if (place(usage_.without_reservations(), req)) reason = PendingReason::kReservation;
    }
    pend(job, priority, reason, message);
    if (reservations_ < s_.config.reservation_depth && req.replicas == 1) {
      auto found = find_reservation(
          releases_, usage_, req, s_.now,
          [&](const ClusterUsage& u, const Request& r, int* short_by) {
            return place(u, r, s_.config.search_shortcuts ? short_by : nullptr);  // the count that skips tries
          },
          undo_);
      if (found) {
        ++reservations_;
        plan_.pending.back().estimated_start = found->start_time;
        // When: the job's estimated_start, which the CLI and the dashboard say as people read a time.
        if (s_.config.explain && reason == PendingReason::kResources) plan_.pending.back().message += "; reserved";
        hold(job.id, req, std::move(*found));
      }
    }
    if (!s_.config.backfill) blocked_by_ = job.id;
  }

  const Snapshot& s_;
  const NodeClasses& classes_;
  ClusterUsage& usage_;
  ClusterUsage::UndoLog undo_;  // reservation searches' buffer
  std::vector<char> gone_;
  Releases releases_;
  FailMemo memo_;
  // place_now's answers, by shape and the number of this pass's reservations overlapping the window (jobs
  // of one shape with other time limits see other reservations).
  struct PlacedKey {
    FailMemo::Key shape;
    size_t overlapping = 0;
    bool operator==(const PlacedKey&) const = default;
  };
  struct PlacedKeyHash {
    size_t operator()(const PlacedKey& k) const { return FailMemo::KeyHash()(k.shape) ^ (k.overlapping * 0x9e3779b97f4a7c15ull); }
  };
  struct PlacedShape {
    uint64_t epoch = 0;
    std::optional<Choice> choice;
    int spanned = -1, needed = 0;  // leaves_of(choice), once still_parked() asked (-1: not yet)
  };
  std::unordered_map<PlacedKey, PlacedShape, PlacedKeyHash> placed_;
  uint64_t epoch_ = 1;                     // changes with every start and reservation
  std::vector<int64_t> reservation_starts_;  // of this pass's reservations, sorted
  std::unordered_map<std::string, int> user_used_, project_used_;
  int reservations_ = 0;
  int compact_reservations_ = 0;  // compact waits' reservations: a budget of their own (compact_reservation_depth)
  std::optional<JobId> blocked_by_;
  Plan plan_;
  // The queue entry consider() examines and its bucket, in a pass over a kept queue (run(PendingQueue&)).
  struct Examined {
    PendingQueue::Entry* entry = nullptr;
    const PendingQueue::Bucket* bucket = nullptr;
  };
  Examined current_;
};

}  // namespace

Plan run_pass(const Snapshot& s, const NodeClasses& classes, ClusterUsage& usage,
              std::span<const Releases::Entry> dues, bool holds_running, PendingQueue* queue) {
  Pass pass(s, classes, usage, dues, holds_running);
  return queue ? pass.run(*queue) : pass.run();
}

Plan schedule(const Snapshot& snapshot) {
  if (!snapshot.cluster) return {};
  NodeClasses classes(*snapshot.cluster, snapshot.containers);
  ClusterUsage usage(*snapshot.cluster, classes, snapshot.health);
  return Pass(snapshot, classes, usage).run();
}

}  // namespace railyard::sched
