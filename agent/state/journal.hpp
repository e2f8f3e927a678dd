// Journal: keyed JSON records kept in one append-only file, for agent state that has to outlive the agent
// process but not the machine (alloc_state.hpp says why no fsync).
//
// Each change is one line, ["put", key, record] or ["drop", key], appended with a single write() on an
// O_APPEND descriptor: a killed agent leaves whole lines behind. Opening replays the lines in order and
// skips any that does not parse (a write torn by a power loss). The file is rewritten with the live
// records only (temp file, rename) when opening found anything to drop, and whenever the dropped lines
// number at least 64 and more than the live records, so it stays small. After a failed append (disk full:
// part of a line may be in the file) every change rewrites the file until a rewrite succeeds.
//
// It replaces a file per record: per allocation and per report that is one create, rename and unlink
// less, file system calls that dominated the agent's CPU for short jobs. Not thread safe.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/result.hpp"

namespace railyard::agent {

class Journal {
 public:
  explicit Journal(std::filesystem::path file);  // the file is created by the first put

  // What a Journal opened on `file` would hold, without changing the file (one Journal per file may
  // write: a second one's rewrite would leave the first appending to an unlinked file).
  static std::map<std::string, nlohmann::json> read(const std::filesystem::path& file);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Stores `record` under `key` (replacing one there). On a write error the record is still kept in
  // memory, and the error says what was not written.
  Status put(const std::string& key, nlohmann::json record);
  void drop(const std::string& key);  // no-op for an unknown key

  const std::map<std::string, nlohmann::json>& records() const { return live_; }
  const std::filesystem::path& file() const { return file_; }
  size_t dead_lines() const { return dead_; }

 private:
  // Replays `file` into `live`; false when a line was skipped or dropped, or the last one is torn.
  static bool replay(const std::filesystem::path& file, std::map<std::string, nlohmann::json>& live);
  Status append(const std::string& line);
  void rewrite();

  std::filesystem::path file_;
  int fd_ = -1;
  std::map<std::string, nlohmann::json> live_;
  size_t dead_ = 0;      // lines in the file that no longer describe a live record
  bool broken_ = false;  // the file may end in a partial line: the next change rewrites it
};

// Takes over the per-record files an older agent kept in `dir`: `import` gets each file and returns false
// to keep it (its record could not be stored); every other file is deleted, then `dir` once empty. Nothing
// happens when `dir` does not exist.
void take_over_files(const std::filesystem::path& dir,
                     const std::function<bool(const std::filesystem::path&)>& import);

}  // namespace railyard::agent
