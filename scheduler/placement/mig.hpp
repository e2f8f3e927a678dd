// MIG profiles and their valid placements on the 8 memory slots of a GPU, per NVIDIA's MIG User Guide
// ("Supported MIG Profiles" tables for A100-SXM4-40GB, A100-SXM4-80GB, H100-SXM5-80GB, H200-SXM5-141GB):
// a profile of size s may start only at the listed slots. Table and source: scheduler/README.md.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace railyard::sched {

struct MigProfile {
  std::string_view name;     // "1g.10gb"
  int slots = 0;             // memory slots occupied (of 8)
  std::vector<int> starts;   // valid first slots
};

// Profiles valid on a GPU of this type and memory size; empty when the GPU has no MIG.
std::span<const MigProfile> mig_profiles_for(std::string_view gpu_type, int memory_gb);
const MigProfile* find_mig_profile(std::string_view gpu_type, int memory_gb, std::string_view name);
// First valid start slot for the profile on a GPU whose occupied slots are `mask`; nullopt if none.
std::optional<int> mig_fit(const MigProfile& profile, uint8_t mask);

}  // namespace railyard::sched
