// Multifactor priority, in the manner of Slurm's priority/multifactor plugin:
//
//   P = w_qos * Q + w_age * A + w_fairshare * F + w_size * S + spec.priority
//   Q = 1 (high), 0.5 (normal), 0 (scavenger)
//   A = min(1, wait / age_max)
//   F = (2^(-U_user / S_user) + 2^(-U_project / S_project)) / 2     (Slurm's classic fair-share factor)
//       U = the user's (project's) share of all decayed usage; S = 1 / number of users (projects) seen
//   S = min(1, gpus / cluster GPUs)                                 (favours big jobs; w_size is 0 by default)
// Ties go to the earlier submit, then the lower job id, so the order is total and deterministic.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"
#include "scheduler/model/snapshot.hpp"

namespace railyard::sched {

// Priority of each pending job, in snapshot.pending order.
std::vector<double> compute_priorities(const Snapshot& snapshot);

// F's half for one party (a user or a project): 2^(-U / S), U = `used` / `total` (1 when nothing was used),
// S = 1 / `parties`.
double fair_share_factor(double used, double total, size_t parties);

// Indices into snapshot.pending, highest priority first.
std::vector<size_t> priority_order(const Snapshot& snapshot, const std::vector<double>& priorities);

// Sets the weights named in `text` ("size=0,age=2000": keys qos, age, fairshare, size; each a number 0..1e9)
// on `policy`, leaving the others; on an error (which names the bad part) `policy` is left as it was ("" changes
// nothing). The daemon's --priority-weights and `railyard sim --priority-weights`.
Status apply_priority_weights(const std::string& text, PolicyConfig& policy);
// "qos=10000,age=1000,fairshare=5000,size=0": `policy`'s weights in the form apply_priority_weights reads.
std::string priority_weights_text(const PolicyConfig& policy);

}  // namespace railyard::sched
