#include "agent/state/alloc_state.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/launch/proc.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json to_json(const AllocRecord& r) {
  json ranks = json::array();
  for (const auto& k : r.ranks)
    ranks.push_back({{"rank", k.rank},
                     {"pid", k.pid},
                     {"pgid", k.pgid},
                     {"start_ticks", k.start_ticks},
                     {"stdout", k.stdout_path},
                     {"stderr", k.stderr_path}});
  return {{"job_id", r.job_id},
          {"alloc_id", r.alloc_id},
          {"node", r.node},
          {"started_unix_ms", r.started_unix_ms},
          {"deadline_unix_ms", r.deadline_unix_ms},
          {"cgroup", r.cgroup},
          {"ranks", ranks}};
}

AllocRecord from_json(const json& j) {
  AllocRecord r;
  r.job_id = j.at("job_id").get<long long>();
  r.alloc_id = j.at("alloc_id").get<std::string>();
  r.node = j.value("node", "");
  r.started_unix_ms = j.value("started_unix_ms", 0LL);
  r.deadline_unix_ms = j.value("deadline_unix_ms", 0LL);
  r.cgroup = j.value("cgroup", "");
  for (const auto& k : j.at("ranks"))
    r.ranks.push_back(RankRecord{k.at("rank").get<int>(), k.at("pid").get<pid_t>(), k.at("pgid").get<pid_t>(),
                                 k.value("start_ticks", 0ULL), k.value("stdout", ""), k.value("stderr", "")});
  return r;
}

bool any_alive(const AllocRecord& r, GroupLiveness& groups) {
  for (const auto& k : r.ranks)
    if (process_alive(k.pid, k.start_ticks) || groups.alive(k.pgid)) return true;
  return false;
}

}  // namespace

fs::path state_file(const fs::path& state_dir, const std::string& alloc_id) {
  return state_dir / "allocs" / (alloc_id + ".json");
}

Status write_state(const fs::path& state_dir, const AllocRecord& record) {
  std::error_code ec;
  fs::create_directories(state_dir / "allocs", ec);
  const fs::path target = state_file(state_dir, record.alloc_id);
  const fs::path temp = target.string() + ".tmp";
  const std::string text = to_json(record).dump(2) + "\n";
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return internal_error("cannot write " + temp.string());
  // No fsync: the file only has to outlive the agent process, not the machine (see the header).
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!written || std::rename(temp.c_str(), target.c_str()) != 0) {
    fs::remove(temp, ec);
    return internal_error("cannot write " + target.string());
  }
  return ok();
}

Result<AllocRecord> read_state(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return not_found("no state file " + file.string());
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) return invalid(file.string() + ": not JSON");
  try {
    return from_json(j);
  } catch (const json::exception& e) {
    return invalid(file.string() + ": " + e.what());
  }
}

void remove_state(const fs::path& state_dir, const std::string& alloc_id) {
  std::error_code ec;
  fs::remove(state_file(state_dir, alloc_id), ec);
}

Recovery recover(const fs::path& state_dir) {
  Recovery out;
  GroupLiveness groups;  // one /proc scan at most for every file
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(state_dir / "allocs", ec)) {
    if (entry.path().extension() != ".json") continue;  // leftover .tmp files of an interrupted write
    auto record = read_state(entry.path());
    if (record && any_alive(*record, groups)) {
      out.alive.push_back(std::move(*record));
      continue;
    }
    out.removed.push_back(record ? record->alloc_id : entry.path().stem().string());
    fs::remove(entry.path(), ec);
  }
  return out;
}

}  // namespace railyard::agent
