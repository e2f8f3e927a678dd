#include "scheduler/placement/mig.hpp"

#include <array>

namespace railyard::sched {
namespace {

// Slots are the 8 memory slices; 7g profiles take all 8. Starts from the MIG User Guide placement tables.
const std::vector<MigProfile> kA100_40 = {
    {"1g.5gb", 1, {0, 1, 2, 3, 4, 5, 6}}, {"1g.10gb", 2, {0, 2, 4, 6}}, {"2g.10gb", 2, {0, 2, 4}},
    {"3g.20gb", 4, {0, 4}},               {"4g.20gb", 4, {0}},          {"7g.40gb", 8, {0}},
};
const std::vector<MigProfile> kA100_80 = {
    {"1g.10gb", 1, {0, 1, 2, 3, 4, 5, 6}}, {"1g.20gb", 2, {0, 2, 4, 6}}, {"2g.20gb", 2, {0, 2, 4}},
    {"3g.40gb", 4, {0, 4}},                {"4g.40gb", 4, {0}},          {"7g.80gb", 8, {0}},
};
const std::vector<MigProfile> kH200_141 = {
    {"1g.18gb", 1, {0, 1, 2, 3, 4, 5, 6}}, {"1g.35gb", 2, {0, 2, 4, 6}}, {"2g.35gb", 2, {0, 2, 4}},
    {"3g.71gb", 4, {0, 4}},                {"4g.71gb", 4, {0}},          {"7g.141gb", 8, {0}},
};
const std::vector<MigProfile> kNone;

}  // namespace

std::span<const MigProfile> mig_profiles_for(std::string_view gpu_type, int memory_gb) {
  if (gpu_type == "A100") return memory_gb <= 40 ? kA100_40 : kA100_80;
  if (gpu_type == "H100") return kA100_80;  // H100-80GB uses the same slice sizes and placements
  if (gpu_type == "H200") return kH200_141;
  return kNone;
}

const MigProfile* find_mig_profile(std::string_view gpu_type, int memory_gb, std::string_view name) {
  for (const auto& p : mig_profiles_for(gpu_type, memory_gb))
    if (p.name == name) return &p;
  return nullptr;
}

std::optional<int> mig_fit(const MigProfile& profile, uint8_t mask) {
  for (int start : profile.starts) {
    unsigned bits = ((1u << profile.slots) - 1) << start;
    if (bits > 0xff) continue;
    if ((mask & bits) == 0) return start;
  }
  return std::nullopt;
}

}  // namespace railyard::sched
