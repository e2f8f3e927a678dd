#include "scheduler/placement/mig.hpp"

namespace railyard::sched {

const jobs::MigProfile* mig_profile_on(const topology::NodeProfile& node, std::string_view name) {
  return node.mig_capable ? jobs::find_mig_profile(name, node.gpu_memory_gb) : nullptr;
}

std::optional<int> mig_fit(const jobs::MigProfile& profile, uint8_t mask) {
  for (int start = 0; start + profile.memory_slots <= 8; ++start) {
    if (!(profile.valid_starts & (1u << start))) continue;
    const unsigned bits = ((1u << profile.memory_slots) - 1) << start;
    if ((mask & bits) == 0) return start;
  }
  return std::nullopt;
}

}  // namespace railyard::sched
