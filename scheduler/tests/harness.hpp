// A small builder for scheduler tests: owns specs, builds Snapshots, applies plans like a shell would.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>

#include "scheduler/core/cycle.hpp"
#include "topology/generator.hpp"

namespace railyard::sched::testing {

inline jobs::JobSpec spec_gpus(int gpus, int64_t limit = 3600, std::string user = "alice") {
  jobs::JobSpec s;
  s.name = "job";
  s.user = user;
  s.project = user + "-proj";
  s.gpus = gpus;
  s.time_limit_s = limit;
  return s;
}

class Harness {
 public:
  explicit Harness(topology::Cluster cluster) : cluster_(std::make_unique<topology::Cluster>(std::move(cluster))) {
    snap_.cluster = cluster_.get();
  }
  static Harness superpod(const char* preset, int sus) { return Harness(topology::generate_superpod(preset, sus).value()); }
  static Harness fat_tree(int nodes, int leaf_size, const char* profile = "dgx-h100", double oversubscription = 1) {
    return Harness(topology::generate_fat_tree({.nodes = nodes,
                                                .leaf_size = leaf_size,
                                                .spine_size = 16,
                                                .profile = profile,
                                                .leaf_oversubscription = oversubscription})
                       .value());
  }

  const topology::Cluster& cluster() const { return *cluster_; }
  Snapshot& snapshot() { return snap_; }

  JobId submit(jobs::JobSpec spec, int64_t submit_time = 0) {
    specs_.push_back(std::move(spec));
    snap_.pending.push_back({next_id_, &specs_.back(), submit_time, false});
    return next_id_++;
  }
  JobId run(jobs::JobSpec spec, std::vector<GpuId> gpus, int64_t start = 0) {
    specs_.push_back(std::move(spec));
    snap_.running.push_back({next_id_, &specs_.back(), std::move(gpus), {}, start});
    return next_id_++;
  }
  // GPUs [first, first + count) of node n.
  std::vector<GpuId> gpus_of(NodeId n, int first, int count) const {
    std::vector<GpuId> out;
    for (int i = 0; i < count; ++i) out.push_back(cluster_->node(n).first_gpu + first + i);
    return out;
  }
  Plan plan() const { return schedule(snap_); }

  // Applies starts (preempted victims go back to pending) and clears the pending list of started jobs;
  // records when a job began waiting for a compact placement, as a shell does.
  void apply(const Plan& p) {
    for (const auto& info : p.pending) {
      if (info.reason != PendingReason::kCompact) continue;
      for (auto& j : snap_.pending)
        if (j.id == info.job && j.compact_wait_since < 0) j.compact_wait_since = snap_.now;
    }
    for (const auto& st : p.starts) {
      for (JobId v : st.preempts) {
        auto it = std::find_if(snap_.running.begin(), snap_.running.end(), [&](const RunningJob& r) { return r.id == v; });
        snap_.pending.push_back({it->id, it->spec, it->start_time, false});
        snap_.running.erase(it);
      }
      auto it = std::find_if(snap_.pending.begin(), snap_.pending.end(), [&](const PendingJob& j) { return j.id == st.job; });
      snap_.running.push_back({st.job, it->spec, st.gpus, st.slices, snap_.now});
      snap_.pending.erase(it);
    }
  }
  static const Placement* find_start(const Plan& p, JobId id) {
    for (const auto& s : p.starts)
      if (s.job == id) return &s;
    return nullptr;
  }
  static const PendingInfo* find_pending(const Plan& p, JobId id) {
    for (const auto& s : p.pending)
      if (s.job == id) return &s;
    return nullptr;
  }

 private:
  std::unique_ptr<topology::Cluster> cluster_;
  std::deque<jobs::JobSpec> specs_;
  Snapshot snap_;
  JobId next_id_ = 1;
};

// Every decision of two plans the same, in order: starts (GPUs, slices, nodes, victims), reservations,
// pending jobs (reason, message, estimated start), rejections.
inline void expect_same_plan(const Plan& a, const Plan& b, const std::string& where) {
  ASSERT_EQ(a.starts.size(), b.starts.size()) << where;
  for (size_t i = 0; i < a.starts.size(); ++i) {
    const Placement &x = a.starts[i], &y = b.starts[i];
    EXPECT_EQ(x.job, y.job) << where;
    EXPECT_EQ(x.gpus, y.gpus) << where;
    ASSERT_EQ(x.slices.size(), y.slices.size()) << where;
    for (size_t j = 0; j < x.slices.size(); ++j) {
      EXPECT_EQ(x.slices[j].gpu, y.slices[j].gpu) << where;
      EXPECT_EQ(x.slices[j].first_slot, y.slices[j].first_slot) << where;
    }
    EXPECT_EQ(x.nodes, y.nodes) << where;
    EXPECT_EQ(x.preempts, y.preempts) << where;
    EXPECT_EQ(x.leaves_spanned, y.leaves_spanned) << where;
    EXPECT_EQ(x.allreduce_s, y.allreduce_s) << where;
  }
  ASSERT_EQ(a.reservations.size(), b.reservations.size()) << where;
  for (size_t i = 0; i < a.reservations.size(); ++i) {
    EXPECT_EQ(a.reservations[i].job, b.reservations[i].job) << where;
    EXPECT_EQ(a.reservations[i].start_time, b.reservations[i].start_time) << where;
    EXPECT_EQ(a.reservations[i].gpus, b.reservations[i].gpus) << where;
  }
  ASSERT_EQ(a.pending.size(), b.pending.size()) << where;
  for (size_t i = 0; i < a.pending.size(); ++i) {
    EXPECT_EQ(a.pending[i].job, b.pending[i].job) << where;
    EXPECT_EQ(a.pending[i].reason, b.pending[i].reason) << where;
    EXPECT_EQ(a.pending[i].message, b.pending[i].message) << where;
    EXPECT_EQ(a.pending[i].estimated_start, b.pending[i].estimated_start) << where;
  }
  ASSERT_EQ(a.rejected.size(), b.rejected.size()) << where;
  for (size_t i = 0; i < a.rejected.size(); ++i) EXPECT_EQ(a.rejected[i].job, b.rejected[i].job) << where;
}

}  // namespace railyard::sched::testing
