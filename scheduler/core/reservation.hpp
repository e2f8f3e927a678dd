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

// GPUs coming back at known times. Spans borrow the snapshot's and the plan's vectors, whose buffers stay
// put for the whole pass.
class Releases {
 public:
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
    if (!sorted_) {
      std::stable_sort(items_.begin(), items_.end(), [](const Item& a, const Item& b) { return a.end < b.end; });
      sorted_ = true;
    }
    return items_;
  }

 private:
  mutable std::vector<Item> items_;
  mutable bool sorted_ = true;
};

struct FoundReservation {
  int64_t start_time;
  std::vector<GpuId> gpus;
};

template <typename PlaceFn>
std::optional<FoundReservation> find_reservation(const Releases& releases, const ClusterUsage& usage, Request req,
                                                 int64_t now, PlaceFn place) {
  const int64_t duration = req.window.end >= kForever ? kForever : req.window.end - req.window.start;
  ClusterUsage scratch = usage;
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
