#include "jobs/mig.hpp"

#include <array>

namespace railyard::jobs {
namespace {

constexpr std::string_view k40 = "A100-40GB";
constexpr std::string_view k80 = "A100-80GB / H100-80GB";
constexpr std::string_view k141 = "H200-141GB";

constexpr std::array<MigProfile, 18> kProfiles = {{
    {"1g.5gb", 40, k40, 1, 7, 1, 0x7F},
    {"1g.10gb", 40, k40, 1, 4, 2, 0x55},
    {"2g.10gb", 40, k40, 2, 3, 2, 0x15},
    {"3g.20gb", 40, k40, 3, 2, 4, 0x11},
    {"4g.20gb", 40, k40, 4, 1, 4, 0x01},
    {"7g.40gb", 40, k40, 7, 1, 8, 0x01},
    {"1g.10gb", 80, k80, 1, 7, 1, 0x7F},
    {"1g.20gb", 80, k80, 1, 4, 2, 0x55},
    {"2g.20gb", 80, k80, 2, 3, 2, 0x15},
    {"3g.40gb", 80, k80, 3, 2, 4, 0x11},
    {"4g.40gb", 80, k80, 4, 1, 4, 0x01},
    {"7g.80gb", 80, k80, 7, 1, 8, 0x01},
    {"1g.18gb", 141, k141, 1, 7, 1, 0x7F},
    {"1g.35gb", 141, k141, 1, 4, 2, 0x55},
    {"2g.35gb", 141, k141, 2, 3, 2, 0x15},
    {"3g.71gb", 141, k141, 3, 2, 4, 0x11},
    {"4g.71gb", 141, k141, 4, 1, 4, 0x01},
    {"7g.141gb", 141, k141, 7, 1, 8, 0x01},
}};

}  // namespace

std::span<const MigProfile> mig_profiles() { return kProfiles; }

bool is_known_mig_profile(std::string_view name) {
  for (const MigProfile& p : mig_profiles())
    if (p.name == name) return true;
  return false;
}

const MigProfile* find_mig_profile(std::string_view name, int gpu_memory_gb) {
  for (const MigProfile& p : mig_profiles())
    if (p.name == name && p.gpu_memory_gb == gpu_memory_gb) return &p;
  return nullptr;
}

std::string known_mig_profile_names() {
  std::string out;
  for (size_t i = 0; i < mig_profiles().size(); ++i) {
    std::string_view name = mig_profiles()[i].name;
    bool seen = false;
    for (size_t k = 0; k < i; ++k) seen = seen || mig_profiles()[k].name == name;
    if (seen) continue;
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace railyard::jobs
