#include "scheduler/placement/placer.hpp"

#include <algorithm>
#include <bit>
#include <numeric>

namespace railyard::sched {
namespace {

using topology::DomainId;
using topology::Level;

bool eligible_node(const ClusterUsage& u, const Request& r, NodeId n) {
  return u.node_usable(n) && r.eligible[u.classes().class_of[n]];
}

// k usable GPUs of node n, inside one NVLink domain when one has room (best fit among domains).
std::vector<GpuId> pick_in_node(const ClusterUsage& u, NodeId n, int k, Window w) {
  const auto& node = u.cluster().node(n);
  const auto& p = u.cluster().profile_of(n);
  std::vector<GpuId> out;
  if (p.nvlink_domain_size < node.gpus && p.nvlink_domain_size >= k) {
    int best = -1, best_free = 1 << 20;
    for (int d = 0; d < node.gpus / p.nvlink_domain_size; ++d) {
      int f = 0;
      for (int i = 0; i < p.nvlink_domain_size; ++i) f += u.gpu_usable(node.first_gpu + d * p.nvlink_domain_size + i, w);
      if (f >= k && f < best_free) best = d, best_free = f;
    }
    if (best >= 0)
      for (int i = 0; i < p.nvlink_domain_size && static_cast<int>(out.size()) < k; ++i)
        if (GpuId g = node.first_gpu + best * p.nvlink_domain_size + i; u.gpu_usable(g, w)) out.push_back(g);
    if (static_cast<int>(out.size()) == k) return out;
    out.clear();
  }
  for (int i = 0; i < node.gpus && static_cast<int>(out.size()) < k; ++i)
    if (u.gpu_usable(node.first_gpu + i, w)) out.push_back(node.first_gpu + i);
  return out;
}

// A whole free node to break for a sub-node job: in the leaf group with the fewest whole free nodes, so big
// islands stay whole.
std::optional<NodeId> whole_node_in_fullest_leaf(const ClusterUsage& u, const Request& r, int cls) {
  const auto& c = u.cluster();
  const int size = c.profiles()[u.classes().class_profile[cls]].gpus;
  std::vector<std::pair<int, DomainId>> leaves;
  for (DomainId l : c.leaves())
    if (u.whole_free_nodes(l) > 0) leaves.push_back({u.whole_free_nodes(l), l});
  std::sort(leaves.begin(), leaves.end());
  for (auto [count, l] : leaves)
    for (NodeId n = c.domain(l).first_node; n < c.domain(l).end_node; ++n)
      if (eligible_node(u, r, n) && u.classes().class_of[n] == cls && u.usable_on(n, r.window) == size) return n;
  return std::nullopt;
}

// Among `bucket`'s nodes with k usable GPUs, one in the leaf group with the fewest whole free nodes (lowest
// id among those), so small jobs fill leaves that are already broken and whole ones stay whole for gangs.
std::optional<NodeId> in_most_fragmented_leaf(const ClusterUsage& u, const Request& r, const NodeSet& bucket, int k) {
  const auto& c = u.cluster();
  std::optional<NodeId> best;
  int best_whole = 0;
  for (NodeId n = bucket.empty() ? -1 : bucket.next(0); n >= 0; n = bucket.next(n + 1)) {
    const int whole = u.whole_free_nodes(c.node(n).leaf());
    if (best && whole >= best_whole) continue;
    if (u.usable_on(n, r.window) < k) continue;
    best = n, best_whole = whole;
    if (whole == 0) break;  // none better
  }
  return best;
}

std::optional<Choice> place_single(const ClusterUsage& u, const Request& r, int k) {
  const bool spread = r.layout == jobs::Layout::kSpread;
  std::optional<NodeId> best;
  int best_free = spread ? -1 : 1 << 20;
  for (int cls = 0; cls < u.classes().count(); ++cls) {
    if (!r.eligible[cls]) continue;
    const int size = u.cluster().profiles()[u.classes().class_profile[cls]].gpus;
    for (int step = 0; step <= size - k; ++step) {
      const int f = spread ? size - step : k + step;
      if (spread ? f <= best_free : f >= best_free) break;
      std::optional<NodeId> found;
      if (f == size && !spread) {
        found = whole_node_in_fullest_leaf(u, r, cls);
      } else {
        found = in_most_fragmented_leaf(u, r, u.bucket(cls, f), k);
      }
      if (found) {
        best = found, best_free = f;
        break;
      }
    }
  }
  if (!best) return std::nullopt;
  return Choice{pick_in_node(u, *best, k, r.window), {}};
}

struct DomainFit {
  Level level = Level::kCluster;
  DomainId domain = -1;
  int count = 0;
};

// Nodes as a bitset in node order (bit n % 64 of word n / 64), as NodeSet's words.
using NodeBits = std::vector<uint64_t>;

// Members of `bits` in [first, end).
int count_in(const NodeBits& bits, NodeId first, NodeId end) {
  if (first >= end) return 0;
  const auto word = [](NodeId n) { return static_cast<size_t>(n) / 64; };
  const auto from = [](NodeId n) { return ~uint64_t{0} << (n % 64); };
  const auto below = [](NodeId n) { return n % 64 == 0 ? ~uint64_t{0} : (uint64_t{1} << (n % 64)) - 1; };
  const size_t a = word(first), b = word(end - 1);
  if (a == b) return std::popcount(bits[a] & from(first) & below(end));
  int count = std::popcount(bits[a] & from(first)) + std::popcount(bits[b] & below(end));
  for (size_t w = a + 1; w < b; ++w) count += std::popcount(bits[w]);
  return count;
}

// Smallest domain holding n of the qualifying nodes, best fit at that level (fewest qualifying nodes; the
// lowest id among equals). A domain's nodes are the range [first_node, end_node) (the builder lays nodes out
// depth first), so a count is a popcount over its words: O(domains + words of the levels counted), not
// O(nodes), and the levels above the first that fits are not counted.
std::optional<DomainFit> smallest_domain_for(const topology::Cluster& c, const NodeBits& nodes, int total, int n) {
  if (total < n) return std::nullopt;
  for (Level level : topology::kSwitchLevels) {
    DomainFit best;
    for (const auto& dom : c.domains_at(level)) {
      if (dom.end_node - dom.first_node < n) continue;
      const int count = count_in(nodes, dom.first_node, dom.end_node);
      if (count >= n && (best.domain < 0 || count < best.count)) best = {level, dom.id, count};
      if (best.count == n) break;  // none fits better
    }
    if (best.domain >= 0) return best;
  }
  return DomainFit{Level::kCluster, -1, total};
}

// n nodes of `nodes` (sorted) inside `fit`: fewest leaf groups (largest first, the last one best fit), or
// round robin over leaf groups for the spread layout.
std::vector<NodeId> select_nodes(const topology::Cluster& c, const std::vector<NodeId>& nodes, DomainFit fit, int n,
                                 bool spread) {
  std::vector<std::vector<NodeId>> groups;  // qualifying nodes by leaf group, in node order
  DomainId last_leaf = -2;
  for (NodeId node : nodes) {
    if (fit.domain >= 0 && (node < c.domain(fit.domain).first_node || node >= c.domain(fit.domain).end_node)) continue;
    if (c.node(node).leaf() != last_leaf) groups.emplace_back(), last_leaf = c.node(node).leaf();
    groups.back().push_back(node);
  }
  std::vector<NodeId> out;
  if (spread) {
    for (size_t round = 0; static_cast<int>(out.size()) < n; ++round)
      for (auto& g : groups)
        if (round < g.size() && static_cast<int>(out.size()) < n) out.push_back(g[round]);
  } else {
    std::vector<size_t> order(groups.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return groups[a].size() > groups[b].size(); });
    size_t used = 0;
    int taken = 0;
    while (taken + static_cast<int>(groups[order[used]].size()) < n) taken += static_cast<int>(groups[order[used++]].size());
    for (size_t i = 0; i < used; ++i) out.insert(out.end(), groups[order[i]].begin(), groups[order[i]].end());
    const int rest = n - taken;
    size_t last = order[used];
    for (size_t i = used; i < order.size(); ++i)  // best fit for the remainder
      if (static_cast<int>(groups[order[i]].size()) >= rest && groups[order[i]].size() < groups[last].size()) last = order[i];
    out.insert(out.end(), groups[last].begin(), groups[last].begin() + rest);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Candidate index sets for k GPUs per node on nodes of `size` GPUs: aligned blocks, or sliding windows.
std::vector<uint64_t> rail_sets(int k, int size) {
  std::vector<uint64_t> out;
  const uint64_t block = (k >= 64 ? ~uint64_t{0} : (uint64_t{1} << k) - 1);
  const int step = size % k == 0 ? k : 1;
  for (int start = 0; start + k <= size; start += step) out.push_back(block << start);
  return out;
}

bool set_usable(const ClusterUsage& u, NodeId n, uint64_t set, Window w) {
  if (!u.node_has_reservations(n)) return (u.free_mask(n) & set) == set;
  const auto& node = u.cluster().node(n);
  for (uint64_t m = set; m; m &= m - 1) {
    int i = std::countr_zero(m);
    if (i >= node.gpus || !u.gpu_usable(node.first_gpu + i, w)) return false;
  }
  return true;
}

// Takes per_node[i] GPUs on nodes[i]: the rail set's lowest indices when given, else any usable.
Choice take_on_nodes(const ClusterUsage& u, const std::vector<NodeId>& nodes, const Shape& s, uint64_t set, Window w) {
  Choice ch;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& node = u.cluster().node(nodes[i]);
    if (set == 0) {
      auto g = pick_in_node(u, nodes[i], s.per_node[i], w);
      ch.gpus.insert(ch.gpus.end(), g.begin(), g.end());
      continue;
    }
    int left = s.per_node[i];
    for (uint64_t m = set; m && left > 0; m &= m - 1, --left) ch.gpus.push_back(node.first_gpu + std::countr_zero(m));
  }
  std::sort(ch.gpus.begin(), ch.gpus.end());
  return ch;
}

std::optional<Choice> place_multi(const ClusterUsage& u, const Request& r, int* short_by) {
  const auto& c = u.cluster();
  const Shape& s = r.shape;
  const bool spread = r.layout == jobs::Layout::kSpread;
  const int k = s.k_max();
  const int size = c.max_gpus_per_node();
  // Every qualifying node is usable, of an eligible class and has k free GPUs (the window only takes more
  // away): with fewer such nodes than the shape has, none of the scans below can succeed.
  int enough = 0;
  for (int cls = 0; cls < u.classes().count(); ++cls)
    if (r.eligible[cls]) enough += u.nodes_with_free(cls, k);
  if (enough < s.nodes) {
    if (short_by) *short_by = s.nodes - enough;  // the window's reservations may take more away
    return std::nullopt;
  }
  std::vector<uint64_t> sets = s.whole_nodes ? std::vector<uint64_t>{} : rail_sets(k, size);
  if (s.whole_nodes) sets.push_back(k >= 64 ? ~uint64_t{0} : (uint64_t{1} << k) - 1);
  sets.push_back(0);  // fallback: any k usable GPUs per node, rails not aligned
  // Those nodes, from the free-count buckets (the union of their bit sets), and among them the ones that hold
  // every GPU a set asks for: whole free nodes without reservations do (of the largest size, or of the size
  // a whole-node shape asks for), so only the others are looked at one by one. O(words of the buckets +
  // nodes looked at), where a scan of every node is O(nodes) per candidate set, most of them full on a busy
  // cluster. The bitsets are kept per thread: at 10,000 nodes one is 1.2 KB, past malloc's per-thread cache,
  // and allocating four per call cost as much as the counting.
  struct Bitsets {
    NodeBits members, whole, qualifying, best;
  };
  thread_local Bitsets b;
  const size_t words = (static_cast<size_t>(c.node_count()) + 63) / 64;
  for (NodeBits* v : {&b.members, &b.whole}) v->assign(words, 0);
  b.qualifying.resize(words);
  for (int cls = 0; cls < u.classes().count(); ++cls) {
    if (!r.eligible[cls]) continue;
    const int gpus = c.profiles()[u.classes().class_profile[cls]].gpus;
    if (s.whole_nodes && gpus != k) continue;
    for (int f = k; f <= gpus; ++f) {
      const auto& bucket = u.bucket(cls, f).words();
      for (size_t w = 0; w < words; ++w) b.members[w] |= bucket[w];
      if (f == gpus && (gpus == size || s.whole_nodes))  // every set's GPUs are on such a node
        for (size_t w = 0; w < words; ++w) b.whole[w] |= bucket[w];
    }
  }
  const auto& reserved = u.reserved_nodes().words();
  std::optional<DomainFit> best;  // its qualifying nodes in b.best
  uint64_t best_set = 0;
  int last_total = 0;  // nodes that qualified for the last set tried: for set 0 (or the whole-node set), every
                       // node with k usable GPUs, and a set fits exactly when n qualify (the core's any-domain fit)
  for (uint64_t set : sets) {
    if (set == 0 && (best || s.whole_nodes)) break;
    int total = 0;
    for (size_t w = 0; w < words; ++w) {
      const uint64_t sure = b.members[w] & ~reserved[w] & (set == 0 ? ~uint64_t{0} : b.whole[w]);
      uint64_t q = sure;
      for (uint64_t rest = b.members[w] & ~sure; rest; rest &= rest - 1) {
        const int bit = std::countr_zero(rest);
        const auto n = static_cast<NodeId>(w * 64 + static_cast<size_t>(bit));
        if (set != 0 ? set_usable(u, n, set, r.window) : u.usable_on(n, r.window) >= k) q |= uint64_t{1} << bit;
      }
      b.qualifying[w] = q;
      total += std::popcount(q);
    }
    last_total = total;
    auto fit = smallest_domain_for(c, b.qualifying, total, s.nodes);
    if (!fit) continue;
    if (!best || fit->level < best->level || (fit->level == best->level && fit->count < best->count)) {
      best = fit, best_set = set;
      std::swap(b.best, b.qualifying);
      b.qualifying.resize(words);
    }
  }
  if (!best) {
    if (short_by) *short_by = s.nodes - last_total;
    return std::nullopt;
  }
  DomainFit fit = spread ? DomainFit{} : *best;
  std::vector<NodeId> in_fit;  // the qualifying nodes inside `fit`, in node order
  const NodeId from = fit.domain >= 0 ? c.domain(fit.domain).first_node : 0;
  const NodeId to = fit.domain >= 0 ? c.domain(fit.domain).end_node : c.node_count();
  for (size_t w = static_cast<size_t>(from) / 64; w < words && static_cast<NodeId>(w * 64) < to; ++w)
    for (uint64_t bits = b.best[w]; bits; bits &= bits - 1) {
      const auto n = static_cast<NodeId>(w * 64 + static_cast<size_t>(std::countr_zero(bits)));
      if (n >= from && n < to) in_fit.push_back(n);
    }
  auto nodes = select_nodes(c, in_fit, fit, s.nodes, spread);
  return take_on_nodes(u, nodes, s, best_set, r.window);
}

std::optional<Choice> place_mig(const ClusterUsage& u, const Request& r) {
  const auto& c = u.cluster();
  std::optional<MigSlice> best;
  int best_used = -1;
  for (GpuId g : u.split_gpus()) {
    NodeId n = c.node_of(g);
    if (!eligible_node(u, r, n)) continue;
    const jobs::MigProfile* p = r.mig[u.classes().class_of[n]];
    auto start = mig_fit(*p, u.mig_mask(g));
    int used = std::popcount(u.mig_mask(g));
    if (start && (used > best_used || (used == best_used && g < best->gpu)))
      best = MigSlice{g, *start, p->memory_slots, std::string(p->name)}, best_used = used;
  }
  if (best) return Choice{{}, {*best}};
  Request whole = r;
  whole.shape.per_node = {1};
  auto one = place_single(u, whole, 1);
  if (!one) return std::nullopt;
  const jobs::MigProfile* p = r.mig[u.classes().class_of[c.node_of(one->gpus[0])]];
  return Choice{{}, {MigSlice{one->gpus[0], *mig_fit(*p, 0), p->memory_slots, std::string(p->name)}}};
}

}  // namespace

std::optional<Choice> place_topology(const ClusterUsage& u, const Request& r, int* short_by) {
  if (short_by) *short_by = 0;
  if (r.is_mig()) return place_mig(u, r);
  if (r.shape.nodes == 1) return place_single(u, r, r.shape.total);
  return place_multi(u, r, short_by);
}

std::optional<Choice> place_first_fit(const ClusterUsage& u, const Request& r) {
  if (r.is_mig()) return place_mig(u, r);
  const auto& c = u.cluster();
  Choice ch;
  const bool explicit_split = r.spec->gpus_per_node > 0 || r.spec->nodes > 0;
  if (r.shape.nodes == 1 || explicit_split) {  // first nodes with room for each node's share
    size_t i = 0;
    for (NodeId n = 0; n < c.node_count() && i < r.shape.per_node.size(); ++n) {
      if (!eligible_node(u, r, n) || u.usable_on(n, r.window) < r.shape.per_node[i]) continue;
      auto g = pick_in_node(u, n, r.shape.per_node[i++], r.window);
      ch.gpus.insert(ch.gpus.end(), g.begin(), g.end());
    }
    if (i < r.shape.per_node.size()) return std::nullopt;
  } else {  // any free GPUs in node order until the count is met
    for (NodeId n = 0; n < c.node_count() && static_cast<int>(ch.gpus.size()) < r.shape.total; ++n) {
      if (!eligible_node(u, r, n)) continue;
      const auto& node = c.node(n);
      for (int i = 0; i < node.gpus && static_cast<int>(ch.gpus.size()) < r.shape.total; ++i)
        if (u.gpu_usable(node.first_gpu + i, r.window)) ch.gpus.push_back(node.first_gpu + i);
    }
    if (static_cast<int>(ch.gpus.size()) < r.shape.total) return std::nullopt;
  }
  std::sort(ch.gpus.begin(), ch.gpus.end());
  return ch;
}

std::string explain_no_fit(const ClusterUsage& u, const Request& r) {
  const auto& c = u.cluster();
  int free_total = 0, best_node = 0, whole = 0, best_leaf_whole = 0;
  for (NodeId n = 0; n < c.node_count(); ++n) {
    if (!eligible_node(u, r, n)) continue;
    int f = u.usable_on(n, r.window);
    free_total += f;
    best_node = std::max(best_node, f);
    whole += f == c.node(n).gpus;
  }
  for (DomainId l : c.leaves()) best_leaf_whole = std::max(best_leaf_whole, u.whole_free_nodes(l));
  const Shape& s = r.shape;
  std::string type = r.spec->gpu_type.empty() ? "" : " " + r.spec->gpu_type;
  if (r.is_mig()) return "needs a free " + r.spec->mig + " MIG slot; none free on eligible GPUs";
  if (free_total < s.total * r.replicas)
    return "needs " + std::to_string(s.total * r.replicas) + type + " GPUs; " + std::to_string(free_total) + " free";
  if (s.nodes == 1)
    return "needs " + std::to_string(s.total) + " free" + type + " GPUs on one node; the best node has " +
           std::to_string(best_node);
  if (s.whole_nodes)
    return "needs " + std::to_string(s.nodes) + " whole free nodes; " + std::to_string(whole) +
           " free in the cluster (best leaf group: " + std::to_string(best_leaf_whole) + ")";
  return "needs " + std::to_string(s.nodes) + " nodes with " + std::to_string(s.k_max()) + " free" + type +
         " GPUs each";
}

}  // namespace railyard::sched
