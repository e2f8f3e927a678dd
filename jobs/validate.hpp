// Meaning checks on a JobSpec, in two layers:
//  - spec_problems: context-free (sizes, limits, combinations); the CLI can run it before it sends anything;
//  - cluster_problems: against one cluster (GPU types, node sizes, capacity, features, MIG). These are the
//    "can never fit here" cases; "does not fit now" is the scheduler's business, not validation's.
// Whole nodes: a spec with nodes > 0, exclusive, and no GPU count (an imported Slurm script that asks for no
// GPUs) takes all the GPUs of each node. spec_problems accepts it; resolve_whole_nodes, which the scheduler
// runs at submit before validate_against_cluster, turns it into nodes x gpus_per_node.
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

bool asks_for_whole_nodes(const JobSpec& spec);
// Sets gpus_per_node to the GPU count of the nodes the spec may use (its type and features); a spec that
// does not ask for whole nodes is left alone. Error when those nodes differ in size (the user must say how
// many GPUs); no such nodes at all is left for cluster_problems to explain.
Status resolve_whole_nodes(JobSpec& spec, const topology::Cluster& cluster);
// Only the cluster-dependent checks; parts that need a sane size (capacity) are skipped when the size is
// itself invalid, since spec_problems reports that.
std::vector<std::string> cluster_problems(const JobSpec& spec, const topology::Cluster& cluster);

// ok() for no problems, else kInvalidArgument with the problems joined by "; ".
Status status_from_problems(const std::vector<std::string>& problems);

Status validate_spec(const JobSpec& spec);
// spec_problems and cluster_problems together, in that order.
Status validate_against_cluster(const JobSpec& spec, const topology::Cluster& cluster);

}  // namespace railyard::jobs
