#include "agent/state/journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

namespace railyard::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMinDeadToRewrite = 64;

std::string put_line(const std::string& key, const json& record) {
  return json::array({"put", key, record}).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

int open_append(const fs::path& file) {
  return open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

bool Journal::replay(const fs::path& file, std::map<std::string, json>& live) {
  bool tidy = true;  // every line parsed, none dropped, the file ends with a newline
  if (std::ifstream in(file); in) {
    std::string line;
    while (std::getline(in, line)) {
      const json change = json::parse(line, nullptr, false);
      const bool put = change.is_array() && change.size() == 3 && change[0] == "put" && change[1].is_string();
      const bool drop = change.is_array() && change.size() == 2 && change[0] == "drop" && change[1].is_string();
      if (put) {
        tidy = tidy && live.count(change[1].get<std::string>()) == 0;
        live[change[1].get<std::string>()] = change[2];
      } else if (drop) {
        live.erase(change[1].get<std::string>());
        tidy = false;
      } else {
        tidy = false;
      }
      if (in.eof()) tidy = false;  // the last line had no newline: a torn write
    }
  }
  return tidy;
}

std::map<std::string, json> Journal::read(const fs::path& file) {
  std::map<std::string, json> live;
  replay(file, live);
  return live;
}

Journal::Journal(fs::path file) : file_(std::move(file)) {
  std::error_code ec;
  fs::create_directories(file_.parent_path(), ec);
  if (!replay(file_, live_)) {  // the file is created by the first change, not here
    broken_ = true;              // until rewritten: do not append after a torn line
    rewrite();
  }
}

Journal::~Journal() {
  if (fd_ >= 0) close(fd_);
}

Status Journal::append(const std::string& line) {
  if (!broken_) {
    if (fd_ < 0) fd_ = open_append(file_);
    if (fd_ >= 0 && write_all(fd_, line)) return ok();
    broken_ = true;  // part of the line may be in the file (disk full): rewrite it whole from now on
  }
  const int err = errno;
  rewrite();  // the live records, this change included (put and drop change them before appending)
  if (!broken_) return ok();
  return internal_error("cannot write " + file_.string() + ": " + std::strerror(err));
}

Status Journal::put(const std::string& key, json record) {
  const std::string line = put_line(key, record);
  if (auto [it, added] = live_.insert_or_assign(key, std::move(record)); !added) ++dead_;
  return append(line);
}

void Journal::drop(const std::string& key) {
  if (live_.erase(key) == 0) return;
  dead_ += 2;  // the record's put line and this drop line
  (void)append(json::array({"drop", key}).dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  if (dead_ >= kMinDeadToRewrite && dead_ > live_.size()) rewrite();
}

void take_over_files(const fs::path& dir, const std::function<bool(const fs::path&)>& import) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) files.push_back(entry.path());
  for (const auto& file : files)
    if (import(file)) fs::remove(file, ec);
  fs::remove(dir, ec);  // fails, harmlessly, while a file is left
}

void Journal::rewrite() {
  const fs::path temp = file_.string() + ".tmp";
  std::string text;
  for (const auto& [key, record] : live_) text += put_line(key, record);
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const bool written = fd >= 0 && write_all(fd, text);
  if (fd >= 0) close(fd);
  std::error_code ec;
  if (!written || std::rename(temp.c_str(), file_.c_str()) != 0) {
    fs::remove(temp, ec);  // the old file still holds every live record (and some dead ones)
    return;
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;  // append() opens the new file
  dead_ = 0;
  broken_ = false;
}

}  // namespace railyard::agent
