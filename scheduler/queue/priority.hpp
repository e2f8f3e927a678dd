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
#pragma once

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "scheduler/model/snapshot.hpp"

namespace railyard::sched {

// Priority of each pending job, in snapshot.pending order.
std::vector<double> compute_priorities(const Snapshot& snapshot);

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

// Indices into snapshot.pending, highest priority first.
std::vector<size_t> priority_order(const Snapshot& snapshot, const std::vector<double>& priorities);

// Sets the weights named in `text` ("size=0,age=2000": keys qos, age, fairshare, size; each a number 0..1e9)
// on `policy`, leaving the others; on an error (which names the bad part) `policy` is left as it was ("" changes
// nothing). The daemon's --priority-weights and `railyard sim --priority-weights`.
Status apply_priority_weights(const std::string& text, PolicyConfig& policy);
// "qos=10000,age=1000,fairshare=5000,size=0": `policy`'s weights in the form apply_priority_weights reads.
std::string priority_weights_text(const PolicyConfig& policy);

}  // namespace railyard::sched
