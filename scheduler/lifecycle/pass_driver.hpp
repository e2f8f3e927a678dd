// One scheduling pass over a JobTable, in the steps and the order both shells take it: the daemon
// (daemon::PassRunner, which paces passes, runs schedule() off its event loop and applies big plans in
// slices) and the simulator (sim::VirtualCluster, every step at once on a virtual clock). So the incremental
// work of a pass (the queue sched::Scheduler keeps, the usage it carries over, the jobs the table parks)
// runs the same in both, and the simulator's lifecycle property tests cover what the daemon runs.
//
//   1. tend_arrays(): the open arrays' next tasks created (and ended arrays ended), committed, so the pass
//      sees them;
//   2. the pass input: JobTable::snapshot() (a copy, for another thread) or pass_input() (the table's own);
//   3. schedule(): the plan, its reasons and cut jobs sorted by id for step 4;
//   4. apply(): the plan's changes, re-checked against the table of the moment (JobTable::plan_changes),
//      committed; the waiting jobs' new reasons applied in memory; with the last slice of a plan, the jobs
//      its gates closed parked.
//
// What differs between the shells is the adaptor: how a batch is committed (the daemon writes it to its
// store, with the run records and pre-commit hooks, then applies it and tells observers; the simulator
// applies it at once, turning STARTING into RUNNING), and who hears of new reasons. Steps 1, 2 and 4 on
// the owner's thread; step 3 on any one thread at a time.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "scheduler/core/cycle.hpp"
#include "scheduler/lifecycle/job_table.hpp"

namespace railyard::lifecycle {

class PassDriver {
 public:
  struct Adaptor {
    // Commits `changes` and applies them to the table; on an error nothing was applied. `array_tasks`:
    // the batch of step 1 (the daemon counts those), else a plan's.
    std::function<Status(Changes& changes, bool array_tasks)> commit;
    // Waiting jobs whose reason or estimated start changed, already applied (optional).
    std::function<void(const std::vector<JobTable::PendingNote>& notes)> noted;
  };

  PassDriver(JobTable& table, Adaptor adaptor) : table_(table), adaptor_(std::move(adaptor)) {}

  // Step 1 at `now`: the tasks created (ids from `next_id` on, which moves past them only when the commit
  // succeeded), or the commit's error.
  Result<std::vector<JobId>> tend_arrays(int64_t now, JobId& next_id);
  // Step 3.
  sched::Plan schedule(const sched::Snapshot& input);
  // Step 4 for `slice` at `now`: all of a plan, or some of its starts; `last` with the plan's reasons,
  // rejections and cut jobs (`explain` as the pass had it), which park the gated ones.
  struct Applied {
    size_t updates = 0;  // records the plan's changes update (before the shell's commit adds any)
    size_t stale = 0;    // starts dropped by the re-check
    size_t notes = 0;    // waiting jobs told a new reason or estimated start
  };
  Result<Applied> apply(const sched::Plan& slice, int64_t now, bool last, bool explain);

 private:
  JobTable& table_;
  Adaptor adaptor_;
  sched::Scheduler scheduler_;
};

}  // namespace railyard::lifecycle
