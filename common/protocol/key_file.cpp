#include "common/protocol/key_file.hpp"

#include <fstream>
#include <sstream>

#include "common/protocol/mac.hpp"

namespace railyard::protocol {

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
    std::ifstream in(path);
    if (!in) return not_found("cannot read the key file " + path);
    std::stringstream file;
    file << in.rdbuf();
    text += file.str() + "\n";
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
