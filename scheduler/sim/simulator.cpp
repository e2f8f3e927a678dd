#include "scheduler/sim/simulator.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <queue>
#include <unordered_map>

#include "scheduler/sim/virtual_cluster.hpp"
#include "scheduler/queue/fairshare.hpp"
#include "topology/cost.hpp"

namespace railyard::sim {
namespace {

using jobs::JobState;
using sched::JobId;
constexpr int64_t kNever = INT64_MAX / 4;

struct Completion {
  int64_t time;
  JobId id;
  bool operator>(const Completion& o) const { return time != o.time ? time > o.time : id > o.id; }
};

int64_t ceil_seconds(double s) { return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(s - 1e-9))); }

// One policy's run: the trace's events through a VirtualCluster (the job lifecycle), and what the report
// needs around it (work left, the communication stretch, utilization and fair-share usage).
class Simulator {
 public:
  Simulator(const topology::Cluster& cluster, const std::vector<TraceJob>& trace, const PolicySpec& policy,
            const SimOptions& options, const ProgressFn& progress);
  SimResult run();

 private:
  // What the simulator keeps of a lifecycle job (by id; an array itself has no result).
  struct Run {
    size_t row = 0;            // its trace row (a task: its array's)
    int64_t result = -1;       // index into result_.jobs; -1 for an array
    double remaining = 0;      // ideal (unstretched) seconds of work left
    int64_t run_start = 0, run_end = kNever;
    int account = 0;
    int gpus = 0;              // held now
  };
  Run& run_of(JobId id) { return runs_[static_cast<size_t>(id)]; }
  void track(JobId id, size_t row);
  int64_t next_event_time();
  void advance_to(int64_t t);
  void complete_due(int64_t t);
  void arrive_due(int64_t t);
  void pass(int64_t t);
  // A pass can only start a job if some waiting job fits the free GPUs by count, or a high-QoS job waits
  // while scavenger jobs run (it may preempt them); and it creates array tasks while an array is open.
  // Skipping the others changes no start (only when a rejection is seen).
  bool pass_can_start_something();
  // The fewest GPUs a waiting job asks for (INT_MAX: none), and whether a high-QoS job waits: recomputed by
  // refresh_waiting() when a pass or an end may have changed who waits.
  void refresh_waiting();
  int min_waiting_gpus() { return refresh_waiting(), min_waiting_; }
  bool high_waiting() { return refresh_waiting(), high_waiting_; }
  void start(const sched::Placement& p, int64_t t);
  void stop(JobId id, int64_t t);
  jobs::JobSpec spec_of(const TraceJob& row) const;
  int account_of(const std::string& user, const std::string& project);
  void report_progress(bool force);

  const topology::Cluster& cluster_;
  const std::vector<TraceJob>& trace_;
  SimOptions options_;
  CommModel comm_;
  const ProgressFn& progress_;
  VirtualCluster vc_;
  std::vector<Run> runs_;                 // by job id (index 0 unused)
  std::vector<JobId> row_job_;            // the job id of each trace row that arrived
  std::vector<std::pair<std::string, std::string>> accounts_;  // (user, project)
  std::unordered_map<std::string, int> account_index_;
  std::vector<int64_t> account_gpus_;     // GPUs each account holds now
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions_;
  size_t next_arrival_ = 0;
  sched::FairShareLedger ledger_;
  int64_t busy_ = 0;
  int min_waiting_ = INT_MAX;
  bool high_waiting_ = false;
  bool min_stale_ = false;
  int64_t scavengers_running_ = 0;
  int64_t total_jobs_ = 0;                // results expected: rows, with an array's tasks
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
      trace_(trace),
      options_(options),
      comm_(cluster,
            [&] {
              CommParams c = options.comm;
              c.allreduce_bytes = policy.config.allreduce_bytes;
              return c;
            }()),
      progress_(progress),
      vc_(cluster, policy.config, options.full_passes),
      runs_(1),
      ledger_(options.fairshare_half_life_s) {
  result_.policy = policy.name;
  result_.cluster_gpus = cluster.gpu_count();
  for (const TraceJob& t : trace) total_jobs_ += t.array ? t.array->size() : 1;
  result_.jobs.reserve(trace.size());  // arrays add their tasks as they are created
}

jobs::JobSpec Simulator::spec_of(const TraceJob& t) const {
  jobs::JobSpec s;
  s.name = t.job_id;
  s.user = t.user;
  s.project = t.user;
  s.kind = jobs::JobKind::kBatch;
  s.qos = t.qos;
  s.gpus = t.gpus;
  s.time_limit_s = ceil_seconds(std::ceil(t.duration_s) * comm_.allowance(t.gpus));
  s.array = t.array;
  for (const TraceJob::After& a : t.after) {
    const JobId target = row_job_[a.row];
    if (a.type == jobs::Dependency::Type::kAfterOk && a.task < 0)
      s.afterok.push_back(target);
    else
      s.after.push_back({a.type, target, a.task});
  }
  return s;
}

int Simulator::account_of(const std::string& user, const std::string& project) {
  auto [it, added] = account_index_.try_emplace(user + '\n' + project, static_cast<int>(accounts_.size()));
  if (added) {
    accounts_.emplace_back(user, project);
    account_gpus_.push_back(0);
  }
  return it->second;
}

// A job the lifecycle made (a row's, or a task of a row's array): a result unless it is an array.
void Simulator::track(JobId id, size_t row) {
  if (runs_.size() <= static_cast<size_t>(id)) runs_.resize(static_cast<size_t>(id) + 1);
  const TraceJob& t = trace_[row];
  Run& r = run_of(id);
  r.row = row;
  r.remaining = t.duration_s;
  r.account = account_of(t.user, t.user);
  const lifecycle::JobRecord* rec = vc_.table().find(id);
  if (rec->spec.array) return;
  r.result = static_cast<int64_t>(result_.jobs.size());
  JobResult& j = result_.jobs.emplace_back();
  j.id = id;
  j.name = rec->spec.array_job != 0 ? t.job_id + "_" + std::to_string(rec->spec.array_task) : t.job_id;
  j.submit = std::llround(t.submit_s);
  j.gpus = t.gpus;
  j.duration_s = t.duration_s;
  j.qos = t.qos;
}

SimResult Simulator::run() {
  const auto wall_start = std::chrono::steady_clock::now();
  if (!trace_.empty()) last_time_ = result_.first_submit = static_cast<int64_t>(std::llround(trace_.front().submit_s));
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
  for (const JobResult& j : result_.jobs) result_.unfinished += j.end < 0 && !j.rejected ? 1 : 0;
  report_progress(true);
  result_.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return std::move(result_);
}

// Earliest of: the next live completion, the next arrival, the next allowed pass when events wait for one.
int64_t Simulator::next_event_time() {
  while (!completions_.empty()) {
    const Completion& c = completions_.top();
    if (run_of(c.id).run_end == c.time) break;
    completions_.pop();  // stale: the job was preempted after this completion was queued
  }
  int64_t t = kNever;
  if (!completions_.empty()) t = completions_.top().time;
  if (next_arrival_ < trace_.size()) t = std::min(t, static_cast<int64_t>(std::llround(trace_[next_arrival_].submit_s)));
  if (dirty_) t = std::min(t, last_pass_ + options_.pass_interval_s);
  if (wake_ < kNever) t = std::min(t, wake_);
  return t;
}

void Simulator::refresh_waiting() {
  if (!min_stale_) return;
  min_waiting_ = vc_.table().min_pending_gpus();
  high_waiting_ = vc_.table().high_pending();
  min_stale_ = false;
}

bool Simulator::pass_can_start_something() {
  if (vc_.table().has_open_arrays()) return true;
  if (scavengers_running_ > 0 && high_waiting()) return true;
  return min_waiting_gpus() <= result_.cluster_gpus - busy_;
}

// Integrates utilization, free and fragmented GPU-seconds and fair-share usage over [last_time_, t).
void Simulator::advance_to(int64_t t) {
  const int64_t dt = t - last_time_;
  if (dt <= 0) return;
  const int64_t free = result_.cluster_gpus - busy_;
  result_.busy_gpu_s += static_cast<double>(busy_) * static_cast<double>(dt);
  result_.free_gpu_s += static_cast<double>(free) * static_cast<double>(dt);
  if (min_waiting_gpus() <= free) result_.fragmented_gpu_s += static_cast<double>(free) * static_cast<double>(dt);
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
    Run& r = run_of(id);
    if (r.run_end != t) continue;
    stop(id, t);
    const bool fails = trace_[r.row].fails;
    vc_.finish(id, fails ? JobState::kFailed : JobState::kCompleted, fails ? 1 : 0, t);
    r.remaining = 0;
    min_stale_ = true;  // its end may let a dependent job wait again
    result_.jobs[static_cast<size_t>(r.result)].end = t;
    ++done_;
    dirty_ = true;
  }
  report_progress(false);
}

void Simulator::arrive_due(int64_t t) {
  while (next_arrival_ < trace_.size() && static_cast<int64_t>(std::llround(trace_[next_arrival_].submit_s)) == t) {
    const JobId id = vc_.submit(spec_of(trace_[next_arrival_]), t);
    row_job_.push_back(id);
    track(id, next_arrival_);
    min_waiting_ = std::min(min_waiting_, trace_[next_arrival_].gpus);
    high_waiting_ = high_waiting_ || trace_[next_arrival_].qos == jobs::Qos::kHigh;
    ++next_arrival_;
    dirty_ = true;
  }
}

void Simulator::pass(int64_t t) {
  const auto outcome = vc_.pass(t, &ledger_.users(), &ledger_.projects());
  for (JobId task : outcome.tasks) track(task, run_of(vc_.table().find(task)->spec.array_job).row);
  last_pass_ = t;
  dirty_ = false;
  min_stale_ = true;
  if (!outcome.ran) return;
  ++result_.passes;
  result_.plan_conflicts += static_cast<int64_t>(outcome.stale);
  wake_ = outcome.plan.wake_at.value_or(kNever);
  for (JobId victim : outcome.requeued) {  // back to pending with the work it has not done yet
    Run& r = run_of(victim);
    JobResult& j = result_.jobs[static_cast<size_t>(r.result)];
    const double done_work = static_cast<double>(t - r.run_start) / j.comm_slowdown;
    stop(victim, t);
    r.remaining = std::max(0.0, r.remaining - done_work);
    ++j.preemptions;
    ++result_.preemptions;
  }
  for (const sched::Placement* p : outcome.started) start(*p, t);
  for (JobId id : outcome.rejected) {
    const Run& r = run_of(id);
    if (r.result < 0) continue;
    result_.jobs[static_cast<size_t>(r.result)].rejected = true;
    ++result_.rejected;
    ++done_;
  }
}

// A start the lifecycle applied: the job runs for its remaining work stretched by the placement's
// communication slowdown.
void Simulator::start(const sched::Placement& p, int64_t t) {
  Run& r = run_of(p.job);
  const int gpus = static_cast<int>(p.gpus.size());
  double placed = p.allreduce_s;
  if (placed <= 0 && gpus > 1)
    placed = topology::estimate_allreduce(cluster_, p.gpus, comm_.params().allreduce_bytes).seconds;
  const double stretch = comm_.stretch(gpus, placed);
  const int64_t run = ceil_seconds(r.remaining * stretch);
  busy_ += gpus;
  scavengers_running_ += trace_[r.row].qos == jobs::Qos::kScavenger;
  r.gpus = gpus;
  account_gpus_[static_cast<size_t>(r.account)] += gpus;
  r.run_start = t;
  r.run_end = t + run;
  completions_.push({t + run, p.job});
  JobResult& j = result_.jobs[static_cast<size_t>(r.result)];
  if (j.first_start < 0) j.first_start = t;
  j.nodes = static_cast<int>(p.nodes.size());
  j.leaves_spanned = p.leaves_spanned;
  j.min_leaves = p.min_leaves;
  j.comm_slowdown = stretch;
}

// The job leaves its GPUs (ended or preempted).
void Simulator::stop(JobId id, int64_t t) {
  Run& r = run_of(id);
  busy_ -= r.gpus;
  scavengers_running_ -= trace_[r.row].qos == jobs::Qos::kScavenger;
  account_gpus_[static_cast<size_t>(r.account)] -= r.gpus;
  result_.jobs[static_cast<size_t>(r.result)].run_s += t - r.run_start;
  r.gpus = 0;
  r.run_end = kNever;
}

void Simulator::report_progress(bool force) {
  if (!progress_) return;
  if (!force && done_ - last_progress_ < 256) return;
  last_progress_ = done_;
  progress_(done_, total_jobs_);
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
