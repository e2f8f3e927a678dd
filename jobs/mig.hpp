// MIG (Multi-Instance GPU) profiles Railyard knows. A profile name is only meaningful for GPUs of one
// memory size: "1g.10gb" exists on A100-40GB and on 80 GB GPUs, "1g.5gb" only on A100-40GB.
// Source: NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles" (A100, H100, H200 tables) and its
// placement diagrams (which memory slots an instance of each profile may start at).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace railyard::jobs {

struct MigProfile {
  std::string_view name;        // "1g.10gb"
  int gpu_memory_gb = 0;        // memory of the whole GPU it slices: 40, 80 or 141
  std::string_view gpu_models;  // "A100-40GB", "A100-80GB / H100-80GB", "H200-141GB"
  int compute_slices = 0;       // of 7
  int max_per_gpu = 0;          // instances of this profile one GPU holds
  int memory_slots = 0;         // of the GPU's 8 memory slots
  uint8_t valid_starts = 0;     // bit i set: an instance may start at memory slot i (placement table)
};

// One row per (profile, GPU memory size).
std::span<const MigProfile> mig_profiles();
bool is_known_mig_profile(std::string_view name);
// The row for this profile on a GPU with this much memory; nullptr when that GPU has no such profile.
const MigProfile* find_mig_profile(std::string_view name, int gpu_memory_gb);
// "1g.5gb, 1g.10gb, ..." without repeats, for error messages.
std::string known_mig_profile_names();

}  // namespace railyard::jobs
