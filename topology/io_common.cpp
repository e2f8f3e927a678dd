#include "topology/io_common.hpp"

#include <algorithm>
#include <cctype>

namespace railyard::topology::detail {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  for (s = trim(s); !s.empty(); s = trim(s)) {
    size_t end = 0;
    while (end < s.size() && !std::isspace(static_cast<unsigned char>(s[end]))) ++end;
    out.push_back(s.substr(0, end));
    s.remove_prefix(end);
  }
  return out;
}

LineColumn line_column(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  LineColumn lc;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++lc.line;
      line_start = i + 1;
    }
  }
  lc.column = static_cast<int>(offset - line_start) + 1;
  return lc;
}

// Iterative depth-first search (switch trees can be deep enough that recursion is a needless risk).
std::vector<int> find_loop(const std::vector<std::vector<int>>& children) {
  enum class Mark { kNew, kOnPath, kDone };
  std::vector<Mark> mark(children.size(), Mark::kNew);
  for (size_t root = 0; root < children.size(); ++root) {
    if (mark[root] != Mark::kNew) continue;
    std::vector<std::pair<int, size_t>> path = {{static_cast<int>(root), 0}};  // (node, next child)
    mark[root] = Mark::kOnPath;
    while (!path.empty()) {
      auto& [node, next] = path.back();
      if (next == children[node].size()) {
        mark[node] = Mark::kDone;
        path.pop_back();
        continue;
      }
      int child = children[node][next++];
      if (mark[child] == Mark::kOnPath) {
        std::vector<int> loop;
        auto it = std::find_if(path.begin(), path.end(), [&](const auto& p) { return p.first == child; });
        for (; it != path.end(); ++it) loop.push_back(it->first);
        loop.push_back(child);
        return loop;
      }
      if (mark[child] == Mark::kNew) {
        mark[child] = Mark::kOnPath;
        path.emplace_back(child, 0);
      }
    }
  }
  return {};
}

std::string describe_loop(const std::vector<int>& loop, const std::vector<std::string>& names) {
  std::string out;
  for (int i : loop) out += (out.empty() ? "" : " -> ") + names[i];
  return out;
}

std::vector<int> heights(const std::vector<std::vector<int>>& children) {
  std::vector<int> height(children.size(), -1);
  for (size_t root = 0; root < children.size(); ++root) {
    if (height[root] >= 0) continue;
    std::vector<std::pair<int, size_t>> path = {{static_cast<int>(root), 0}};
    while (!path.empty()) {
      auto& [node, next] = path.back();
      if (next == children[node].size()) {
        int h = 0;
        for (int c : children[node]) h = std::max(h, height[c] + 1);
        height[node] = h;
        path.pop_back();
        continue;
      }
      int child = children[node][next++];
      if (height[child] < 0) path.emplace_back(child, 0);
    }
  }
  return height;
}

}  // namespace railyard::topology::detail
