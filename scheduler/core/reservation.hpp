// Earliest-start search for a blocked job: replay the expected releases of running jobs (their time limits)
// on a copy of the usage and try the placer at each release time, honouring earlier reservations.
// After 16 failed tries it gallops (tries every 2nd, 4th, ... release time): the start it then finds may be
// later than the earliest possible one, which is safe (a late reservation delays no one).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "scheduler/core/usage.hpp"
#include "scheduler/placement/placer.hpp"
#include "scheduler/placement/request.hpp"

namespace railyard::sched {

// GPUs coming back at known times: the running jobs' expected ends, then what the pass adds. sorted() is
// the stable sort by end of that sequence; it is built at its first use, so a pass that never searches a
// reservation never reads the running jobs' specs. Spans borrow the snapshot's and the plan's vectors,
// whose buffers stay put for the whole pass.
class Releases {
 public:
  explicit Releases(std::span<const RunningJob> running = {}) : running_(running) {}
  void add(int64_t end, std::span<const GpuId> gpus, std::span<const MigSlice> slices) {
    items_.push_back({end, gpus, slices});
    sorted_ = false;
  }
  struct Item {
    int64_t end;
    std::span<const GpuId> gpus;
    std::span<const MigSlice> slices;
  };
  const std::vector<Item>& sorted() const {
    if (!running_.empty()) {  // the running jobs come first in the sequence
      std::vector<Item> all;
      all.reserve(running_.size() + items_.size());
      for (const RunningJob& r : running_) all.push_back({r.expected_end(), r.gpus, r.slices});
      all.insert(all.end(), items_.begin(), items_.end());
      items_ = std::move(all);
      running_ = {};
      sorted_ = false;
      sorted_prefix_ = 0;
    }
    if (!sorted_) {
      // Stable by end: the sorted prefix came earlier in the sequence than the items added since, so
      // sorting those alone and merging (which keeps the prefix first among equal ends) is the same as
      // sorting everything again.
      const auto by_end = [](const Item& a, const Item& b) { return a.end < b.end; };
      const auto mid = items_.begin() + static_cast<std::ptrdiff_t>(sorted_prefix_);
      if (sorted_prefix_ == 0 && items_.size() > 64) {
        sort_by_keys();
      } else {
        std::stable_sort(mid, items_.end(), by_end);
        std::inplace_merge(items_.begin(), mid, items_.end(), by_end);
      }
      sorted_ = true;
      sorted_prefix_ = items_.size();
    }
    return items_;
  }

 private:
  // Stable sort by end of all items: sort (end, position) keys, then gather the items in that order.
  void sort_by_keys() const {
    std::vector<std::pair<int64_t, uint32_t>> keys(items_.size());
    for (size_t i = 0; i < items_.size(); ++i) keys[i] = {items_[i].end, static_cast<uint32_t>(i)};
    std::sort(keys.begin(), keys.end());
    std::vector<Item> out;
    out.reserve(items_.size());
    for (const auto& key : keys) out.push_back(items_[key.second]);
    items_ = std::move(out);
  }

  mutable std::span<const RunningJob> running_;
  mutable std::vector<Item> items_;
  mutable size_t sorted_prefix_ = 0;  // items_[0, sorted_prefix_) are sorted
  mutable bool sorted_ = true;
};

struct FoundReservation {
  int64_t start_time;
  std::vector<GpuId> gpus;
};

// `reuse` holds the replay: a copy of `usage` is assigned to it (an empty optional gets one), so a
// caller that keeps it across searches reuses its buffers.
template <typename PlaceFn>
std::optional<FoundReservation> find_reservation(const Releases& releases, const ClusterUsage& usage, Request req,
                                                 int64_t now, PlaceFn place, std::optional<ClusterUsage>& reuse) {
  const int64_t duration = req.window.end >= kForever ? kForever : req.window.end - req.window.start;
  if (reuse)
    *reuse = usage;
  else
    reuse.emplace(usage);
  ClusterUsage& scratch = *reuse;
  const auto& items = releases.sorted();
  int failures = 0, stride = 1, since_try = 0;
  for (size_t i = 0; i < items.size();) {
    const int64_t t = std::max(now, items[i].end);
    if (t >= kForever) break;
    for (; i < items.size() && std::max(now, items[i].end) == t; ++i) {
      scratch.give(items[i].gpus);
      for (const auto& sl : items[i].slices) scratch.give_slice(sl);
    }
    int free = 0;
    for (int c = 0; c < scratch.classes().count(); ++c)
      if (req.eligible[c]) free += scratch.class_free(c);
    if (free < req.shape.total && !req.is_mig()) continue;
    if (++since_try < stride && i < items.size()) continue;
    since_try = 0;
    req.window = {t, duration >= kForever ? kForever : t + duration};
    if (auto choice = place(scratch, req)) {
      if (choice->gpus.empty()) return std::nullopt;  // MIG slices are not reserved
      return FoundReservation{t, std::move(choice->gpus)};
    }
    if (++failures >= 16) stride *= 2;
  }
  return std::nullopt;
}

}  // namespace railyard::sched
