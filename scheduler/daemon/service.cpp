#include "scheduler/daemon/service.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <utility>

#include "jobs/validate.hpp"

namespace railyard::daemon {
namespace {

// The verb of a job action, for messages ("only its owner or an admin may cancel it").
std::string_view verb(jobs::JobEvent event) {
  switch (event) {
    case jobs::JobEvent::kCancelled:
      return "cancel";
    case jobs::JobEvent::kHeld:
      return "hold";
    case jobs::JobEvent::kReleased:
      return "release";
    default:
      return "change";
  }
}

// An admin's hold is released only by an admin: a user may release the holds they placed (or that
// were placed before holders were recorded), not one an admin put on their job.
Status may_release(const JobRecord& job, jobs::JobEvent event, const Caller& who) {
  if (event != jobs::JobEvent::kReleased || !job.held_by_admin || who.admin()) return ok();
  return Error{ErrorCode::kPermission, "job " + std::to_string(job.id) + " was held by " + job.held_by +
                                           ", an admin: only an admin may release it"};
}

// Every job the changes leave HELD records who held it; every other one forgets its holder.
void record_holder(lifecycle::Changes& changes, const Caller& who) {
  for (auto& r : changes.updates) {
    const bool held = r.state == jobs::JobState::kHeld;
    r.held_by = held ? who.user : "";
    r.held_by_admin = held && who.admin();
  }
}

}  // namespace

Service::Service(const topology::Cluster& cluster, std::unique_ptr<store::StateStore> store, Loop loop,
                 Clock clock)
    : table_(cluster),
      loop_(std::move(loop)),
      clock_(std::move(clock)),
      pipeline_(std::move(store), loop_, [this] { return now_ms(); }),
      tokens_(pipeline_, clock_, [this](WriteBatch& b) { return write(b); }),
      nodes_(table_, clock_,
             {[this](WriteBatch& b) { return change(b); },
              [this](store::AuditRecord row) { record_audit(std::move(row)); },
              [this](const std::string& node) { return pipeline_.store().find_node_key(node); }}),
      intake_(table_, pipeline_, loop_, clock_, next_id_,
              {[this](const WriteBatch& b) {
                 applied(b);
                 request_pass();
               },
               [this](store::AuditRecord row) { record_audit(std::move(row)); }}),
      passes_(table_, loop_, clock_, [this] { return now_ms(); }, next_id_,
              {[this](WriteBatch& b) { return write(b); }, [this](const WriteBatch& b) { applied(b); },
               [this](const WriteBatch& b) {
                 for (const auto& o : observers_) o(b);
               }}) {}

Service::~Service() = default;

void Service::commit_submits_on_thread(std::unique_ptr<store::StateStore> store, size_t min_jobs) {
  pipeline_.commit_elsewhere_on_thread(std::move(store));
  intake_.set_min_jobs_elsewhere(min_jobs);
}

void Service::set_submit_committer(std::unique_ptr<store::StateStore> store, Executor executor,
                                   size_t min_jobs) {
  pipeline_.set_elsewhere_committer(std::move(store), std::move(executor));
  intake_.set_min_jobs_elsewhere(min_jobs);
}

ServiceStats Service::stats() const {
  ServiceStats s;
  static_cast<PassStats&>(s) = passes_.stats();
  s.submits_total = intake_.submits();
  s.submit_commits_total = intake_.commits();
  s.log_syncs_total = pipeline_.log_syncs();
  s.deferred_batches_total = pipeline_.deferred_batches();
  s.submits_synced = intake_.durability() == store::Durability::kSynced;
  return s;
}

Status Service::open() {
  auto state = pipeline_.connection().load();
  if (!state) return state.error();
  return open(std::move(*state));
}

Status Service::open(store::StoredState state) {
  intake_.load(state.idempotency);
  table_.load(std::move(state));
  next_id_ = table_.next_id();
  spdlog::info("loaded {} jobs ({} not finished)", table_.jobs().size(), table_.active_count());
  request_pass();
  return ok();
}

Result<JobRecord> Service::act(JobId id, jobs::JobEvent event, const Caller& who,
                               const store::AuditRecord* audit) {
  const JobRecord* cur = table_.find(id);
  if (!cur) return not_found("job " + std::to_string(id) + " not found");
  if (cur->spec.user != who.user && !who.admin())
    return Error{ErrorCode::kPermission, "job " + std::to_string(id) + " belongs to " + cur->spec.user +
                                             "; only its owner or an admin may " + std::string(verb(event)) +
                                             " it"};
  if (auto s = may_release(*cur, event, who); !s) return s.error();
  auto changes = table_.event_changes(id, event, who.user, clock_());
  if (!changes) return changes.error();
  record_holder(*changes, who);
  WriteBatch batch(std::move(*changes));
  if (audit) batch.audit.push_back(*audit);
  if (auto s = change(batch); !s) return s.error();
  spdlog::info("job {} {} by {}", id, jobs::to_string(event), who.user);
  return *table_.find(id);
}

Status Service::set_quota(lifecycle::QuotaRecord quota, const Caller& who, const store::AuditRecord* audit) {
  const std::string kind(lifecycle::to_string(quota.kind));
  if (auto s = need_admin(who, "setting a quota"); !s) return s;
  if (quota.name.empty() || quota.name.size() > jobs::kMaxNameLength ||
      std::any_of(quota.name.begin(), quota.name.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    return invalid(kind + " name: 1 to " + std::to_string(jobs::kMaxNameLength) +
                   " bytes without control characters");
  if (quota.gpus && (*quota.gpus < 0 || *quota.gpus > kMaxQuotaGpus))
    return invalid("gpus: " + std::to_string(*quota.gpus) + " is out of range (0 to " +
                   std::to_string(kMaxQuotaGpus) + ")");
  if (!(quota.shares > 0 && quota.shares <= kMaxShares))  // NaN fails too
    return invalid("shares: must be a number above 0, at most 1000000");
  quota.lifted |= !quota.gpus && quota.shares == 1;  // nothing left to keep
  if (quota.lifted && !table_.quota(quota.kind, quota.name))
    return not_found(kind + " " + quota.name + " has no quota");
  WriteBatch b;
  std::string what = "quota lifted";
  if (!quota.lifted) {
    char shares[32];
    std::snprintf(shares, sizeof shares, "%g", quota.shares);
    what = "quota " + (quota.gpus ? std::to_string(*quota.gpus) + " GPUs" : std::string("unbounded")) + ", " +
           shares + (quota.shares == 1 ? " share" : " shares");
  }
  b.events.push_back({"quota:" + kind + ":" + quota.name, clock_(), who.user, what});
  b.quotas.push_back(std::move(quota));
  if (audit) b.audit.push_back(*audit);
  if (auto s = change(b); !s) return s;
  spdlog::info("{} {}: {} by {}", kind, b.quotas.back().name, what, who.user);
  return ok();
}

void Service::record_audit(store::AuditRecord row) {
  WriteBatch b;
  b.durability = store::Durability::kDeferred;
  b.audit.push_back(std::move(row));
  if (auto s = commit(std::move(b)); !s) spdlog::error("audit row not written: {}", s.error().message);
}

void Service::prepare_write(WriteBatch& batch) {
  auto runs = table_.run_changes(batch, clock_());
  batch.runs.insert(batch.runs.end(), std::make_move_iterator(runs.begin()),
                    std::make_move_iterator(runs.end()));
  for (const auto& hook : pre_commit_) hook(batch);
  pipeline_.stamp_events(batch);
}

Status Service::write(WriteBatch& batch) {
  prepare_write(batch);
  if (batch.empty()) return ok();
  return pipeline_.commit(batch);
}

void Service::applied(const WriteBatch& batch) {
  table_.apply(batch);
  for (const auto& o : observers_) o(batch);
}

Status Service::change(WriteBatch& batch) {
  if (auto s = write(batch); !s) return s;
  applied(batch);
  request_pass();
  return ok();
}

Status Service::commit(WriteBatch batch) {
  if (batch.empty()) return ok();
  if (batch.durability == store::Durability::kDeferred) {
    prepare_write(batch);
    pipeline_.defer(batch);
  } else if (auto s = write(batch); !s) {
    return s;
  }
  applied(batch);
  if (!batch.updates.empty() || !batch.nodes.empty()) request_pass();
  return ok();
}

}  // namespace railyard::daemon
