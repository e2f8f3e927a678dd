#include "agent/streams/tailer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace railyard::agent {

FileTailer::FileTailer(std::filesystem::path path, size_t max_line)
    : path_(std::move(path)), max_line_(max_line) {}

std::vector<std::string> FileTailer::read() {
  std::vector<std::string> lines;
  const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return lines;
  struct stat st {};
  if (fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) < offset_) {
    offset_ = 0;
    partial_.clear();
  }
  char buf[65536];
  for (ssize_t n; (n = pread(fd, buf, sizeof buf, static_cast<off_t>(offset_))) > 0;) {
    offset_ += static_cast<std::uint64_t>(n);
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        lines.push_back(std::move(partial_));
        partial_.clear();
      } else if (partial_.size() < max_line_) {
        partial_ += buf[i];
      }
    }
  }
  close(fd);
  return lines;
}

std::vector<std::string> FileTailer::flush() {
  auto lines = read();
  if (!partial_.empty()) lines.push_back(std::move(partial_));
  partial_.clear();
  return lines;
}

}  // namespace railyard::agent
