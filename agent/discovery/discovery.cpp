#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "agent/discovery/inventory.hpp"
#include "agent/discovery/nvml.hpp"
#include "topology/io_nvsmi.hpp"
#include "topology/profile.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;

std::string Inventory::rail_hca(int gpu) const {
  if (hcas.empty() || gpu_count <= 0) return "";
  const auto rail = static_cast<size_t>(gpu) * hcas.size() / static_cast<size_t>(gpu_count);
  return hcas[std::min(rail, hcas.size() - 1)].name;
}

namespace {

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string read_first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

// A program name as the shell would find it: a path as is, a bare name through PATH.
std::optional<fs::path> find_program(const std::string& name) {
  if (name.find('/') != std::string::npos)
    return access(name.c_str(), X_OK) == 0 ? std::optional<fs::path>(name) : std::nullopt;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Result<std::string> capture(const fs::path& program, const std::string& args) {
  const std::string cmd = shell_quote(program.string()) + " " + args + " 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return internal_error("cannot run " + program.string());
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  if (status != 0)
    return internal_error(program.string() + " " + args + " failed (status " + std::to_string(status) + ")");
  return out;
}

// The profile a GPU name belongs to ("NVIDIA H100 80GB HBM3" -> dgx-h100), when one matches.
const topology::NodeProfile* profile_for(const std::string& gpu_name, int gpu_count) {
  for (const auto& p : topology::builtin_profiles())
    if (p.gpus == gpu_count && !p.gpu_type.empty() && gpu_name.find(p.gpu_type) != std::string::npos)
      return &p;
  return nullptr;
}

void fill_from_gpus(Inventory& inv) {
  inv.gpu_count = static_cast<int>(inv.gpus.size());
  if (inv.gpus.empty()) return;
  inv.gpu_memory_bytes = inv.gpus.front().memory_bytes;
  if (const auto* p = profile_for(inv.gpus.front().name, inv.gpu_count)) {
    inv.profile = p->name;
    inv.gpu_type = p->gpu_type;
  } else {
    inv.gpu_type = inv.gpus.front().name;
  }
}

Result<Inventory> from_nvml(const DiscoveryOptions& o, const std::string& node) {
  auto nvml = Nvml::open(o.nvml_library);
  if (!nvml) return nvml.error();
  auto gpus = (*nvml)->gpus();
  if (!gpus) return gpus.error();
  if (gpus->empty()) return not_found("NVML reports no GPU");
  Inventory inv;
  inv.node = node;
  inv.source = "nvml";
  inv.gpus = std::move(*gpus);
  fill_from_gpus(inv);
  // NVSwitch systems show every GPU with active NVLinks; without them each GPU is its own domain.
  const bool nvlink = inv.gpus.front().nvlinks_active > 0;
  inv.nvlink_domain_size = nvlink ? inv.gpu_count : 1;
  if (const auto* p = topology::find_builtin_profile(inv.profile); p && nvlink)
    inv.nvlink_domain_size = p->nvlink_domain_size;
  return inv;
}

// `nvidia-smi --query-gpu` rows: "NVIDIA H100 80GB HBM3, 81559, Disabled" (memory in MiB).
void read_gpu_names(const fs::path& smi, Inventory& inv) {
  auto text = capture(smi, "--query-gpu=name,memory.total,mig.mode.current --format=csv,noheader,nounits");
  if (!text) return inv.notes.push_back(text.error().message);
  std::stringstream rows(*text);
  for (std::string row; std::getline(rows, row);) {
    std::vector<std::string> cells;
    std::stringstream cs(row);
    for (std::string c; std::getline(cs, c, ',');) cells.push_back(trim(c));
    if (cells.size() < 2) continue;
    GpuInfo g;
    g.index = static_cast<int>(inv.gpus.size());
    g.name = cells[0];
    g.memory_bytes = std::atoll(cells[1].c_str()) * 1024LL * 1024LL;
    g.mig_enabled = cells.size() > 2 && cells[2] == "Enabled";
    inv.gpus.push_back(std::move(g));
  }
}

Result<Inventory> from_nvidia_smi(const DiscoveryOptions& o, const std::string& node) {
  auto smi = find_program(o.nvidia_smi);
  if (!smi) return not_found("nvidia-smi not found");
  auto text = capture(*smi, "topo -m");
  if (!text) return text.error();
  auto topo = topology::parse_nvsmi_topo(*text);
  if (!topo) return invalid("nvidia-smi topo -m: " + topo.error().message);
  Inventory inv;
  inv.node = node;
  inv.source = "nvidia-smi";
  read_gpu_names(*smi, inv);
  fill_from_gpus(inv);
  inv.gpu_count = topo->gpu_count;
  inv.nvlink_domain_size = topo->nvlink_domain_size;
  for (const auto& nic : topo->nics)
    if (nic.compute) inv.hcas.push_back(Hca{nic.device, 0, ""});
  return inv;
}

// sysfs knows rates and states; nvidia-smi knows which NICs are compute rails. Keep the rails, add rates.
void merge_sysfs(Inventory& inv, const std::vector<Hca>& sysfs) {
  if (inv.hcas.empty()) {
    inv.hcas = sysfs;
    return;
  }
  for (auto& h : inv.hcas)
    for (const auto& s : sysfs)
      if (s.name == h.name) h = s;
}

}  // namespace

std::vector<Hca> read_sysfs_hcas(const fs::path& sysfs_root) {
  std::vector<Hca> out;
  std::error_code ec;
  const fs::path dir = sysfs_root / "class" / "infiniband";
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    Hca h;
    h.name = entry.path().filename().string();
    h.rate_gbits = std::atof(read_first_line(entry.path() / "ports" / "1" / "rate").c_str());
    h.state = read_first_line(entry.path() / "ports" / "1" / "state");
    out.push_back(std::move(h));
  }
  // Directory order is arbitrary; rails are numbered by name (mlx5_2 before mlx5_10).
  std::sort(out.begin(), out.end(), [](const Hca& a, const Hca& b) {
    return a.name.size() != b.name.size() ? a.name.size() < b.name.size() : a.name < b.name;
  });
  return out;
}

Result<Inventory> emulated_inventory(const std::string& profile, const std::string& node) {
  const auto* p = topology::find_builtin_profile(profile);
  if (p == nullptr) return invalid("unknown profile '" + profile + "' (see topology/profile.hpp)");
  Inventory inv;
  inv.node = node;
  inv.profile = p->name;
  inv.gpu_type = p->gpu_type;
  inv.gpu_count = p->gpus;
  inv.gpu_memory_bytes = static_cast<long long>(p->gpu_memory_gb) * 1024LL * 1024LL * 1024LL;
  inv.nvlink_domain_size = p->nvlink_domain_size;
  inv.source = "emulated";
  for (int i = 0; i < p->hcas; ++i)
    inv.hcas.push_back(Hca{"mlx5_" + std::to_string(i), p->hca_gbits_s, "4: ACTIVE"});
  for (int i = 0; i < p->gpus; ++i)
    inv.gpus.push_back(GpuInfo{i, "Emulated " + p->gpu_type, inv.gpu_memory_bytes, false, {}, 0});
  return inv;
}

Result<Inventory> discover(const DiscoveryOptions& o) {
  const std::string node = o.node_name.empty() ? hostname() : o.node_name;
  if (!o.emulate.empty()) return emulated_inventory(o.emulate, node);
  std::vector<std::string> notes;
  for (auto* probe : {&from_nvml, &from_nvidia_smi}) {
    auto inv = probe(o, node);
    if (inv) {
      merge_sysfs(*inv, read_sysfs_hcas(o.sysfs_root));
      inv->notes.insert(inv->notes.begin(), notes.begin(), notes.end());
      return inv;
    }
    notes.push_back(inv.error().message);
  }
  Inventory inv;
  if (!o.fallback_profile.empty()) {
    auto emulated = emulated_inventory(o.fallback_profile, node);
    if (!emulated) return emulated.error();
    inv = std::move(*emulated);
    notes.push_back("no GPU found; emulating " + o.fallback_profile);
  } else {
    inv.node = node;
    inv.source = "none";
    inv.hcas = read_sysfs_hcas(o.sysfs_root);
    notes.push_back("no GPU found");
  }
  inv.notes = std::move(notes);
  return inv;
}

}  // namespace railyard::agent

namespace railyard::agent {

nlohmann::json to_json(const Inventory& inv) {
  nlohmann::json hcas = nlohmann::json::array();
  for (const auto& h : inv.hcas)
    hcas.push_back({{"name", h.name}, {"rate_gbits", h.rate_gbits}, {"state", h.state}});
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : inv.gpus)
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"memory_bytes", g.memory_bytes},
                    {"mig", g.mig_enabled},
                    {"nvlinks_active", g.nvlinks_active}});
  return {{"node", inv.node},
          {"profile", inv.profile},
          {"gpu_type", inv.gpu_type},
          {"gpu_count", inv.gpu_count},
          {"gpu_memory_bytes", inv.gpu_memory_bytes},
          {"nvlink_domain_size", inv.nvlink_domain_size},
          {"hcas", hcas},
          {"gpus", gpus},
          {"source", inv.source},
          {"notes", inv.notes}};
}

}  // namespace railyard::agent
