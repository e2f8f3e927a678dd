#include "common/protocol/key_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "common/protocol/mac.hpp"

namespace railyard::protocol {

Result<std::string> read_private_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return not_found("cannot read " + path + ": " + std::strerror(errno));
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0) {
    why = std::string("cannot stat: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    why = "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(::geteuid()) +
          ") or root";
  } else if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    why = std::string("readable or writable by group or others (mode ") + mode + "): run chmod 600 " + path;
  }
  std::string text;
  if (why.empty()) {
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || text.size() > (1u << 20)) {
        why = n < 0 ? std::string("cannot read: ") + std::strerror(errno) : "larger than 1 MiB";
        break;
      }
      text.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  if (!why.empty()) return railyard::Error{ErrorCode::kPermission, "refusing the credential file " + path + ": " + why};
  return text;
}

bool valid_node_key(const std::string& key) {
  if (key.size() != 2 * kNodeKeyBytes) return false;
  for (char c : key)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string new_node_key() { return random_hex(kNodeKeyBytes); }

Result<std::map<std::string, std::string>> parse_key_file(const std::string& text,
                                                          const std::vector<std::string>& nodes) {
  std::map<std::string, std::string> keys;
  std::string bare;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::istringstream words(line);
    std::string first, second, extra;
    words >> first >> second >> extra;
    if (first.empty() || first.front() == '#') continue;
    const std::string& key = second.empty() ? first : second;
    if (!extra.empty() || !valid_node_key(key))
      return invalid("line " + std::to_string(number) + ": expected \"NAME KEY\" with a 64-hex-digit key");
    if (second.empty())
      bare = key;
    else
      keys[first] = key;
  }
  if (!bare.empty()) {
    if (nodes.size() != 1 || !keys.empty()) return invalid("a bare key is allowed only for an agent of one node");
    keys[nodes.front()] = bare;
  }
  std::map<std::string, std::string> out;
  for (const auto& n : nodes) {
    auto it = keys.find(n);
    if (it == keys.end()) return not_found("no key for node " + n);
    out[n] = it->second;
  }
  return out;
}

Result<std::map<std::string, std::string>> read_key_files(const std::vector<std::string>& paths,
                                                          const std::vector<std::string>& nodes) {
  std::string text;
  for (const auto& path : paths) {
    auto file = read_private_file(path);
    if (!file) return file.error();
    text += *file + "\n";
  }
  auto keys = parse_key_file(text, nodes);
  if (!keys) {
    std::string names;
    for (const auto& p : paths) names += (names.empty() ? "" : ", ") + p;
    return railyard::Error{keys.error().code, "key file " + names + ": " + keys.error().message};
  }
  return keys;
}

std::string key_file_line(const std::string& node, const std::string& key) { return node + " " + key + "\n"; }

}  // namespace railyard::protocol
