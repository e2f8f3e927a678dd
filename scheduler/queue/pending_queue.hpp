// The waiting jobs of a cluster scheduled pass after pass, kept in priority order across passes, so that a
// pass costs what changed instead of the whole queue (sched::Scheduler owns one; the pass walks it, see
// core/cycle.hpp).
//
// Jobs are grouped into buckets of one request shape (ShapeKey, with the GPUs it needs and its eligible
// node classes), one party (user and project), one QoS class (high or not), one age regime and one class of
// time limit (powers of two). Within a bucket jobs are ordered by a key fixed while they wait
// (PriorityModel: base, less the age rate times the submit time while they age), which orders them as P
// does, for all of a bucket's jobs get the same fair-share and age offsets; the queue's order is the merge
// of the buckets' heads by P, exactly the order priority_order() gives. A pass can then skip a bucket
// whole when no job of it can start (not enough free GPUs for its shape, or its shape failed this pass for
// a window no longer than its shortest), in O(1), and leave its jobs' reasons as the last pass found them.
//
// Changes come from Snapshot::pending_changes; a snapshot without them, or one that does not follow the last
// one seen, rebuilds the queue from Snapshot::pending (O(n log n)). Jobs added or changed since the last pass
// (and jobs whose last pass found them held or waiting for a dependency: that verdict can change without a
// change to their resources) are `marked`: the next pass examines them wherever they are.
//
// Not thread-safe; one owner.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/model/snapshot.hpp"
#include "scheduler/model/usage.hpp"
#include "scheduler/placement/request.hpp"
#include "scheduler/queue/priority.hpp"

namespace railyard::sched {

class PendingQueue {
 public:
  // Age regimes: the age term is 0 (not submitted yet at the pass's time), grows with the wait, or is at
  // its maximum. Each orders its jobs by a key of its own (entry_key()).
  enum Regime : uint8_t { kNotYet = 0, kAging = 1, kAged = 2 };

  // A bucket's order: P less the offset all of the bucket's jobs share in a pass (offset()). Wider than
  // Priority: it holds the age rate times a submit time.
  __extension__ using Key = __int128;  // a GCC and Clang extension, marked as one for -Wpedantic
  struct Entry;
  struct Item {
    Key key;
    int64_t submit;
    JobId id;
    Entry* entry;
    bool operator<(const Item& o) const {
      if (key != o.key) return key > o.key;
      if (submit != o.submit) return submit < o.submit;
      return id < o.id;
    }
  };
  struct Bucket {
    std::optional<ShapeKey> shape;  // nullopt: no shortcut (MIG, or a request that cannot be made)
    std::vector<char> eligible;     // per node class
    int need = 0;                   // GPUs: the shape's total times the replicas
    bool high = false;              // QoS high (may preempt)
    uint32_t party = 0;
    Regime regime = kNotYet;
    int64_t limit_floor = kForever;  // the shortest time limit its jobs may have (kForever: none has one)
    std::set<Item> jobs;
  };
  struct Entry {
    PendingJob job;
    uint32_t bucket = 0;
    Item item{};
    bool marked = false;  // examined by the next pass whatever the bucket (see the header comment)
    uint64_t seen = 0;    // the pass that examined it last
    uint64_t listed = 0;  // the pass that listed it among the marked
    // The deadline of the compact wait without a reservation that the last pass to examine the job gave it
    // (its estimated start); -1: that pass told it something else. A pass passes such a job over while the
    // same verdict is certain (cycle.cpp, Pass::still_parked).
    int64_t compact_parked = -1;
  };

  // Brings the queue to `s` (see the header comment). `classes` are the pass's; a change of them, of the
  // cluster, or of the priority weights rebuilds.
  void update(const Snapshot& s, const NodeClasses& classes);
  void clear();

  // What a pass reads.
  const PriorityModel& model() const { return *model_; }
  // What every job of `b` adds to its key for P at `now`, given its party's fair-share term.
  Key offset(const Bucket& b, Priority fair, int64_t now) const {
    return Key{fair} + (b.regime == kAging ? Key{model_->rate()} * now : Key{0});
  }
  std::vector<Bucket>& buckets() { return buckets_; }
  const std::vector<std::pair<std::string, std::string>>& parties() const { return parties_; }
  // Jobs per user and per project, for fair_shares().
  const std::unordered_map<std::string, int64_t>& user_jobs() const { return user_jobs_; }
  const std::unordered_map<std::string, int64_t>& project_jobs() const { return project_jobs_; }
  // The marked jobs (may list one twice, or one no longer marked or waiting: check Entry::marked).
  const std::vector<JobId>& marked() const { return marked_; }
  Entry* find(JobId id);
  size_t size() const { return entries_.size(); }
  // After a pass: the jobs it examined lose their mark, but `gated` ones (found held or waiting on a
  // dependency) keep it.
  void after_pass(const std::vector<JobId>& gated);
  // A new pass number, for Entry::seen.
  uint64_t next_pass() { return ++pass_; }

 private:
  Key entry_key(const PendingJob& j, Regime r) const;
  Regime regime_of(int64_t submit) const;
  void insert(const PendingJob& j);
  void erase(JobId id);
  void place(Entry& e);       // into its bucket, by its regime now
  void unplace(Entry& e);
  void move_regimes(int64_t now);
  void rebuild(const Snapshot& s, const NodeClasses& classes);

  struct BucketKey {
    std::optional<ShapeKey> shape;
    std::vector<char> eligible;
    int need;
    bool high;
    uint32_t party;
    Regime regime;
    int64_t limit_floor;
    bool operator==(const BucketKey&) const = default;
  };
  struct BucketKeyHash {
    size_t operator()(const BucketKey& k) const;
  };

  const topology::Cluster* cluster_ = nullptr;
  const NodeClasses* classes_ = nullptr;
  std::vector<int> class_of_;  // the classes this queue's requests were made over (a change rebuilds)
  std::vector<char> class_containers_;
  std::optional<PriorityModel> model_;
  uint64_t source_ = 0, generation_ = 0;
  int64_t now_ = 0;
  uint64_t pass_ = 0;
  std::unordered_map<JobId, Entry> entries_;
  std::vector<Bucket> buckets_;
  std::unordered_map<BucketKey, uint32_t, BucketKeyHash> bucket_index_;
  std::vector<std::pair<std::string, std::string>> parties_;
  std::unordered_map<std::string, uint32_t> party_index_;  // "user\nproject"
  std::unordered_map<std::string, int64_t> user_jobs_, project_jobs_;
  // Jobs by submit time whose regime changes as the clock moves: not yet submitted, and aging.
  std::set<std::pair<int64_t, JobId>> not_yet_, aging_;
  std::vector<JobId> marked_;
};

}  // namespace railyard::sched
