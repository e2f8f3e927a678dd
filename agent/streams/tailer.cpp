#include "agent/streams/tailer.hpp"

#include <sys/stat.h>
#include <unistd.h>

namespace railyard::agent {

FileTailer::FileTailer(Fd fd, size_t max_line, size_t max_read)
    : fd_(std::move(fd)), max_line_(max_line), max_read_(max_read) {}

std::vector<std::string> FileTailer::read() {
  std::vector<std::string> lines;
  if (!fd_) return lines;
  struct stat st {};
  if (fstat(fd_.get(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) < offset_) {
    offset_ = 0;
    partial_.clear();
  }
  char buf[65536];
  size_t budget = max_read_;
  for (ssize_t n; budget > 0 && (n = pread(fd_.get(), buf, std::min(sizeof buf, budget),
                                           static_cast<off_t>(offset_))) > 0;) {
    offset_ += static_cast<std::uint64_t>(n);
    budget -= static_cast<size_t>(n);
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        lines.push_back(std::move(partial_));
        partial_.clear();
      } else if (partial_.size() < max_line_) {
        partial_ += buf[i];
      }
    }
  }
  return lines;
}

// The writer is done: what is left is read in max_read steps, at most 16 of them (a rank's last lines hold
// run_stop; a rank that wrote more than that at its very end loses the rest to the tracker, not the log).
std::vector<std::string> FileTailer::flush() {
  std::vector<std::string> lines;
  for (int step = 0; step < 16; ++step) {
    const std::uint64_t before = offset_;
    for (auto& l : read()) lines.push_back(std::move(l));
    if (offset_ == before) break;
  }
  if (!partial_.empty()) lines.push_back(std::move(partial_));
  partial_.clear();
  return lines;
}

}  // namespace railyard::agent
