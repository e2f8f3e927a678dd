#include "agent/launch/device_filter.hpp"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <regex>

#include "common/fd.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;

namespace {

bpf_insn insn(std::uint8_t code, std::uint8_t dst, std::uint8_t src, std::int16_t off, std::int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}

// r0 = 1 (allow) unless the access is to a character device in `deny`, then r0 = 0. The context is
// struct bpf_cgroup_dev_ctx {u32 access_type (device type in the low 16 bits); u32 major; u32 minor}.
//
//   r2 = ctx->access_type & 0xffff; if r2 != CHAR goto allow
//   r3 = ctx->major; r4 = ctx->minor
//   per denied device: if r3 != M goto next; if r4 == m goto deny; next:
//   allow: r0 = 1; exit       deny: r0 = 0; exit
std::vector<bpf_insn> program(const std::vector<DeviceNumber>& deny) {
  const auto n = static_cast<std::int16_t>(deny.size());
  std::vector<bpf_insn> p;
  p.push_back(insn(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0));
  p.push_back(insn(BPF_ALU64 | BPF_AND | BPF_K, 2, 0, 0, 0xffff));
  // Skip the loads and the per-device tests: 2 + 2 per device.
  p.push_back(insn(BPF_JMP | BPF_JNE | BPF_K, 2, 0, static_cast<std::int16_t>(2 + 2 * n), BPF_DEVCG_DEV_CHAR));
  p.push_back(insn(BPF_LDX | BPF_MEM | BPF_W, 3, 1, 4, 0));
  p.push_back(insn(BPF_LDX | BPF_MEM | BPF_W, 4, 1, 8, 0));
  for (std::int16_t k = 0; k < n; ++k) {
    const DeviceNumber& d = deny[static_cast<size_t>(k)];
    p.push_back(insn(BPF_JMP | BPF_JNE | BPF_K, 3, 0, 1, static_cast<std::int32_t>(d.major)));
    // To `deny` (past the rest of the tests and the allow block's two instructions).
    p.push_back(insn(BPF_JMP | BPF_JEQ | BPF_K, 4, 0, static_cast<std::int16_t>(2 * (n - k - 1) + 2),
                     static_cast<std::int32_t>(d.minor)));
  }
  p.push_back(insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 1));
  p.push_back(insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  p.push_back(insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0));
  p.push_back(insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  return p;
}

}  // namespace

std::vector<DeviceNumber> foreign_gpu_devices(const fs::path& dev, const std::vector<int>& own) {
  static const std::regex kGpu("nvidia([0-9]+)");
  std::vector<DeviceNumber> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dev, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, kGpu)) continue;
    if (std::find(own.begin(), own.end(), std::stoi(m[1])) != own.end()) continue;
    struct stat st {};
    if (stat(e.path().c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
    out.push_back({major(st.st_rdev), minor(st.st_rdev)});
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status attach_device_deny(const fs::path& group, const std::vector<DeviceNumber>& deny) {
  // Nothing to refuse (the job holds every GPU of the node): no program, which would allow everything.
  if (deny.empty()) return ok();
  if (deny.size() > 1000) return invalid("too many devices to deny (" + std::to_string(deny.size()) + ")");
  const auto code = program(deny);
  char verifier_log[4096] = {};
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .log_level = 1, .log_size = sizeof verifier_log, .log_buf = verifier_log);
  Fd prog(bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, "railyard_gpus", "GPL", code.data(), code.size(), &opts));
  if (!prog) {
    const int err = errno;
    return internal_error("cannot load the GPU device filter: " + std::string(std::strerror(err)) +
                          (verifier_log[0] ? std::string(" (") + verifier_log + ")" : std::string()));
  }
  Fd dir(open(group.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return internal_error("cannot open " + group.string() + ": " + std::strerror(errno));
  if (bpf_prog_attach(prog.get(), dir.get(), BPF_CGROUP_DEVICE, 0) != 0)
    return internal_error("cannot attach the GPU device filter to " + group.string() + ": " + std::strerror(errno));
  return ok();
}

}  // namespace railyard::agent
