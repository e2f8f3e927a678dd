#include "scheduler/daemon/service.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "jobs/validate.hpp"
#include "scheduler/api/auth.hpp"
#include "scheduler/core/cycle.hpp"

namespace railyard::daemon {
namespace {

// Work posted on the loop: an exception is a bug, logged, and must not end the daemon.
std::function<void()> guarded(const char* what, std::function<void()> fn) {
  return [what, fn = std::move(fn)] {
    try {
      fn();
    } catch (const std::exception& e) {
      spdlog::error("{}: internal error: {}", what, e.what());
    }
  };
}

}  // namespace

Service::Service(const topology::Cluster& cluster, std::unique_ptr<store::StateStore> store, Loop loop,
                 Clock clock)
    : table_(cluster), store_(std::move(store)), loop_(std::move(loop)), clock_(std::move(clock)) {}

Status Service::open() {
  auto state = store_->load();
  if (!state) return state.error();
  table_.load(std::move(*state));
  next_id_ = table_.next_id();
  spdlog::info("loaded {} jobs ({} not finished)", table_.jobs().size(), table_.active_count());
  request_pass();
  return ok();
}

Result<std::optional<Caller>> Service::authenticate(const std::string& token) {
  const std::string hash = api::sha256_hex(token);
  if (auto it = token_cache_.find(hash); it != token_cache_.end()) return std::optional<Caller>(it->second);
  // Not cached: tokens created by `token create` while the daemon runs are found in the store.
  auto rec = store_->find_token(hash);
  if (!rec) return rec.error();
  if (!*rec) return std::optional<Caller>();
  Caller c{(*rec)->user, (*rec)->role};
  token_cache_.emplace(hash, c);
  return std::optional<Caller>(c);
}

Status Service::prepare(jobs::JobSpec& spec, const Caller& who) const {
  if (spec.user.empty()) spec.user = who.user;
  if (spec.user != who.user && !who.admin())
    return Error{ErrorCode::kPermission, "user " + who.user + " may not submit jobs as " + spec.user};
  if (spec.project.empty()) spec.project = spec.user;
  return jobs::validate_against_cluster(spec, table_.cluster());
}

void Service::submit(std::vector<jobs::JobSpec> specs, const Caller& who, SubmitDone done) {
  QueuedSubmit q{{}, who.user, std::move(done)};
  const int64_t now = clock_();
  for (auto& spec : specs) {
    JobRecord r;
    r.id = next_id_++;
    r.spec = std::move(spec);
    r.submit_time = now;
    q.jobs.push_back(std::move(r));
  }
  queue_.push_back(std::move(q));
  if (!flush_posted_) {
    flush_posted_ = true;
    loop_.post(guarded("submit flush", [this] { flush_submits(); }));
  }
}

void Service::flush_submits() {
  flush_posted_ = false;
  std::vector<QueuedSubmit> queue = std::move(queue_);
  queue_.clear();
  WriteBatch b;
  for (auto& q : queue)
    for (auto& r : q.jobs) {
      b.events.push_back({job_subject(r.id), r.submit_time, q.actor, "submitted"});
      b.inserts.push_back(std::move(r));
    }
  const Status s = store_->commit(b);
  if (s) {
    applied(b);
    stats_.submits_total += static_cast<int64_t>(b.inserts.size());
    ++stats_.submit_commits_total;
  } else {
    spdlog::error("submit commit failed: {}", s.error().message);
  }
  size_t i = 0;
  for (auto& q : queue) {
    std::vector<JobId> ids;
    for (size_t k = 0; k < q.jobs.size(); ++k) ids.push_back(b.inserts[i++].id);
    if (s) {
      q.done(std::move(ids));
    } else {
      q.done(s.error());
    }
  }
  if (s) request_pass();
}

Result<JobRecord> Service::act(JobId id, jobs::JobEvent event, const Caller& who) {
  const JobRecord* cur = table_.find(id);
  if (!cur) return not_found("job " + std::to_string(id) + " not found");
  if (cur->spec.user != who.user && !who.admin())
    return Error{ErrorCode::kPermission, "job " + std::to_string(id) + " belongs to " + cur->spec.user};
  auto batch = table_.event_changes(id, event, who.user, clock_());
  if (!batch) return batch.error();
  if (auto s = store_->commit(*batch); !s) return s.error();
  applied(*batch);
  spdlog::info("job {} {} by {}", id, jobs::to_string(event), who.user);
  request_pass();
  return *table_.find(id);
}

Status Service::set_node_health(const std::string& name, sched::NodeHealth health, std::string reason,
                                const Caller& who) {
  if (!who.admin()) return Error{ErrorCode::kPermission, "node changes need the admin role"};
  if (table_.cluster().find_node(name) < 0) return not_found("node " + name + " not found");
  WriteBatch b;
  const std::string what = std::string(sched::to_string(health)) + (reason.empty() ? "" : ": " + reason);
  b.nodes.push_back({name, health, std::move(reason)});
  b.events.push_back({"node:" + name, clock_(), who.user, what});
  if (auto s = store_->commit(b); !s) return s;
  applied(b);
  spdlog::info("node {} {} by {}", name, what, who.user);
  request_pass();
  return ok();
}

void Service::applied(const WriteBatch& batch) {
  table_.apply(batch);
  for (const auto& o : observers_) o(batch);
}

Status Service::commit(const WriteBatch& batch) {
  if (batch.empty()) return ok();
  if (auto s = store_->commit(batch); !s) return s;
  applied(batch);
  if (!batch.updates.empty() || !batch.nodes.empty()) request_pass();
  return ok();
}

void Service::request_pass() {
  if (pass_posted_) return;
  pass_posted_ = true;
  const auto now = std::chrono::steady_clock::now();
  const auto earliest =
      last_pass_end_ + std::max<std::chrono::steady_clock::duration>(kMinPassInterval, last_pass_duration_);
  auto pass = guarded("scheduling pass", [this] { run_pass(); });
  if (now >= earliest) return loop_.post(std::move(pass));
  loop_.post_after(std::chrono::ceil<std::chrono::milliseconds>(earliest - now), std::move(pass));
}

void Service::run_pass() {
  using Clock = std::chrono::steady_clock;
  pass_posted_ = false;
  const auto t0 = Clock::now();
  const int64_t now = clock_();
  const sched::Snapshot snap = table_.snapshot(now);
  if (snap.pending.empty()) return;
  const sched::Plan plan = sched::schedule(snap);
  const auto t1 = Clock::now();
  WriteBatch b = table_.plan_changes(plan, now);
  if (auto s = store_->commit(b); !s) {
    spdlog::error("scheduling pass: commit failed: {}", s.error().message);
    return;
  }
  applied(b);
  last_pass_end_ = Clock::now();
  last_pass_duration_ = last_pass_end_ - t0;
  const double secs = std::chrono::duration<double>(last_pass_duration_).count();
  ++stats_.passes_total;
  stats_.last_pass_seconds = secs;
  stats_.pass_seconds_sum += secs;
  if (!plan.starts.empty() || !plan.rejected.empty() || secs > 0.5)
    spdlog::info("pass: {} pending, {} started, {} rejected, {} updates, {:.3f} s ({:.3f} s in schedule())",
                 snap.pending.size(), plan.starts.size(), plan.rejected.size(), b.updates.size(), secs,
                 std::chrono::duration<double>(t1 - t0).count());
}

}  // namespace railyard::daemon
