#include "topology/io_slurm.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "common/hostlist.hpp"
#include "topology/io_common.hpp"
#include "topology/io_json.hpp"

namespace railyard::topology {
namespace {

struct Line {
  int number = 0;
  std::string code;     // before '#'
  std::string comment;  // after '#'
};

struct SwitchAttrs {
  std::optional<Level> level;  // unset: inferred from the children
  int switch_count = 1;
  bool rail_optimized = false;
  double oversubscription = 1.0;
  double block_gbytes_s = 0;
};

struct ConfSwitch {
  int line = 0;
  std::string name;
  std::vector<std::string> nodes;
  std::vector<std::string> children;
  SwitchAttrs attrs;
};

struct NodeGroup {  // "#railyard nodes dgx[001-004] profile=dgx-a100 features=ib,nvme"
  int line = 0;
  std::vector<std::string> names;
  std::string profile;
  std::vector<std::string> features;
};

struct ConfFile {
  std::string name;
  std::vector<std::pair<int, NodeProfile>> profiles;  // (line, profile)
  std::vector<NodeGroup> node_groups;
  std::vector<ConfSwitch> switches;
};

Error at_line(int line, const std::string& message) {
  return invalid("line " + std::to_string(line) + ": " + message);
}

using detail::trim;
using detail::words;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Logical lines: a trailing '\' joins the next physical line; the number is that of the first one.
std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> out;
  std::string pending;
  int number = 0, first = 1;
  auto emit = [&](const std::string& joined) {
    size_t hash = joined.find('#');
    out.push_back({first, joined.substr(0, hash), hash == std::string::npos ? "" : joined.substr(hash + 1)});
  };
  for (size_t pos = 0; pos <= text.size();) {
    size_t nl = text.find('\n', pos);
    std::string_view raw = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    if (pending.empty()) first = number + 1;
    ++number;
    if (!raw.empty() && raw.back() == '\\') {
      pending.append(raw.substr(0, raw.size() - 1)).push_back(' ');
    } else {
      emit(pending.append(raw));
      pending.clear();
    }
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  if (!pending.empty()) emit(pending);
  return out;
}

// The text of a "#railyard ..." comment after the word, or nullopt for an ordinary comment.
std::optional<std::string_view> directive(std::string_view comment) {
  comment = trim(comment);
  constexpr std::string_view kWord = "railyard";
  if (comment.substr(0, kWord.size()) != kWord) return std::nullopt;
  if (comment.size() > kWord.size() && !std::isspace(static_cast<unsigned char>(comment[kWord.size()])))
    return std::nullopt;
  return trim(comment.substr(kWord.size()));
}

template <typename T>
std::optional<T> parse_number(std::string_view s) {
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

Result<std::vector<std::string>> expand_at(std::string_view list, std::string_view key, int line) {
  auto names = expand_hostlist(list);
  if (!names) return at_line(line, std::string(key) + ": " + names.error().message);
  return names;
}

Status apply_attr(SwitchAttrs& attrs, const std::string& key, std::string_view value, int line) {
  bool good = true;
  if (key == "level") {
    auto l = parse_level(value);
    if (!l) return at_line(line, "#railyard level: " + l.error().message);
    attrs.level = *l;
  } else if (key == "switch_count") {
    auto v = parse_number<int>(value);
    good = v.has_value();
    attrs.switch_count = v.value_or(1);
  } else if (key == "rail_optimized") {
    good = value == "true" || value == "false";
    attrs.rail_optimized = value == "true";
  } else if (key == "oversubscription" || key == "block_gbytes_s") {
    auto v = parse_number<double>(value);
    good = v.has_value();
    (key == "oversubscription" ? attrs.oversubscription : attrs.block_gbytes_s) = v.value_or(0);
  } else {
    return at_line(line,
                   "#railyard: unknown switch attribute \"" + key +
                       "\" (expected level, switch_count, rail_optimized, oversubscription, block_gbytes_s)");
  }
  if (!good) return at_line(line, "#railyard " + key + ": bad value \"" + std::string(value) + "\"");
  return ok();
}

Result<SwitchAttrs> parse_attrs(std::string_view text, int line) {
  SwitchAttrs attrs;
  for (auto word : words(text)) {
    size_t eq = word.find('=');
    if (eq == std::string_view::npos)
      return at_line(line, "#railyard: expected key=value, got \"" + std::string(word) + "\"");
    if (auto s = apply_attr(attrs, std::string(word.substr(0, eq)), word.substr(eq + 1), line); !s)
      return s.error();
  }
  return attrs;
}

Status parse_switch_key(ConfSwitch& sw, std::string_view word, int line) {
  size_t eq = word.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return at_line(line, "expected Key=Value, got \"" + std::string(word) + "\"");
  std::string key = lower(word.substr(0, eq));
  std::string_view value = word.substr(eq + 1);
  if (value.empty()) return at_line(line, std::string(word.substr(0, eq)) + " has no value");
  if (key == "switchname") {
    sw.name = value;
  } else if (key == "nodes" || key == "switches") {
    auto names = expand_at(value, word.substr(0, eq), line);
    if (!names) return names.error();
    (key == "nodes" ? sw.nodes : sw.children) = std::move(names).value();
  } else if (key == "linkspeed") {
    // Slurm reads LinkSpeed and does not use it; neither does Railyard (link speeds come from profiles).
  } else if (key == "blockname" || key == "blocksizes") {
    return at_line(line,
                   std::string(word.substr(0, eq)) +
                       ": topology/block is not supported; Railyard reads topology/tree (SwitchName lines)");
  } else {
    return at_line(line, "unknown key \"" + std::string(word.substr(0, eq)) +
                             "\" (expected SwitchName, Switches, Nodes or LinkSpeed)");
  }
  return ok();
}

Result<ConfSwitch> parse_switch_line(const Line& line) {
  ConfSwitch sw;
  sw.line = line.number;
  std::unordered_set<std::string> seen;
  for (auto word : words(line.code)) {
    if (!seen.insert(lower(word.substr(0, word.find('=')))).second)
      return at_line(line.number, std::string(word.substr(0, word.find('='))) + " given twice");
    if (auto s = parse_switch_key(sw, word, line.number); !s) return s.error();
  }
  if (sw.name.empty()) return at_line(line.number, "missing SwitchName");
  if (auto text = directive(line.comment)) {
    auto attrs = parse_attrs(*text, line.number);
    if (!attrs) return attrs.error();
    sw.attrs = *attrs;
  }
  return sw;
}

Result<NodeGroup> parse_node_group(std::string_view text, int line) {
  auto parts = words(text);
  if (parts.empty()) return at_line(line, "#railyard nodes: missing the host list");
  auto names = expand_at(parts.front(), "#railyard nodes", line);
  if (!names) return names.error();
  NodeGroup g{line, std::move(names).value(), "", {}};
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string_view key = parts[i].substr(0, parts[i].find('='));
    std::string_view value = key.size() < parts[i].size() ? parts[i].substr(key.size() + 1) : "";
    if (key == "profile" && !value.empty()) {
      g.profile = value;
    } else if (key == "features" && !value.empty()) {
      for (size_t start = 0; start <= value.size();) {
        size_t comma = std::min(value.find(',', start), value.size());
        g.features.emplace_back(value.substr(start, comma - start));
        start = comma + 1;
      }
    } else {
      return at_line(line, "#railyard nodes: expected profile=NAME or features=A,B, got \"" +
                               std::string(parts[i]) + "\"");
    }
  }
  return g;
}

Status parse_directive_line(std::string_view text, int line, ConfFile& file) {
  auto parts = words(text);
  std::string_view kind = parts.empty() ? "" : parts.front();
  std::string_view rest = trim(text.substr(kind.size()));
  if (kind == "name") {
    file.name = rest;
  } else if (kind == "profile") {
    auto p = profile_from_json(rest);
    if (!p) return at_line(line, "#railyard profile: " + p.error().message);
    file.profiles.emplace_back(line, std::move(p).value());
  } else if (kind == "nodes") {
    auto g = parse_node_group(rest, line);
    if (!g) return g.error();
    file.node_groups.push_back(std::move(g).value());
  } else {
    return at_line(
        line, "unknown #railyard comment \"" + std::string(kind) + "\" (expected name, profile or nodes)");
  }
  return ok();
}

Result<ConfFile> parse_file(std::string_view text) {
  ConfFile file;
  for (const Line& line : split_lines(text)) {
    if (trim(line.code).empty()) {
      if (auto d = directive(line.comment))
        if (auto s = parse_directive_line(*d, line.number, file); !s) return s.error();
      continue;
    }
    auto sw = parse_switch_line(line);
    if (!sw) return sw.error();
    file.switches.push_back(std::move(sw).value());
  }
  if (file.switches.empty()) return invalid("no SwitchName lines: not a topology.conf");
  return file;
}

Status add_nodes(const ConfFile& file, ClusterBuilder& builder, const SlurmReadOptions& options) {
  std::unordered_map<std::string, const NodeGroup*> group_of;
  for (const NodeGroup& g : file.node_groups)
    for (const auto& n : g.names)
      if (!group_of.emplace(n, &g).second)
        return at_line(g.line, "node \"" + n + "\" is in two #railyard nodes comments");
  std::unordered_map<std::string, const ConfSwitch*> owner;
  for (const ConfSwitch& sw : file.switches) {
    for (const auto& n : sw.nodes) {
      auto [it, inserted] = owner.emplace(n, &sw);
      if (!inserted && it->second == &sw) return at_line(sw.line, "node \"" + n + "\" is listed twice");
      if (!inserted)
        return at_line(sw.line, "node \"" + n + "\" is under two switches: \"" + it->second->name +
                                    "\" (line " + std::to_string(it->second->line) + ") and \"" + sw.name +
                                    "\"");
      auto g = group_of.find(n);
      const bool grouped = g != group_of.end() && !g->second->profile.empty();
      const std::string& profile = grouped ? g->second->profile : options.default_profile;
      auto features = g != group_of.end() ? g->second->features : std::vector<std::string>{};
      if (auto s = builder.add_node(n, profile, std::move(features)); !s)
        return at_line(grouped ? g->second->line : sw.line, s.error().message);
    }
  }
  for (const NodeGroup& g : file.node_groups)
    for (const auto& n : g.names)
      if (!owner.count(n))
        return at_line(g.line, "#railyard nodes names \"" + n + "\", which no switch lists");
  return ok();
}

// A switch with nodes only is a leaf; one with child switches sits one level above the highest child,
// unless a "#railyard level=" comment says otherwise.
Result<std::vector<Level>> assign_levels(const ConfFile& file,
                                         const std::vector<std::vector<int>>& children) {
  std::vector<int> height = detail::heights(children);
  std::vector<int> order(file.switches.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return height[a] < height[b]; });
  std::vector<Level> level(file.switches.size(), Level::kLeaf);
  for (int i : order) {
    const ConfSwitch& sw = file.switches[i];
    if (sw.attrs.level) {
      level[i] = *sw.attrs.level;
      continue;
    }
    if (children[i].empty()) continue;
    Level highest = Level::kBlock;
    for (int c : children[i]) highest = std::max(highest, level[c]);
    if (highest == Level::kCore)
      return at_line(sw.line,
                     "switch \"" + sw.name +
                         "\" sits above a core switch; Railyard models at most leaf, spine and core levels");
    level[i] = static_cast<Level>(static_cast<int>(highest) + 1);
  }
  return level;
}

Result<std::vector<std::vector<int>>> child_indices(const ConfFile& file) {
  std::unordered_map<std::string, int> index;
  for (size_t i = 0; i < file.switches.size(); ++i) {
    const ConfSwitch& sw = file.switches[i];
    auto [it, inserted] = index.emplace(sw.name, static_cast<int>(i));
    if (!inserted)
      return at_line(sw.line, "switch \"" + sw.name + "\" is defined twice (first on line " +
                                  std::to_string(file.switches[it->second].line) + ")");
  }
  std::vector<std::vector<int>> children(file.switches.size());
  for (size_t i = 0; i < file.switches.size(); ++i) {
    for (const auto& c : file.switches[i].children) {
      auto it = index.find(c);
      if (it == index.end())
        return at_line(file.switches[i].line,
                       "switch \"" + file.switches[i].name + "\" names undefined switch \"" + c + "\"");
      children[i].push_back(it->second);
    }
  }
  std::vector<std::string> names;
  for (const auto& sw : file.switches) names.push_back(sw.name);
  if (auto loop = detail::find_loop(children); !loop.empty())
    return at_line(file.switches[loop.front()].line,
                   "switches form a loop: " + detail::describe_loop(loop, names));
  return children;
}

Status add_switches(const ConfFile& file, ClusterBuilder& builder) {
  auto children = child_indices(file);
  if (!children) return children.error();
  auto levels = assign_levels(file, *children);
  if (!levels) return levels.error();
  for (size_t i = 0; i < file.switches.size(); ++i) {
    const ConfSwitch& sw = file.switches[i];
    const SwitchAttrs& a = sw.attrs;
    ClusterBuilder::SwitchSpec spec{sw.name,          (*levels)[i],       a.switch_count,
                                    a.rail_optimized, a.oversubscription, a.block_gbytes_s};
    if (auto s = builder.add_switch(std::move(spec)); !s) return at_line(sw.line, s.error().message);
  }
  for (const ConfSwitch& sw : file.switches) {
    for (const auto& n : sw.nodes)
      if (auto s = builder.attach_node(sw.name, n); !s) return at_line(sw.line, s.error().message);
    for (const auto& c : sw.children)
      if (auto s = builder.attach_switch(sw.name, c); !s) return at_line(sw.line, s.error().message);
  }
  return ok();
}

Result<Cluster> build_cluster(const ConfFile& file, const SlurmReadOptions& options) {
  ClusterBuilder builder(file.name.empty() ? options.cluster_name : file.name);
  for (const auto& [line, profile] : file.profiles)
    if (auto s = builder.add_profile(profile); !s) return at_line(line, s.error().message);
  if (auto s = add_nodes(file, builder, options); !s) return s.error();
  if (auto s = add_switches(file, builder); !s) return s.error();
  return std::move(builder).build();
}

}  // namespace

Result<Cluster> read_topology_conf(std::string_view text, const SlurmReadOptions& options) {
  try {
    auto file = parse_file(text);
    if (!file) return file.error();
    return build_cluster(*file, options);
  } catch (const std::exception& e) {  // a bug or out of memory; never let it escape a reader
    return internal_error(std::string("reading topology.conf: ") + e.what());
  }
}

}  // namespace railyard::topology
