// A stand-in libnvidia-ml for the NVML discovery test: eight "NVIDIA H100 80GB HBM3" GPUs, MIG on GPU 0,
// 18 active NVLinks each, fixed telemetry. Only the symbols agent/discovery/nvml.cpp binds.
#include <cstring>

extern "C" {

struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned gpu, memory;
};

constexpr unsigned kGpus = 8;
constexpr int kNotFound = 6;  // NVML_ERROR_NOT_FOUND

static unsigned long long index_of(nvmlDevice_t d) { return reinterpret_cast<unsigned long long>(d) - 1; }

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = kGpus;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (i >= kGpus) return kNotFound;
  *d = reinterpret_cast<nvmlDevice_t>(static_cast<unsigned long long>(i) + 1);
  return 0;
}
int nvmlDeviceGetName(nvmlDevice_t, char* name, unsigned length) {
  std::strncpy(name, "NVIDIA H100 80GB HBM3", length - 1);
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  m->total = 80ULL << 30;
  m->used = (index_of(d) + 1) << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned* current, unsigned* pending) {
  *current = *pending = index_of(d) == 0 ? 1 : 0;
  return 0;
}
int nvmlDeviceGetNvLinkState(nvmlDevice_t, unsigned link, int* active) {
  if (link >= 18) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *active = 1;
  return 0;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  u->gpu = static_cast<unsigned>(10 * index_of(d));
  u->memory = 5;
  return 0;
}
int nvmlDeviceGetPowerUsage(nvmlDevice_t, unsigned* milliwatts) {
  *milliwatts = 350000;
  return 0;
}

}  // extern "C"
