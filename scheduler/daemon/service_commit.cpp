// The commit pipeline (Service): writes on the loop, durability (synchronous, or a delayed sync on the sync
// thread), what waits for durability, and the events and changes a commit applies.
#include <spdlog/spdlog.h>

#include <utility>

#include "scheduler/daemon/guarded.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::daemon {

void Service::prepare_write(WriteBatch& batch) {
  auto runs = table_.run_changes(batch, clock_());
  batch.runs.insert(batch.runs.end(), std::make_move_iterator(runs.begin()),
                    std::make_move_iterator(runs.end()));
  for (const auto& hook : pre_commit_) hook(batch);
  stamp_events(batch);
}

Status Service::write(WriteBatch& batch) {
  prepare_write(batch);
  if (batch.empty()) return ok();
  if (auto s = store_commit(batch); !s) return s;
  committed(batch.durability);
  return ok();
}

Status Service::store_commit(const WriteBatch& batch) {
  if (deferred_.empty()) return store_->commit(batch);
  std::vector<const WriteBatch*> all;
  all.reserve(deferred_.size() + 1);
  for (const auto& d : deferred_) all.push_back(&d);
  all.push_back(&batch);
  if (auto s = store_->commit_all(all); !s) return s;  // kept for the next commit
  stats_.deferred_batches_total += static_cast<int64_t>(deferred_.size());
  deferred_.clear();
  return ok();
}

Status Service::write_deferred() {
  if (deferred_.empty()) return ok();
  WriteBatch none;
  none.durability = store::Durability::kWritten;
  return store_commit(none);
}

void Service::committed(store::Durability durability) {
  if (durability == store::Durability::kSynced) return now_durable();
  unsynced_ = true;
  if (!sync_posted_) post_sync();
}

void Service::post_sync() {
  sync_posted_ = true;
  std::weak_ptr<char> alive = alive_;
  loop_.post_after(kLazySyncDelay, guarded("log sync", [this, alive, seen = syncs_] {
                     if (!alive.expired()) sync_log(seen);
                   }));
}

void Service::sync_log(uint64_t syncs_then) {
  sync_posted_ = false;
  if (!unsynced_) return;  // a synced commit did it meanwhile
  // A synced commit since this sync was posted made everything before it durable; what is unsynced now came
  // after it, less than kLazySyncDelay ago: wait that long again (in a stream of submits, the next submit's
  // commit syncs it, and this sync never runs).
  if (syncs_then != syncs_) return post_sync();
  if (sync_in_flight_) return post_sync();  // one at a time: what came since waits for the next
  if (auto s = write_deferred(); !s) {
    spdlog::error("writing agent reports: {}", s.error().message);
    return committed(store::Durability::kWritten);  // try again later; the waiters keep waiting
  }
  auto elsewhere = sync_executor_ ? store_->sync_elsewhere() : nullptr;
  if (!elsewhere) {
    if (auto s = store_->sync(); !s) {
      spdlog::error("syncing the state database: {}", s.error().message);
      return committed(store::Durability::kWritten);  // try again later; the waiters keep waiting
    }
    ++stats_.log_syncs_total;
    return now_durable();
  }
  // Off the loop: the fsync covers everything written so far; commits made while it runs wait for the next.
  sync_in_flight_ = true;
  unsynced_ = false;
  in_flight_waiters_ = std::exchange(durable_waiters_, {});
  std::weak_ptr<char> alive = alive_;
  sync_executor_([this, elsewhere = std::move(elsewhere), post = loop_.post, alive] {
    Status s = elsewhere();
    post(guarded("log sync", [this, s = std::move(s), alive] {
      if (!alive.expired()) log_synced(s);
    }));
  });
}

void Service::log_synced(const Status& status) {
  sync_in_flight_ = false;
  auto waiters = std::exchange(in_flight_waiters_, {});
  if (!status) {
    spdlog::error("syncing the state database: {}", status.error().message);
    durable_waiters_.insert(durable_waiters_.begin(), std::make_move_iterator(waiters.begin()),
                            std::make_move_iterator(waiters.end()));
    return committed(store::Durability::kWritten);  // try again later; the waiters keep waiting
  }
  ++stats_.log_syncs_total;
  for (auto& fn : waiters) fn();
}

void Service::now_durable() {
  ++syncs_;
  unsynced_ = false;
  // A synced commit's fsync covers a sync still in flight too: its waiters need not wait for it.
  auto first = std::exchange(in_flight_waiters_, {});
  auto waiters = std::exchange(durable_waiters_, {});
  for (auto& fn : first) fn();
  for (auto& fn : waiters) fn();
}

void Service::when_durable(std::function<void()> fn) {
  if (unsynced_) return durable_waiters_.push_back(std::move(fn));
  if (sync_in_flight_) return in_flight_waiters_.push_back(std::move(fn));  // all it needs was before
  fn();
}

void Service::stamp_events(WriteBatch& batch) const {
  if (batch.events.empty()) return;
  const int64_t ms = now_ms();
  for (auto& e : batch.events)
    if (e.time_ms == 0) e.time_ms = ms / 1000 == e.time ? ms : e.time * 1000;
}

void Service::applied(const WriteBatch& batch) {
  table_.apply(batch);
  for (const auto& o : observers_) o(batch);
}

Status Service::commit(WriteBatch batch) {
  if (batch.empty()) return ok();
  if (batch.durability == store::Durability::kDeferred) {
    prepare_write(batch);
    deferred_.push_back(batch);
    committed(store::Durability::kWritten);  // unsynced: the delayed sync writes it, then syncs
  } else if (auto s = write(batch); !s) {
    return s;
  }
  applied(batch);
  if (!batch.updates.empty() || !batch.nodes.empty()) request_pass();
  return ok();
}


}  // namespace railyard::daemon
