// Helpers the cluster file readers share. Internal to topology/: not part of the module's API.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace railyard::topology::detail {

std::string_view trim(std::string_view s);
// Whitespace-separated words.
std::vector<std::string_view> words(std::string_view s);

struct LineColumn {
  int line = 1;    // 1-based
  int column = 1;  // 1-based, in bytes
};
// Position of the byte at 0-based `offset` (clamped to the text).
LineColumn line_column(std::string_view text, size_t offset);

// A loop in a switch graph given as child lists over indices: the indices along it, first repeated at the
// end ({2, 5, 2}); empty when the graph is a forest of DAG edges.
std::vector<int> find_loop(const std::vector<std::vector<int>>& children);
// "a -> b -> a".
std::string describe_loop(const std::vector<int>& loop, const std::vector<std::string>& names);

// Height of every switch over its child switches (0 for one without children). The graph must be loop-free.
std::vector<int> heights(const std::vector<std::vector<int>>& children);

}  // namespace railyard::topology::detail
