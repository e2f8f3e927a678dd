#include "agent/launch/proc.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <string>

namespace railyard::agent {

namespace fs = std::filesystem;

std::optional<std::string> read_proc_file(pid_t pid, const char* name, const fs::path& proc) {
  const int fd = ::open((proc / std::to_string(pid) / name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::optional<ProcStat> read_proc_stat(pid_t pid, const fs::path& proc) {
  const auto text = read_proc_file(pid, "stat", proc);
  if (!text || text->empty()) return std::nullopt;
  const std::string line = text->substr(0, text->find('\n'));
  // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  ProcStat s;
  s.pid = pid;
  std::string skip;
  rest >> s.state >> s.ppid >> s.pgrp;
  for (int field = 6; field <= 13; ++field) rest >> skip;  // session .. majflt, cmajflt
  rest >> s.utime >> s.stime;
  for (int field = 16; field <= 21; ++field) rest >> skip;  // cutime .. itrealvalue
  rest >> s.start_ticks;
  if (rest.fail()) return std::nullopt;
  return s;
}

long long read_proc_rss(pid_t pid, const fs::path& proc) {
  const auto text = read_proc_file(pid, "status", proc);
  if (!text) return 0;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024LL;
  return 0;
}

std::vector<ProcStat> group_members(pid_t pgid, const fs::path& proc) {
  return ProcessTable::scan(proc).members(pgid);
}

bool group_alive(pid_t pgid) { return GroupLiveness().alive(pgid); }

ProcessTable ProcessTable::scan(const fs::path& proc) {
  ProcessTable t;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(proc, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto s = read_proc_stat(static_cast<pid_t>(std::atoi(name.c_str())), proc);
    if (!s) continue;  // exited during the scan
    if (s->state == 'Z') {
      if (t.groups_.count(s->pgrp) == 0) t.zombie_only_.insert(s->pgrp);
      continue;
    }
    t.zombie_only_.erase(s->pgrp);
    t.groups_[s->pgrp].push_back(*s);
  }
  return t;
}

const std::vector<ProcStat>& ProcessTable::members(pid_t pgid) const {
  static const std::vector<ProcStat> kNone;
  auto it = groups_.find(pgid);
  return it == groups_.end() ? kNone : it->second;
}

const ProcessTable& GroupLiveness::table() {
  if (!table_) {
    table_ = ProcessTable::scan(proc_);
    ++scans_;
  }
  return *table_;
}

bool GroupLiveness::alive(pid_t pgid) {
  if (pgid <= 1) return false;
  if (kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  const ProcessTable& t = table();
  return !t.members(pgid).empty() || !t.seen(pgid);
}

bool process_alive(pid_t pid, unsigned long long start_ticks) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  auto s = read_proc_stat(pid);
  if (!s || s->state == 'Z') return false;
  return start_ticks == 0 || s->start_ticks == start_ticks;
}

}  // namespace railyard::agent
