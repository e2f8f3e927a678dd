// Incremental reader of a growing log file (a rank's stdout): each read() returns the complete lines
// written since the last call, keeping a partial last line until its newline arrives. Never re-reads from
// the start; a file that shrinks (truncated) is read again from offset 0.
//
// It reads through a descriptor the agent opened (AllocDir), never by name: the log lives in a directory the
// job's user owns, where the name may have become a link, a FIFO or another file since. At most `max_read`
// bytes per read(), so a rank that writes gigabytes at once cannot hold the agent's loop.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/fd.hpp"

namespace railyard::agent {

class FileTailer {
 public:
  explicit FileTailer(Fd fd, size_t max_line = 1 << 20, size_t max_read = 4 << 20);

  // New complete lines (without '\n'); empty when nothing new was written.
  std::vector<std::string> read();
  // The pending partial line, when the writer is known to be done (the rank exited).
  std::vector<std::string> flush();

  std::uint64_t offset() const { return offset_; }

 private:
  Fd fd_;
  size_t max_line_;  // a longer line is cut at this length, so one runaway line cannot eat memory
  size_t max_read_;
  std::uint64_t offset_ = 0;
  std::string partial_;
};

}  // namespace railyard::agent
