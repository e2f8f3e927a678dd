#include "workloads/nccl_loader.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace railyard::workloads {
namespace {

constexpr std::string_view kModuleName = "librailyard_nccl_backend.so";

std::vector<std::string> module_candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("RAILYARD_NCCL_BACKEND"); env != nullptr && *env != '\0')
    out.emplace_back(env);
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / kModuleName).string());  // build tree
    out.push_back((exe.parent_path().parent_path() / "lib" / "railyard" / kModuleName).string());  // install
  }
  out.emplace_back(kModuleName);  // LD_LIBRARY_PATH, RUNPATH, ld.so.cache
  return out;
}

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
}

}  // namespace

Result<std::shared_ptr<NcclModule>> NcclModule::open() {
  std::string reasons;
  for (const auto& candidate : module_candidates()) {
    const bool bare = candidate.find('/') == std::string::npos;
    std::error_code ec;
    if (!bare && !std::filesystem::exists(candidate, ec)) continue;
    void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      if (!bare || reasons.empty())
        reasons += (reasons.empty() ? "" : "; ") + std::string(why ? why : candidate);
      continue;
    }
    auto entry = reinterpret_cast<RyNcclApiEntry>(::dlsym(handle, RY_NCCL_ENTRY_POINT));
    const RyNcclApi* api = entry != nullptr ? entry() : nullptr;
    if (api == nullptr || api->abi_version != RY_NCCL_ABI_VERSION) {
      ::dlclose(handle);
      reasons += (reasons.empty() ? "" : "; ") + candidate +
                 " has no matching " RY_NCCL_ENTRY_POINT " (ABI " + std::to_string(RY_NCCL_ABI_VERSION) + ")";
      continue;
    }
    return std::shared_ptr<NcclModule>(new NcclModule(handle, api));
  }
  return not_found("nccl backend unavailable: cannot load " + std::string(kModuleName) +
                   " (it is built only where CMake found CUDA and NCCL): " + reasons);
}

// Deliberately never dlclose()d: the CUDA runtime inside registers exit-time handlers that must not
// outlive their code.
NcclModule::~NcclModule() = default;

std::string NcclModule::last_error() const {
  const char* text = api_->last_error();
  return text != nullptr ? text : "unknown error";
}

Result<int> NcclModule::probe() const {
  int count = 0;
  const int rc = api_->probe(&count);
  if (rc == RY_NCCL_NO_DEVICE) return not_found(last_error());
  if (rc != 0) return internal_error(last_error());
  return count;
}

Result<NcclUniqueId> NcclModule::unique_id() const {
  NcclUniqueId id{};
  if (api_->unique_id(id.data(), id.size()) != 0) return internal_error(last_error());
  return id;
}

Result<std::unique_ptr<NcclCollective>> NcclCollective::create(std::shared_ptr<NcclModule> module, int rank,
                                                               int world, int device,
                                                               const NcclUniqueId& id) {
  RyNcclComm* comm = module->api().comm_create(rank, world, device, id.data(), id.size());
  if (comm == nullptr) return internal_error("NCCL communicator: " + module->last_error());
  return std::unique_ptr<NcclCollective>(new NcclCollective(std::move(module), comm, rank, world));
}

NcclCollective::~NcclCollective() { module_->api().comm_destroy(comm_); }

Status NcclCollective::allreduce_sum(std::span<float> data) {
  if (module_->api().allreduce_host(comm_, data.data(), data.size(), 0) != 0)
    return internal_error(module_->last_error());
  return ok();
}

Status NcclCollective::allreduce_sum(std::span<double> data) {
  if (module_->api().allreduce_host(comm_, data.data(), data.size(), 1) != 0)
    return internal_error(module_->last_error());
  return ok();
}

Result<std::unique_ptr<NcclEngine>> NcclEngine::create(NcclCollective& collective, const MlpShape& shape,
                                                       const Dataset& train,
                                                       const std::vector<float>& params) {
  const RyMlpDesc desc{shape.inputs,   shape.hidden,   shape.classes, train.rows(),
                       train.x.data(), train.y.data(), params.data()};
  const auto& module = collective.module();
  RyNcclMlp* mlp = module->api().mlp_create(collective.comm(), &desc);
  if (mlp == nullptr) return internal_error("GPU model: " + module->last_error());
  return std::unique_ptr<NcclEngine>(new NcclEngine(module, mlp, params.size()));
}

NcclEngine::~NcclEngine() { module_->api().mlp_destroy(mlp_); }

Status NcclEngine::step(std::span<const int> rows, int global_rows, float learning_rate) {
  if (global_rows <= 0) return ok();
  const float scale = 1.0f / static_cast<float>(global_rows);
  if (module_->api().mlp_step(mlp_, rows.data(), static_cast<int>(rows.size()), scale, learning_rate) != 0) {
    return internal_error("GPU step: " + module_->last_error());
  }
  return ok();
}

Result<std::vector<float>> NcclEngine::parameters() {
  std::vector<float> out(count_);
  if (module_->api().mlp_params(mlp_, out.data(), out.size()) != 0)
    return internal_error(module_->last_error());
  return out;
}

int local_device(int device_count) {
  const int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("LOCAL_RANK", 0));
  return device_count > 0 ? local % device_count : 0;
}

}  // namespace railyard::workloads
