#include "agent/discovery/nvml.hpp"

#include <dlfcn.h>

namespace railyard::agent {

namespace {

// NVML's C ABI, declared here so no NVIDIA header is needed to build.
using NvmlReturn = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned gpu, memory;
};
constexpr unsigned kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS (H100)
constexpr int kNameLength = 96;       // NVML_DEVICE_NAME_V2_BUFFER_SIZE

template <typename F>
bool bind(void* handle, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(handle, name));
  return out != nullptr;
}

}  // namespace

struct Nvml::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*count)(unsigned*) = nullptr;
  NvmlReturn (*by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*mig_mode)(NvmlDevice, unsigned*, unsigned*) = nullptr;
  NvmlReturn (*nvlink_state)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned*) = nullptr;
};

Result<std::shared_ptr<Nvml>> Nvml::open(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return not_found("NVML not loaded: " + std::string(dlerror()));
  auto api = std::make_unique<Api>();
  bool ok = bind(handle, "nvmlInit_v2", api->init) && bind(handle, "nvmlShutdown", api->shutdown) &&
            bind(handle, "nvmlDeviceGetCount_v2", api->count) &&
            bind(handle, "nvmlDeviceGetHandleByIndex_v2", api->by_index) &&
            bind(handle, "nvmlDeviceGetName", api->name) &&
            bind(handle, "nvmlDeviceGetMemoryInfo", api->memory);
  // Optional calls: older drivers or GPUs lack MIG/NVLink; telemetry calls may be absent on some SKUs.
  bind(handle, "nvmlDeviceGetMigMode", api->mig_mode);
  bind(handle, "nvmlDeviceGetNvLinkState", api->nvlink_state);
  bind(handle, "nvmlDeviceGetUtilizationRates", api->utilization);
  bind(handle, "nvmlDeviceGetPowerUsage", api->power);
  if (!ok) {
    dlclose(handle);
    return internal_error("NVML library " + library + " lacks a required symbol");
  }
  if (NvmlReturn rc = api->init(); rc != 0) {
    dlclose(handle);
    return Error{ErrorCode::kUnavailable, "nvmlInit_v2 failed with code " + std::to_string(rc)};
  }
  return std::shared_ptr<Nvml>(new Nvml(handle, std::move(api)));
}

Nvml::Nvml(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  dlclose(handle_);
}

Result<std::vector<GpuInfo>> Nvml::gpus() const {
  unsigned count = 0;
  if (NvmlReturn rc = api_->count(&count); rc != 0)
    return internal_error("nvmlDeviceGetCount_v2 failed with code " + std::to_string(rc));
  std::vector<GpuInfo> out;
  for (unsigned i = 0; i < count; ++i) {
    NvmlDevice dev = nullptr;
    if (api_->by_index(i, &dev) != 0)
      return internal_error("nvmlDeviceGetHandleByIndex_v2 failed for GPU " + std::to_string(i));
    GpuInfo g;
    g.index = static_cast<int>(i);
    char name[kNameLength] = {};
    if (api_->name(dev, name, sizeof name) == 0) g.name = name;
    NvmlMemory mem{};
    if (api_->memory(dev, &mem) == 0) g.memory_bytes = static_cast<long long>(mem.total);
    unsigned current = 0, pending = 0;
    if (api_->mig_mode && api_->mig_mode(dev, &current, &pending) == 0) g.mig_enabled = current == 1;
    for (unsigned link = 0; api_->nvlink_state && link < kMaxNvLinks; ++link) {
      int active = 0;
      if (api_->nvlink_state(dev, link, &active) != 0)
        break;  // NVML_ERROR_INVALID_ARGUMENT past the last link
      g.nvlinks.push_back(active == 1);
      g.nvlinks_active += active == 1 ? 1 : 0;
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<GpuSample> Nvml::sample() const {
  std::vector<GpuSample> out;
  unsigned count = 0;
  if (api_->count(&count) != 0) return out;
  for (unsigned i = 0; i < count; ++i) {
    GpuSample s;
    s.index = static_cast<int>(i);
    NvmlDevice dev = nullptr;
    if (api_->by_index(i, &dev) == 0) {
      NvmlUtilization u{};
      if (api_->utilization && api_->utilization(dev, &u) == 0) s.utilization_pct = u.gpu;
      NvmlMemory mem{};
      if (api_->memory(dev, &mem) == 0) s.memory_used_bytes = static_cast<long long>(mem.used);
      unsigned milliwatts = 0;
      if (api_->power && api_->power(dev, &milliwatts) == 0) s.power_watts = milliwatts / 1000.0;
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace railyard::agent
