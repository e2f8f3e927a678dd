// NVML through dlopen: the agent runs (and reports "no NVML") on machines without the NVIDIA driver.
// Only the handful of calls the agent needs are bound; their C signatures are NVML's stable _v2 ABI.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/discovery/inventory.hpp"
#include "common/result.hpp"

namespace railyard::agent {

struct GpuSample {
  int index = 0;
  unsigned utilization_pct = 0;  // SM busy over NVML's last sample period
  long long memory_used_bytes = 0;
  double power_watts = 0;
};

class Nvml {
 public:
  // Loads the library and calls nvmlInit_v2; an error names what was missing.
  static Result<std::shared_ptr<Nvml>> open(const std::string& library);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // Static facts per GPU: name, memory, MIG mode, active NVLinks.
  Result<std::vector<GpuInfo>> gpus() const;
  // Telemetry per GPU; entries whose calls fail keep zeros.
  std::vector<GpuSample> sample() const;

  struct Api;  // resolved function pointers (nvml.cpp)

 private:
  Nvml(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
};

}  // namespace railyard::agent
