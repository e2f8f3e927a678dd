// Meaning checks on a JobSpec, in two layers:
//  - spec_problems: context-free (sizes, limits, combinations); the CLI can run it before it sends anything;
//  - cluster_problems: against one cluster (GPU types, node sizes, capacity, features, MIG). These are the
//    "can never fit here" cases; "does not fit now" is the scheduler's business, not validation's.
// Each problem names its field first ("gpus_per_node=9: no node type has 9 GPUs (largest: 8)"), and a
// Status carries all of them joined with "; " so the user fixes everything in one go.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "jobs/spec.hpp"
#include "topology/cluster.hpp"

namespace railyard::jobs {

inline constexpr size_t kMaxNameLength = 256;
inline constexpr int kMinPriority = -1000;
inline constexpr int kMaxPriority = 1000;
inline constexpr int64_t kMaxJobGpus = 1'000'000;  // per job (all replicas); guards the int arithmetic

std::vector<std::string> spec_problems(const JobSpec& spec);
// Only the cluster-dependent checks; parts that need a sane size (capacity) are skipped when the size is
// itself invalid, since spec_problems reports that.
std::vector<std::string> cluster_problems(const JobSpec& spec, const topology::Cluster& cluster);

// ok() for no problems, else kInvalidArgument with the problems joined by "; ".
Status status_from_problems(const std::vector<std::string>& problems);

Status validate_spec(const JobSpec& spec);
// spec_problems and cluster_problems together, in that order.
Status validate_against_cluster(const JobSpec& spec, const topology::Cluster& cluster);

}  // namespace railyard::jobs
