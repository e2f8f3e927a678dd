#include "agent/state/alloc_state.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/launch/cgroup.hpp"
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
          {"cgroups", r.cgroups},
          {"ranks", ranks},
          {"user", r.user},
          {"gpus", r.gpus}};
}

AllocRecord from_json(const json& j) {
  AllocRecord r;
  r.job_id = j.at("job_id").get<long long>();
  r.alloc_id = j.at("alloc_id").get<std::string>();
  r.node = j.value("node", "");
  r.started_unix_ms = j.value("started_unix_ms", 0LL);
  r.deadline_unix_ms = j.value("deadline_unix_ms", 0LL);
  r.cgroups = j.value("cgroups", std::vector<std::string>{});
  if (auto old = j.value("cgroup", std::string()); !old.empty() && r.cgroups.empty()) r.cgroups.push_back(old);
  r.user = j.value("user", "");
  r.gpus = j.value("gpus", std::vector<int>{});
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

Result<AllocRecord> parse_state(const json& j, const std::string& where) {
  try {
    return from_json(j);
  } catch (const json::exception& e) {
    return invalid(where + ": " + e.what());
  }
}

}  // namespace

Result<AllocRecord> read_state(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return not_found("no state file " + file.string());
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) return invalid(file.string() + ": not JSON");
  return parse_state(j, file.string());
}

AllocStore::AllocStore(const fs::path& state_dir) : journal_(state_dir / "allocs.journal") {
  // Records of an agent from before the journal: one file each, written through a temp file. One that is
  // not in the journal (a write error) stays for the next start; unreadable ones and .tmp files go.
  take_over_files(state_dir / "allocs", [this](const fs::path& file) {
    auto record = file.extension() == ".json" ? read_state(file) : invalid("an interrupted write");
    return !record || put(*record).has_value();
  });
}

Status AllocStore::put(const AllocRecord& record) { return journal_.put(record.alloc_id, to_json(record)); }

void AllocStore::remove(const std::string& alloc_id) { journal_.drop(alloc_id); }

namespace {

std::vector<AllocRecord> parse_all(const std::map<std::string, json>& records, const fs::path& file) {
  std::vector<AllocRecord> out;
  for (const auto& [id, j] : records)
    if (auto record = parse_state(j, file.string()); record) out.push_back(std::move(*record));
  return out;
}

}  // namespace

std::vector<AllocRecord> AllocStore::records() const { return parse_all(journal_.records(), journal_.file()); }

std::vector<AllocRecord> AllocStore::read(const fs::path& state_dir) {
  const fs::path file = state_dir / "allocs.journal";
  return parse_all(Journal::read(file), file);
}

Recovery AllocStore::recover() {
  Recovery out;
  GroupLiveness groups;  // one /proc scan at most for every record
  std::vector<std::string> ids;
  for (const auto& [id, j] : journal_.records()) ids.push_back(id);
  for (const auto& id : ids) {
    auto record = parse_state(journal_.records().at(id), journal_.file().string());
    if (record && any_alive(*record, groups)) {
      out.alive.push_back(std::move(*record));
      continue;
    }
    out.removed.push_back(id);
    if (record) (void)remove_cgroup(record->cgroups);  // its processes are gone: the group is empty
    journal_.drop(id);
  }
  return out;
}

}  // namespace railyard::agent
