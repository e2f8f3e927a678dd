// Earliest-start search for a blocked job: replay the expected releases of running jobs (their time limits)
// on the usage (undone afterwards) and try the placer at each release time, honouring earlier reservations.
// After 16 failed tries it gallops (tries every 2nd, 4th, ... release time): the start it then finds may be
// later than the earliest possible one, which is safe (a late reservation delays no one).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "scheduler/model/usage.hpp"
#include "scheduler/placement/placer.hpp"
#include "scheduler/placement/request.hpp"

namespace railyard::sched {

// GPUs coming back at known times: the running jobs' expected ends, then what the pass adds, as one entry
// per node (a mask of its GPUs) or per MIG slice, read in order of end through a Cursor. The order among
// equal ends is unspecified: a replay gives back every release at one time before it tries the placer, and
// a usage does not depend on the order GPUs came back in. Slice entries point into the snapshot's and the
// plan's vectors, whose buffers stay put for the whole pass.
class Releases {
 public:
  struct Entry {
    int64_t end;
    uint32_t index;  // the running job's index in the snapshot (kAdded for what the pass adds)
    NodeId node;     // -1: a slice, or a time marker with nothing to give
    uint64_t mask;   // the node's GPUs (local indices) that come back
    const MigSlice* slice;
  };
  static constexpr uint32_t kAdded = UINT32_MAX;
  static bool by_end(const Entry& a, const Entry& b) { return a.end < b.end; }

  // Appends the entries of one holder's GPUs and slices (GPUs grouped by runs on one node).
  static void append(std::vector<Entry>& out, const topology::Cluster& c, int64_t end, uint32_t index,
                     std::span<const GpuId> gpus, std::span<const MigSlice> slices) {
    for (size_t i = 0; i < gpus.size();) {
      const NodeId n = c.node_of(gpus[i]);
      uint64_t mask = 0;
      for (; i < gpus.size() && c.node_of(gpus[i]) == n; ++i) mask |= uint64_t{1} << c.local_index(gpus[i]);
      out.push_back({end, index, n, mask, nullptr});
    }
    for (const MigSlice& sl : slices) out.push_back({end, index, -1, 0, &sl});
  }
  // Every running job's entries, sorted by end.
  static std::vector<Entry> dues_of(const topology::Cluster& c, std::span<const RunningJob> running) {
    std::vector<Entry> out;
    out.reserve(running.size());
    for (size_t i = 0; i < running.size(); ++i)
      append(out, c, running[i].expected_end(), static_cast<uint32_t>(i), running[i].gpus, running[i].slices);
    std::sort(out.begin(), out.end(), by_end);
    return out;
  }

  // `dues`: the running jobs' entries sorted by end (Scheduler keeps them across passes). Without them,
  // they are built at first use, so a pass that never searches a reservation never reads the running jobs.
  explicit Releases(const topology::Cluster& cluster, std::span<const RunningJob> running = {},
                    std::span<const Entry> dues = {})
      : cluster_(&cluster), running_(running), dues_(dues), have_dues_(running.empty() || !dues.empty()) {}
  void add(int64_t end, std::span<const GpuId> gpus, std::span<const MigSlice> slices) {
    scratch_.clear();
    append(scratch_, *cluster_, end, kAdded, gpus, slices);
    if (scratch_.empty()) scratch_.push_back({end, kAdded, -1, 0, nullptr});  // a time to try at
    const auto at = std::upper_bound(added_.begin(), added_.end(), scratch_.front(), by_end);
    added_.insert(at, scratch_.begin(), scratch_.end());
  }

  // Merges the running jobs' entries with the added ones, by end.
  class Cursor {
   public:
    explicit Cursor(const Releases& r) : dues_(r.dues()), added_(r.added_) {}
    bool done() const { return d_ == dues_.size() && a_ == added_.size(); }
    const Entry& entry() const { return from_dues() ? dues_[d_] : added_[a_]; }
    void next() { from_dues() ? ++d_ : ++a_; }

   private:
    bool from_dues() const { return d_ < dues_.size() && (a_ == added_.size() || dues_[d_].end <= added_[a_].end); }
    std::span<const Entry> dues_, added_;
    size_t d_ = 0, a_ = 0;
  };

 private:
  std::span<const Entry> dues() const {
    if (!have_dues_) {
      own_dues_ = dues_of(*cluster_, running_);
      dues_ = own_dues_;
      have_dues_ = true;
    }
    return dues_;
  }

  const topology::Cluster* cluster_;
  std::span<const RunningJob> running_;
  mutable std::span<const Entry> dues_;
  mutable std::vector<Entry> own_dues_;
  mutable bool have_dues_;
  std::vector<Entry> added_;  // sorted by end
  std::vector<Entry> scratch_;
};

struct FoundReservation {
  int64_t start_time;
  std::vector<GpuId> gpus;
};

// Whether `usage` has the free GPUs, and the nodes with as many free GPUs as the smallest share of the
// shape, that one replica of `req` needs: a necessary condition (reservations only lower the counts), in
// O(classes × GPUs per node), where a placer try is O(nodes).
inline bool enough_by_count(const ClusterUsage& usage, const Request& req) {
  int free = 0, nodes = 0;
  const int smallest = req.shape.per_node.empty() ? 1 : req.shape.per_node.back();
  for (int c = 0; c < usage.classes().count(); ++c) {
    if (!req.eligible[c]) continue;
    free += usage.class_free(c);
    nodes += usage.nodes_with_free(c, smallest);
  }
  return free >= req.shape.total && nodes >= req.shape.nodes;
}

// Replays the releases on `usage` itself (released with an undo log, restored before returning), so a
// search costs O(entries released until it fits), not a copy of the usage. `log` is the
// caller's buffer, cleared here. `place(usage, req, &short_by)` may say by how many nodes a failed try fell
// short (place_topology's contract: it fails exactly when fewer than n nodes have k usable GPUs in the
// window). Until as many entries have given GPUs back, or a reservation has ended (its end is an entry too:
// Releases::add), no node more has them in a later window (a later window only overlaps more of the
// reservations that have not ended), so those tries are counted as failed without asking the placer: the
// tries made and the start found are the same.
template <typename PlaceFn>
std::optional<FoundReservation> find_reservation(const Releases& releases, ClusterUsage& usage, Request req,
                                                 int64_t now, PlaceFn place, ClusterUsage::UndoLog& log) {
  const int64_t duration = req.window.end >= kForever ? kForever : req.window.end - req.window.start;
  log.clear();
  std::optional<FoundReservation> found;
  int failures = 0, stride = 1, since_try = 0;
  int short_by = 0, given_back = 0;  // since the last try the placer made
  bool ended = false;
  for (Releases::Cursor it(releases); !it.done() && !found;) {
    const int64_t t = std::max(now, it.entry().end);
    if (t >= kForever) break;
    for (; !it.done() && std::max(now, it.entry().end) == t; it.next()) {
      const Releases::Entry& e = it.entry();
      if (e.slice)
        usage.give_slice(*e.slice, &log);
      else if (e.node >= 0)
        usage.release(e.node, e.mask, log);
      if (e.slice || e.node >= 0)
        ++given_back;
      else
        ended = true;
    }
    if (!req.is_mig() && !enough_by_count(usage, req)) continue;
    if (++since_try < stride && !it.done()) continue;
    since_try = 0;
    req.window = {t, duration >= kForever ? kForever : t + duration};
    if (short_by > given_back && !ended) {  // fails as the last try did
      if (++failures >= 16) stride *= 2;
      continue;
    }
    given_back = 0;
    ended = false;
    if (auto choice = place(std::as_const(usage), req, &short_by)) {
      if (choice->gpus.empty()) break;  // MIG slices are not reserved
      found = FoundReservation{t, std::move(choice->gpus)};
    } else if (++failures >= 16) {
      stride *= 2;
    }
  }
  usage.undo(log);
  return found;
}

}  // namespace railyard::sched
