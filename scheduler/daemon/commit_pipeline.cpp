#include "scheduler/daemon/commit_pipeline.hpp"

#include <spdlog/spdlog.h>

#include <utility>

namespace railyard::daemon {

CommitPipeline::CommitPipeline(std::unique_ptr<store::StateStore> store, Loop loop,
                               std::function<int64_t()> now_ms)
    : store_(std::move(store)), loop_(std::move(loop)), now_ms_(std::move(now_ms)) {}

CommitPipeline::~CommitPipeline() {
  alive_.reset();  // a commit or sync finishing now posts work that will do nothing
  elsewhere_thread_.reset();
  sync_thread_.reset();
  if (auto s = write_deferred(); !s) spdlog::error("writing the last agent reports: {}", s.error().message);
  // After the last commit, which may hand it a checkpoint (dropped: the store's close checkpoints).
  checkpoint_thread_.reset();
}

store::StateStore& CommitPipeline::store() {
  if (auto s = write_deferred(); !s) spdlog::error("writing agent reports: {}", s.error().message);
  return *store_;
}

void CommitPipeline::commit_elsewhere_on_thread(std::unique_ptr<store::StateStore> second) {
  elsewhere_thread_ = std::make_unique<WorkerThread>();
  set_elsewhere_committer(std::move(second), elsewhere_thread_->executor());
}

void CommitPipeline::set_elsewhere_committer(std::unique_ptr<store::StateStore> second, Executor executor) {
  second_ = std::move(second);
  elsewhere_executor_ = std::move(executor);
}

void CommitPipeline::sync_on_thread() {
  sync_thread_ = std::make_unique<WorkerThread>();
  sync_executor_ = sync_thread_->executor();
}

void CommitPipeline::checkpoint_on_thread() {
  checkpoint_thread_ = std::make_unique<WorkerThread>();
  const Executor run = checkpoint_thread_->executor();
  const auto failed = [](const Error& e) { spdlog::error("{}", e.message); };
  store_->checkpoint_on(run, failed);
  if (second_) second_->checkpoint_on(run, failed);
}

void CommitPipeline::stamp_events(WriteBatch& batch) const {
  if (batch.events.empty()) return;
  const int64_t ms = now_ms_();
  for (auto& e : batch.events)
    if (e.time_ms == 0) e.time_ms = ms / 1000 == e.time ? ms : e.time * 1000;
}

Status CommitPipeline::commit(const WriteBatch& batch) {
  if (auto s = write(batch); !s) return s;
  committed(batch.durability);
  return ok();
}

Status CommitPipeline::write(const WriteBatch& batch) {
  if (deferred_.empty()) return store_->commit(batch);
  std::vector<const WriteBatch*> all;
  all.reserve(deferred_.size() + 1);
  for (const auto& d : deferred_) all.push_back(&d);
  all.push_back(&batch);
  if (auto s = store_->commit_all(all); !s) return s;  // kept for the next commit
  deferred_batches_ += static_cast<int64_t>(deferred_.size());
  deferred_.clear();
  return ok();
}

void CommitPipeline::defer(WriteBatch batch) {
  deferred_.push_back(std::move(batch));
  committed(store::Durability::kWritten);  // unsynced: the delayed sync writes it, then syncs
}

Status CommitPipeline::write_deferred() {
  if (deferred_.empty()) return ok();
  WriteBatch none;
  none.durability = store::Durability::kWritten;
  return write(none);  // what is unsynced stays so: the caller syncs, or the delayed sync is posted
}

void CommitPipeline::commit_elsewhere(const WriteBatch& batch, std::function<void(Status)> done) {
  std::weak_ptr<char> alive = alive_;
  elsewhere_executor_([this, &batch, done = std::move(done), alive]() mutable {
    Status s = second_->commit(batch);
    loop_.post(guarded("submit commit", [this, &batch, s = std::move(s), done = std::move(done), alive] {
      if (alive.expired()) return;
      if (s && batch.durability == store::Durability::kWritten) committed(store::Durability::kWritten);
      done(s);
    }));
  });
}

void CommitPipeline::committed(store::Durability durability) {
  if (durability == store::Durability::kSynced) return now_durable();
  unsynced_ = true;
  if (!sync_posted_) post_sync();
}

void CommitPipeline::post_sync() {
  sync_posted_ = true;
  std::weak_ptr<char> alive = alive_;
  loop_.post_after(kLazySyncDelay, guarded("log sync", [this, alive, seen = syncs_] {
                     if (!alive.expired()) sync_log(seen);
                   }));
}

void CommitPipeline::sync_log(uint64_t syncs_then) {
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
    ++log_syncs_;
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

void CommitPipeline::log_synced(const Status& status) {
  sync_in_flight_ = false;
  auto waiters = std::exchange(in_flight_waiters_, {});
  if (!status) {
    spdlog::error("syncing the state database: {}", status.error().message);
    durable_waiters_.insert(durable_waiters_.begin(), std::make_move_iterator(waiters.begin()),
                            std::make_move_iterator(waiters.end()));
    return committed(store::Durability::kWritten);  // try again later; the waiters keep waiting
  }
  ++log_syncs_;
  for (auto& fn : waiters) fn();
}

void CommitPipeline::now_durable() {
  ++syncs_;
  unsynced_ = false;
  // A synced commit's fsync covers a sync still in flight too: its waiters need not wait for it.
  auto first = std::exchange(in_flight_waiters_, {});
  auto waiters = std::exchange(durable_waiters_, {});
  for (auto& fn : first) fn();
  for (auto& fn : waiters) fn();
}

void CommitPipeline::when_durable(std::function<void()> fn) {
  if (unsynced_) return durable_waiters_.push_back(std::move(fn));
  if (sync_in_flight_) return in_flight_waiters_.push_back(std::move(fn));  // all it needs was before
  fn();
}

}  // namespace railyard::daemon
