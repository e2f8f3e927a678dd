// Who holds each GPU now, kept by JobTable::apply() so that re-checking a plan's starts costs the size of
// each placement, not of the cluster: whole GPUs of STARTING/RUNNING jobs, GPUs of draining allocations
// (counted: they block whoever asks), and MIG slices, which block only the slots they cover.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "scheduler/lifecycle/records.hpp"
#include "scheduler/model/plan.hpp"

namespace railyard::lifecycle {

class Occupancy {
 public:
  void reset(int gpus) {
    owner_.assign(static_cast<size_t>(gpus), 0);
    owned_ = 0;
    draining_.assign(static_cast<size_t>(gpus), 0);
    slices_.clear();
  }
  // A job starts or stops holding what its record names.
  void own(const JobRecord& r) { mark(r, r.id); }
  void disown(const JobRecord& r) { mark(r, 0); }
  // A draining allocation's GPUs (`sign` +1 when it starts draining, -1 when released).
  void drain(const std::vector<topology::GpuId>& gpus, int sign) {
    for (auto g : gpus)
      if (valid(g)) draining_[static_cast<size_t>(g)] += sign;
  }

  // GPUs with a whole-GPU holder; the others (free, draining, sliced or on a node not up) bound from above
  // what a pass can start.
  int64_t owned() const { return owned_; }

  // Every GPU and slot of `p` is free, or held by a job `p` preempts.
  bool free_for(const sched::Placement& p) const {
    auto ok = [&](JobId holder) {
      return holder == 0 || std::find(p.preempts.begin(), p.preempts.end(), holder) != p.preempts.end();
    };
    auto whole = [&](topology::GpuId g) {
      return valid(g) && draining_[static_cast<size_t>(g)] == 0 && ok(owner_[static_cast<size_t>(g)]);
    };
    for (auto g : p.gpus) {
      if (!whole(g)) return false;
      for (auto [it, end] = slices_.equal_range(g); it != end; ++it)
        if (!ok(it->second.first)) return false;
    }
    for (const auto& mine : p.slices) {
      if (!whole(mine.gpu)) return false;
      for (auto [it, end] = slices_.equal_range(mine.gpu); it != end; ++it)
        if (overlap(it->second.second, mine) && !ok(it->second.first)) return false;
    }
    return true;
  }

 private:
  bool valid(topology::GpuId g) const { return g >= 0 && static_cast<size_t>(g) < owner_.size(); }
  static bool overlap(const sched::MigSlice& a, const sched::MigSlice& b) {
    return a.first_slot < b.first_slot + b.slots && b.first_slot < a.first_slot + a.slots;
  }
  void mark(const JobRecord& r, JobId owner) {
    for (auto g : r.gpus) {
      if (!valid(g)) continue;
      JobId& o = owner_[static_cast<size_t>(g)];
      owned_ += (owner != 0) - (o != 0);
      o = owner;
    }
    for (const auto& sl : r.slices) {
      if (owner != 0) {
        slices_.emplace(sl.gpu, std::make_pair(r.id, sl));
        continue;
      }
      for (auto [it, end] = slices_.equal_range(sl.gpu); it != end; ++it)
        if (it->second.first == r.id && it->second.second.first_slot == sl.first_slot) {
          slices_.erase(it);
          break;
        }
    }
  }

  std::vector<JobId> owner_;     // 0: no whole-GPU holder
  int64_t owned_ = 0;            // owner_ entries not 0
  std::vector<int32_t> draining_;  // draining allocations on each GPU
  std::multimap<topology::GpuId, std::pair<JobId, sched::MigSlice>> slices_;
};

}  // namespace railyard::lifecycle
