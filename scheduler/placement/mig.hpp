// MIG placement: which of a GPU's 8 memory slots a slice of a profile may start at. The profile table
// (names, sizes, valid starts) is jobs/mig.hpp; the table with its source is in scheduler/README.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "jobs/mig.hpp"
#include "topology/profile.hpp"

namespace railyard::sched {

// The profile on GPUs of this node profile; nullptr when the GPU has no MIG or no such profile.
const jobs::MigProfile* mig_profile_on(const topology::NodeProfile& node, std::string_view name);
// First valid start slot for the profile on a GPU whose occupied slots are `mask`; nullopt if none.
std::optional<int> mig_fit(const jobs::MigProfile& profile, uint8_t mask);

}  // namespace railyard::sched
