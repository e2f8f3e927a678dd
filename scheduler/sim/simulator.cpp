#include "scheduler/sim/simulator.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <queue>
#include <unordered_map>

#include "scheduler/core/cycle.hpp"
#include "scheduler/queue/fairshare.hpp"
#include "topology/cost.hpp"

namespace railyard::sim {
namespace {

using sched::JobId;
constexpr int64_t kNever = INT64_MAX / 4;

enum class Where : uint8_t { kFuture, kPending, kRunning, kDone, kRejected };

struct Completion {
  int64_t time;
  JobId id;
  bool operator>(const Completion& o) const { return time != o.time ? time > o.time : id > o.id; }
};

int64_t ceil_seconds(double s) { return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(s - 1e-9))); }

// One policy's run. Owns the persistent Snapshot and updates it in place between passes.
class Simulator {
 public:
  Simulator(const topology::Cluster& cluster, const std::vector<TraceJob>& trace, const PolicySpec& policy,
            const SimOptions& options, const ProgressFn& progress);
  SimResult run();

 private:
  size_t idx(JobId id) const { return static_cast<size_t>(id - 1); }
  int64_t next_event_time();
  void advance_to(int64_t t);
  void complete_due(int64_t t);
  void arrive_due(int64_t t);
  void pass(int64_t t);
  // A pass can only start a job if some pending job fits the free GPUs by count: trace jobs are normal QoS,
  // so no preemption can make room. Skipping the others changes no start (only when a rejection is seen).
  bool pass_can_start_something() const {
    return !snap_.pending.empty() && min_pending_gpus_ <= result_.cluster_gpus - busy_;
  }
  void apply_start(const sched::Placement& p, int64_t t);
  void stop_running(JobId id, int64_t t);
  void requeue(JobId id, int64_t t);
  void add_pending(JobId id);
  void remove_pending(JobId id);
  void refresh_min_pending();
  int account_of(const std::string& user, const std::string& project);
  void report_progress(bool force);

  const topology::Cluster& cluster_;
  SimOptions options_;
  CommModel comm_;
  const ProgressFn& progress_;
  std::vector<jobs::JobSpec> specs_;  // sized once: the Snapshot borrows pointers into it
  std::vector<Where> where_;
  std::vector<int32_t> slot_;      // position in snap_.pending or snap_.running
  std::vector<double> remaining_;  // ideal (unstretched) seconds of work left
  std::vector<int64_t> run_start_, run_end_;
  std::vector<int> account_;                                   // per job
  std::vector<std::pair<std::string, std::string>> accounts_;  // (user, project)
  std::unordered_map<std::string, int> account_index_;
  std::vector<int64_t> account_gpus_;  // GPUs each account holds now
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions_;
  size_t next_arrival_ = 0;
  sched::Snapshot snap_;
  sched::Scheduler scheduler_;  // the core with its per-cluster caches (same plans as sched::schedule)
  sched::FairShareLedger ledger_;
  std::vector<JobId> gpu_owner_;  // 0 = free
  int64_t busy_ = 0;
  int min_pending_gpus_ = INT_MAX;
  int64_t last_time_ = 0;
  int64_t last_pass_ = -kNever;
  int64_t wake_ = kNever;  // the last plan's wake_at, until that time comes
  bool dirty_ = false;
  int64_t done_ = 0;
  int64_t last_progress_ = 0;
  SimResult result_;
};

Simulator::Simulator(const topology::Cluster& cluster, const std::vector<TraceJob>& trace,
                     const PolicySpec& policy, const SimOptions& options, const ProgressFn& progress)
    : cluster_(cluster),
      options_(options),
      comm_(cluster,
            [&] {
              CommParams c = options.comm;
              c.allreduce_bytes = policy.config.allreduce_bytes;
              return c;
            }()),
      progress_(progress),
      ledger_(options.fairshare_half_life_s) {
  const size_t n = trace.size();
  specs_.resize(n);
  where_.assign(n, Where::kFuture);
  slot_.assign(n, -1);
  remaining_.assign(n, 0);
  run_start_.assign(n, 0);
  run_end_.assign(n, kNever);
  account_.assign(n, 0);
  result_.policy = policy.name;
  result_.jobs.resize(n);
  result_.cluster_gpus = cluster.gpu_count();
  for (size_t i = 0; i < n; ++i) {
    const TraceJob& t = trace[i];
    jobs::JobSpec& s = specs_[i];
    s.name = t.job_id;
    s.user = t.user;
    s.project = t.user;
    s.kind = jobs::JobKind::kBatch;
    s.qos = jobs::Qos::kNormal;
    s.gpus = t.gpus;
    s.time_limit_s = ceil_seconds(std::ceil(t.duration_s) * comm_.allowance(t.gpus));
    remaining_[i] = t.duration_s;
    account_[i] = account_of(s.user, s.project);
    JobResult& r = result_.jobs[i];
    r.id = static_cast<JobId>(i + 1);
    r.submit = std::llround(t.submit_s);
    r.gpus = t.gpus;
    r.duration_s = t.duration_s;
  }
  snap_.cluster = &cluster_;
  snap_.config = policy.config;
  gpu_owner_.assign(static_cast<size_t>(cluster.gpu_count()), 0);
}

int Simulator::account_of(const std::string& user, const std::string& project) {
  auto [it, added] = account_index_.try_emplace(user + '\n' + project, static_cast<int>(accounts_.size()));
  if (added) {
    accounts_.emplace_back(user, project);
    account_gpus_.push_back(0);
  }
  return it->second;
}

SimResult Simulator::run() {
  const auto wall_start = std::chrono::steady_clock::now();
  if (!result_.jobs.empty()) last_time_ = result_.first_submit = result_.jobs.front().submit;
  for (int64_t t = next_event_time(); t < kNever; t = next_event_time()) {
    advance_to(t);
    complete_due(t);
    arrive_due(t);
    if (t >= wake_) dirty_ = true, wake_ = kNever;  // a compact wait ends: a pass may start that job
    if (dirty_ && t >= last_pass_ + options_.pass_interval_s) {
      if (pass_can_start_something())
        pass(t);
      else
        dirty_ = false;
    }
  }
  result_.last_end = last_time_;
  result_.unfinished = static_cast<int64_t>(snap_.pending.size());
  report_progress(true);
  result_.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return std::move(result_);
}

// Earliest of: the next live completion, the next arrival, the next allowed pass when events wait for one.
int64_t Simulator::next_event_time() {
  while (!completions_.empty()) {
    const Completion& c = completions_.top();
    if (where_[idx(c.id)] == Where::kRunning && run_end_[idx(c.id)] == c.time) break;
    completions_.pop();  // stale: the job was preempted after this completion was queued
  }
  int64_t t = kNever;
  if (!completions_.empty()) t = completions_.top().time;
  if (next_arrival_ < result_.jobs.size()) t = std::min(t, result_.jobs[next_arrival_].submit);
  if (dirty_) t = std::min(t, last_pass_ + options_.pass_interval_s);
  if (wake_ < kNever) t = std::min(t, wake_);
  return t;
}

// Integrates utilization, free and fragmented GPU-seconds and fair-share usage over [last_time_, t).
void Simulator::advance_to(int64_t t) {
  const int64_t dt = t - last_time_;
  if (dt <= 0) return;
  const int64_t free = result_.cluster_gpus - busy_;
  result_.busy_gpu_s += static_cast<double>(busy_) * static_cast<double>(dt);
  result_.free_gpu_s += static_cast<double>(free) * static_cast<double>(dt);
  if (min_pending_gpus_ <= free)
    result_.fragmented_gpu_s += static_cast<double>(free) * static_cast<double>(dt);
  for (size_t a = 0; a < accounts_.size(); ++a)
    if (account_gpus_[a] > 0)
      ledger_.add(accounts_[a].first, accounts_[a].second,
                  static_cast<double>(account_gpus_[a]) * static_cast<double>(dt), t);
  last_time_ = t;
}

void Simulator::complete_due(int64_t t) {
  while (!completions_.empty() && completions_.top().time == t) {
    const JobId id = completions_.top().id;
    completions_.pop();
    if (where_[idx(id)] != Where::kRunning || run_end_[idx(id)] != t) continue;
    stop_running(id, t);
    where_[idx(id)] = Where::kDone;
    remaining_[idx(id)] = 0;
    result_.jobs[idx(id)].end = t;
    ++done_;
    dirty_ = true;
  }
  report_progress(false);
}

void Simulator::arrive_due(int64_t t) {
  while (next_arrival_ < result_.jobs.size() && result_.jobs[next_arrival_].submit == t) {
    add_pending(static_cast<JobId>(next_arrival_ + 1));
    ++next_arrival_;
    dirty_ = true;
  }
}

void Simulator::pass(int64_t t) {
  snap_.now = t;
  snap_.user_usage = ledger_.users();
  snap_.project_usage = ledger_.projects();
  const sched::Plan plan = scheduler_.schedule(snap_);
  ++result_.passes;
  last_pass_ = t;
  dirty_ = false;
  wake_ = plan.wake_at.value_or(kNever);
  for (const sched::PendingInfo& info : plan.pending)  // the compact wait's clock, as the daemon keeps it
    if (info.reason == sched::PendingReason::kCompact) {
      sched::PendingJob& job = snap_.pending[static_cast<size_t>(slot_[idx(info.job)])];
      if (job.compact_wait_since < 0) job.compact_wait_since = t;
    }
  for (const sched::Placement& p : plan.starts) apply_start(p, t);
  for (const sched::Rejection& r : plan.rejected) {
    if (r.job < 1 || static_cast<size_t>(r.job) > where_.size() || where_[idx(r.job)] != Where::kPending)
      continue;
    remove_pending(r.job);
    where_[idx(r.job)] = Where::kRejected;
    result_.jobs[idx(r.job)].rejected = true;
    ++result_.rejected;
    ++done_;
  }
  refresh_min_pending();
}

// Applies one start of a plan: requeue its victims, re-check its GPUs are free, then run it for its
// remaining work stretched by the placement's communication slowdown.
void Simulator::apply_start(const sched::Placement& p, int64_t t) {
  if (p.job < 1 || static_cast<size_t>(p.job) > where_.size() || where_[idx(p.job)] != Where::kPending) {
    ++result_.plan_conflicts;
    return;
  }
  for (JobId victim : p.preempts)
    if (victim >= 1 && static_cast<size_t>(victim) <= where_.size() && where_[idx(victim)] == Where::kRunning)
      requeue(victim, t);
  for (topology::GpuId g : p.gpus)
    if (g < 0 || g >= result_.cluster_gpus || gpu_owner_[static_cast<size_t>(g)] != 0) {
      ++result_.plan_conflicts;
      return;
    }
  const size_t i = idx(p.job);
  remove_pending(p.job);
  const int gpus = static_cast<int>(p.gpus.size());
  double placed = p.allreduce_s;
  if (placed <= 0 && gpus > 1)
    placed = topology::estimate_allreduce(cluster_, p.gpus, comm_.params().allreduce_bytes).seconds;
  const double stretch = comm_.stretch(gpus, placed);
  const int64_t run = ceil_seconds(remaining_[i] * stretch);
  for (topology::GpuId g : p.gpus) gpu_owner_[static_cast<size_t>(g)] = p.job;
  busy_ += gpus;
  account_gpus_[static_cast<size_t>(account_[i])] += gpus;
  where_[i] = Where::kRunning;
  slot_[i] = static_cast<int32_t>(snap_.running.size());
  snap_.running.push_back({p.job, &specs_[i], p.gpus, {}, t});
  run_start_[i] = t;
  run_end_[i] = t + run;
  completions_.push({t + run, p.job});
  JobResult& r = result_.jobs[i];
  if (r.first_start < 0) r.first_start = t;
  r.nodes = static_cast<int>(p.nodes.size());
  r.leaves_spanned = p.leaves_spanned;
  r.min_leaves = p.min_leaves;
  r.comm_slowdown = stretch;
}

// Takes a running job off its GPUs (swap-and-pop in snap_.running).
void Simulator::stop_running(JobId id, int64_t t) {
  const size_t i = idx(id);
  const auto pos = static_cast<size_t>(slot_[i]);
  sched::RunningJob& job = snap_.running[pos];
  for (topology::GpuId g : job.gpus) gpu_owner_[static_cast<size_t>(g)] = 0;
  const auto gpus = static_cast<int64_t>(job.gpus.size());
  busy_ -= gpus;
  account_gpus_[static_cast<size_t>(account_[i])] -= gpus;
  result_.jobs[i].run_s += t - run_start_[i];
  if (pos + 1 != snap_.running.size()) {
    job = std::move(snap_.running.back());
    slot_[idx(job.id)] = static_cast<int32_t>(pos);
  }
  snap_.running.pop_back();
  slot_[i] = -1;
}

// A preempted job goes back to pending with the work it has not done yet (its original submit time keeps
// its age); its time limit shrinks accordingly.
void Simulator::requeue(JobId id, int64_t t) {
  const size_t i = idx(id);
  const double stretch = result_.jobs[i].comm_slowdown;
  const double done_work = static_cast<double>(t - run_start_[i]) / stretch;
  stop_running(id, t);
  remaining_[i] = std::max(0.0, remaining_[i] - done_work);
  specs_[i].time_limit_s = ceil_seconds(std::ceil(remaining_[i]) * comm_.allowance(specs_[i].gpus));
  ++result_.jobs[i].preemptions;
  ++result_.preemptions;
  add_pending(id);  // considered by the next pass (not this one again: no preemption ping-pong at one time)
}

void Simulator::add_pending(JobId id) {
  const size_t i = idx(id);
  where_[i] = Where::kPending;
  slot_[i] = static_cast<int32_t>(snap_.pending.size());
  snap_.pending.push_back({id, &specs_[i], result_.jobs[i].submit, false});
  min_pending_gpus_ = std::min(min_pending_gpus_, specs_[i].gpus);
}

void Simulator::remove_pending(JobId id) {
  const size_t i = idx(id);
  const auto pos = static_cast<size_t>(slot_[i]);
  if (pos + 1 != snap_.pending.size()) {
    snap_.pending[pos] = snap_.pending.back();
    slot_[idx(snap_.pending[pos].id)] = static_cast<int32_t>(pos);
  }
  snap_.pending.pop_back();
  slot_[i] = -1;
}

void Simulator::refresh_min_pending() {
  min_pending_gpus_ = INT_MAX;
  for (const sched::PendingJob& p : snap_.pending)
    min_pending_gpus_ = std::min(min_pending_gpus_, p.spec->gpus);
}

void Simulator::report_progress(bool force) {
  if (!progress_) return;
  if (!force && done_ - last_progress_ < 256) return;
  last_progress_ = done_;
  progress_(done_, static_cast<int64_t>(result_.jobs.size()));
}

}  // namespace

std::vector<std::string> policy_names() { return {"railyard", "first-fit", "fifo", "slurm-tree"}; }

Result<PolicySpec> policy_by_name(std::string_view name) {
  PolicySpec p{std::string(name), {}};
  p.config.explain = false;
  if (name == "railyard") return p;
  if (name == "first-fit") {
    p.config.placement = sched::PolicyConfig::Placement::kFirstFit;
    return p;
  }
  if (name == "fifo") {
    p.config.backfill = false;
    return p;
  }
  if (name == "slurm-tree") {  // Slurm's topology/tree without --switches: fewest switches now, never waits
    p.config.compact_wait_s = 0;
    return p;
  }
  return invalid("unknown policy \"" + std::string(name) + "\" (known: railyard, first-fit, fifo, slurm-tree)");
}

SimResult simulate(const topology::Cluster& cluster, const std::vector<TraceJob>& trace,
                   const PolicySpec& policy, const SimOptions& options, const ProgressFn& progress) {
  return Simulator(cluster, trace, policy, options, progress).run();
}

}  // namespace railyard::sim
