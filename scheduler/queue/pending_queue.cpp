#include "scheduler/queue/pending_queue.hpp"

#include <algorithm>
#include <bit>

namespace railyard::sched {

size_t PendingQueue::BucketKeyHash::operator()(const BucketKey& k) const {
  size_t h = k.shape ? ShapeKeyHash()(*k.shape) : 0x9e3779b97f4a7c15ull;
  auto mix = [&h](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for (char e : k.eligible) mix(static_cast<uint64_t>(e));
  mix(static_cast<uint64_t>(k.need));
  mix(k.high);
  mix(k.party);
  mix(k.regime);
  mix(static_cast<uint64_t>(k.limit_floor));
  return h;
}

PendingQueue::Entry* PendingQueue::find(JobId id) {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

void PendingQueue::clear() {
  entries_.clear();
  buckets_.clear();
  bucket_index_.clear();
  parties_.clear();
  party_index_.clear();
  user_jobs_.clear();
  project_jobs_.clear();
  not_yet_.clear();
  aging_.clear();
  marked_.clear();
  model_.reset();
  cluster_ = nullptr;
  classes_ = nullptr;
  source_ = generation_ = 0;
}

PendingQueue::Regime PendingQueue::regime_of(int64_t submit) const {
  if (model_->rate() == 0) return kNotYet;  // no age term: one regime
  const int64_t waited = now_ - submit;
  if (waited <= 0) return kNotYet;
  return waited >= model_->age_max() ? kAged : kAging;
}

PendingQueue::Key PendingQueue::entry_key(const PendingJob& j, Regime r) const {
  const Key base = model_->base(*j.spec);
  switch (r) {
    case kNotYet: return base;
    case kAging: return base - Key{model_->rate()} * j.submit_time;
    case kAged: return base + model_->age(0, model_->age_max());
  }
  return base;
}

void PendingQueue::place(Entry& e) {
  const Regime r = regime_of(e.job.submit_time);
  BucketKey key;
  auto made = make_request(*e.job.spec, *cluster_, *classes_);
  if (made) {
    key.shape = shape_key(*made);
    key.eligible = std::move(made->eligible);
    key.need = made->shape.total * made->replicas;
  } else {
    key.need = 0;
  }
  if (!key.shape) key.eligible.clear();  // examined every pass: nothing else to tell buckets apart by
  key.high = e.job.spec->qos == jobs::Qos::kHigh;
  const std::string& user = e.job.spec->user;
  const std::string& project = e.job.spec->project;
  auto [party, added] = party_index_.try_emplace(user + '\n' + project, static_cast<uint32_t>(parties_.size()));
  if (added) parties_.emplace_back(user, project);
  key.party = party->second;
  key.regime = r;
  const int64_t limit = e.job.spec->time_limit_s;
  key.limit_floor = limit > 0 ? int64_t{1} << (std::bit_width(static_cast<uint64_t>(limit)) - 1) : kForever;
  auto [it, fresh] = bucket_index_.try_emplace(key, static_cast<uint32_t>(buckets_.size()));
  if (fresh) {
    Bucket b;
    b.shape = key.shape;
    b.eligible = key.eligible;
    b.need = key.need;
    b.high = key.high;
    b.party = key.party;
    b.regime = key.regime;
    b.limit_floor = key.limit_floor;
    buckets_.push_back(std::move(b));
  }
  e.bucket = it->second;
  e.item = {entry_key(e.job, r), e.job.submit_time, e.job.id, &e};
  buckets_[e.bucket].jobs.insert(e.item);
  if (r == kNotYet && model_->rate() != 0) not_yet_.emplace(e.job.submit_time, e.job.id);
  if (r == kAging) aging_.emplace(e.job.submit_time, e.job.id);
}

void PendingQueue::unplace(Entry& e) {
  buckets_[e.bucket].jobs.erase(e.item);
  not_yet_.erase({e.job.submit_time, e.job.id});
  aging_.erase({e.job.submit_time, e.job.id});
}

void PendingQueue::insert(const PendingJob& j) {
  erase(j.id);
  Entry& e = entries_[j.id];
  e.job = j;
  place(e);
  ++user_jobs_[j.spec->user];
  ++project_jobs_[j.spec->project];
  e.marked = true;
  marked_.push_back(j.id);
}

void PendingQueue::erase(JobId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  unplace(e);
  if (--user_jobs_[e.job.spec->user] == 0) user_jobs_.erase(e.job.spec->user);
  if (--project_jobs_[e.job.spec->project] == 0) project_jobs_.erase(e.job.spec->project);
  entries_.erase(it);
}

// The jobs whose age regime the clock moved them out of (now_ is the new time).
void PendingQueue::move_regimes(int64_t now) {
  auto move = [this](std::set<std::pair<int64_t, JobId>>& from, auto due) {
    while (!from.empty() && due(from.begin()->first)) {
      Entry& e = entries_.at(from.begin()->second);
      unplace(e);
      place(e);
    }
  };
  move(not_yet_, [&](int64_t submit) { return submit < now; });
  move(aging_, [&](int64_t submit) { return now - submit >= model_->age_max(); });
}

void PendingQueue::rebuild(const Snapshot& s, const NodeClasses& classes) {
  clear();
  cluster_ = s.cluster;
  classes_ = &classes;
  class_of_ = classes.class_of;
  class_containers_ = classes.class_containers;
  model_.emplace(s.config, s.cluster->gpu_count());
  now_ = s.now;
  for (const PendingJob& j : s.pending) insert(j);
}

void PendingQueue::update(const Snapshot& s, const NodeClasses& classes) {
  const auto& c = s.pending_changes;
  const bool follows = c && model_ && cluster_ == s.cluster && c->source == source_ && c->from == generation_ &&
                       s.now >= now_ && *model_ == PriorityModel(s.config, s.cluster->gpu_count()) &&
                       class_of_ == classes.class_of && class_containers_ == classes.class_containers;
  if (!follows) {
    rebuild(s, classes);
  } else {
    classes_ = &classes;
    now_ = s.now;
    for (JobId id : c->gone) erase(id);
    for (const PendingJob& j : c->current) insert(j);
    move_regimes(s.now);
  }
  source_ = c ? c->source : 0;
  generation_ = c ? c->to : 0;
}

void PendingQueue::after_pass(const std::vector<JobId>& gated) {
  std::sort(marked_.begin(), marked_.end());
  marked_.erase(std::unique(marked_.begin(), marked_.end()), marked_.end());
  std::erase_if(marked_, [this](JobId id) {
    Entry* e = find(id);
    if (!e || !e->marked) return true;
    if (e->seen != pass_) return false;
    e->marked = false;
    return true;
  });
  for (JobId id : gated)
    if (Entry* e = find(id); e && !e->marked) e->marked = true, marked_.push_back(id);
}

}  // namespace railyard::sched
