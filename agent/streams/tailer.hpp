// Incremental reader of a growing log file (a rank's stdout): each read() returns the complete lines
// written since the last call, keeping a partial last line until its newline arrives. Never re-reads from
// the start; a file that shrinks (truncated, replaced) is read again from offset 0.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace railyard::agent {

class FileTailer {
 public:
  explicit FileTailer(std::filesystem::path path, size_t max_line = 1 << 20);

  // New complete lines (without '\n'); empty when nothing new or the file does not exist yet.
  std::vector<std::string> read();
  // The pending partial line, when the writer is known to be done (the rank exited).
  std::vector<std::string> flush();

  std::uint64_t offset() const { return offset_; }

 private:
  std::filesystem::path path_;
  size_t max_line_;  // a longer line is cut at this length, so one runaway line cannot eat memory
  std::uint64_t offset_ = 0;
  std::string partial_;
};

}  // namespace railyard::agent
