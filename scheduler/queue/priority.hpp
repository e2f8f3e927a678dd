// Multifactor priority, in the manner of Slurm's priority/multifactor plugin:
//
//   P = w_qos * Q + w_age * A + w_fairshare * F + w_size * S + spec.priority
//   Q = 1 (high), 0.5 (normal), 0 (scavenger)
//   A = min(1, wait / age_max)
//   F = (2^(-U_user / S_user) + 2^(-U_project / S_project)) / 2     (Slurm's classic fair-share factor)
//       U = the user's (project's) share of all decayed usage; S = its shares (1 unless an admin set them)
//       over those of every user (project) seen: with usage or with a pending job
//   S = min(1, gpus / cluster GPUs)                                 (favours big jobs; w_size is 0 by default)
// Ties go to the earlier submit, then the lower job id, so the order is total and deterministic.
//
// P is fixed point (Priority, in units of 1e-9 of a point), each term rounded on its own and the age term a
// whole number of units per second of wait: sums are exact, so P of a waiting job splits into a part fixed
// when it is submitted (PriorityModel::base, less the age rate times its submit time) and parts shared by
// all jobs of one party (age rate times now, the fair-share term): the order of one party's jobs does not
// change from pass to pass, and a queue kept across passes (queue/pending_queue.hpp) orders jobs exactly as
// sorting every P afresh does.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "scheduler/model/snapshot.hpp"

namespace railyard::sched {

using Priority = int64_t;
inline constexpr double kPriorityUnit = 1e9;  // Priority units per point
inline double priority_points(Priority p) { return static_cast<double>(p) / kPriorityUnit; }

// The terms of P for one policy and cluster.
class PriorityModel {
 public:
  PriorityModel(const PolicyConfig& config, int cluster_gpus);
  // QoS, size and the job's own priority: what does not change while it waits.
  Priority base(const jobs::JobSpec& spec) const;
  // The age term after waiting from `submit` to `now`: rate() per second, from 0 (not yet submitted) to
  // age_max_s (the most it gets).
  Priority age(int64_t submit, int64_t now) const {
    return age_max_ > 0 ? rate_ * std::clamp<int64_t>(now - submit, 0, age_max_) : 0;
  }
  Priority rate() const { return rate_; }
  int64_t age_max() const { return age_max_; }
  // The fair-share term for a job of a user and a project with these factors.
  Priority fair(double user_factor, double project_factor) const;
  bool operator==(const PriorityModel&) const = default;

 private:
  double weight_qos_ = 0, weight_size_ = 0, weight_fairshare_ = 0;
  int cluster_gpus_ = 1;
  Priority rate_ = 0;
  int64_t age_max_ = 0;
};

// Priority of each pending job, in snapshot.pending order.
std::vector<Priority> compute_priorities(const Snapshot& snapshot);

// One party's (a user's or a project's) standing in F.
struct FairShare {
  double usage = 0;        // decayed GPU-seconds
  double usage_share = 0;  // U: of every counted party's usage (0 when nobody used anything)
  double shares = 1;       // as an admin set them (Snapshot::user_shares, project_shares)
  double share = 1;        // S: its shares over every counted party's
  double factor = 1;       // 2^(-U / S)
  int64_t pending_jobs = 0;  // its jobs in `pending`
};
// Every party F counts, by name: those with usage and those with a job in `pending`, by user or by project.
std::unordered_map<std::string, FairShare> fair_shares(const std::unordered_map<std::string, double>& usage,
                                                       const std::unordered_map<std::string, double>& shares,
                                                       std::span<const PendingJob> pending, bool by_user);
// The same from the number of pending jobs of each party (parties with none may be left out). Sums run
// over the parties in name order, so equal inputs give equal factors, bit for bit, however they were built.
std::unordered_map<std::string, FairShare> fair_shares(const std::unordered_map<std::string, double>& usage,
                                                       const std::unordered_map<std::string, double>& shares,
                                                       const std::unordered_map<std::string, int64_t>& pending);

// The order of the queue: higher P first, then the earlier submit, then the lower id.
inline bool ahead(Priority pa, int64_t submit_a, JobId a, Priority pb, int64_t submit_b, JobId b) {
  if (pa != pb) return pa > pb;
  if (submit_a != submit_b) return submit_a < submit_b;
  return a < b;
}

// Indices into snapshot.pending, highest priority first.
std::vector<size_t> priority_order(const Snapshot& snapshot, const std::vector<Priority>& priorities);

// Sets the weights named in `text` ("size=0,age=2000": keys qos, age, fairshare, size; each a number 0..1e9)
// on `policy`, leaving the others; on an error (which names the bad part) `policy` is left as it was ("" changes
// nothing). The daemon's --priority-weights and `railyard sim --priority-weights`.
Status apply_priority_weights(const std::string& text, PolicyConfig& policy);
// "qos=10000,age=1000,fairshare=5000,size=0": `policy`'s weights in the form apply_priority_weights reads.
std::string priority_weights_text(const PolicyConfig& policy);

}  // namespace railyard::sched
