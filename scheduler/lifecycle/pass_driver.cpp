#include "scheduler/lifecycle/pass_driver.hpp"

#include <algorithm>

namespace railyard::lifecycle {

Result<std::vector<JobId>> PassDriver::tend_arrays(int64_t now, JobId& next_id) {
  std::vector<JobId> created;
  if (!table_.has_open_arrays()) return created;
  JobId next = next_id;
  Changes b = table_.array_changes(now, next);
  if (b.empty()) return created;
  created.reserve(b.inserts.size());
  for (const JobRecord& t : b.inserts) created.push_back(t.id);
  if (auto s = adaptor_.commit(b, true); !s) return s.error();
  next_id = next;
  return created;
}

sched::Plan PassDriver::schedule(const sched::Snapshot& input) {
  sched::Plan plan = scheduler_.schedule(input);
  // By id, so plan_changes() walks them alongside the table instead of a lookup per job.
  std::sort(plan.pending.begin(), plan.pending.end(),
            [](const auto& a, const auto& b) { return a.job < b.job; });
  std::sort(plan.unexamined.begin(), plan.unexamined.end());
  return plan;
}

Result<PassDriver::Applied> PassDriver::apply(const sched::Plan& slice, int64_t now, bool last,
                                              bool explain) {
  auto changes = table_.plan_changes(slice, now);
  Applied out;
  out.stale = changes.stale;
  out.updates = changes.batch.updates.size();
  if (auto s = adaptor_.commit(changes.batch, false); !s) return s.error();
  out.notes = changes.notes.size();
  if (!changes.notes.empty()) {
    table_.apply(changes.notes);
    if (adaptor_.noted) adaptor_.noted(changes.notes);
  }
  if (last) table_.park(slice.pending, explain);
  return out;
}

}  // namespace railyard::lifecycle
