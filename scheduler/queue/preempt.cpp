#include "scheduler/queue/preempt.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace railyard::sched {
namespace {

int gpu_count(const RunningJob& j) { return static_cast<int>(j.gpus.size() + j.slices.size()); }

// Scavenger jobs on node n, cheapest to lose first, and the GPUs each holds there.
std::vector<std::pair<int32_t, int>> scavengers_on(const Snapshot& s, const ClusterUsage& u, NodeId n,
                                                   const std::vector<char>& gone) {
  std::map<int32_t, int> on_node;
  const auto& node = u.cluster().node(n);
  for (int i = 0; i < node.gpus; ++i) {
    int32_t owner = u.owner(node.first_gpu + i);
    if (owner >= 0 && owner < static_cast<int32_t>(s.running.size()) && !gone[owner] &&
        s.running[owner].spec->qos == jobs::Qos::kScavenger)
      on_node[owner]++;
  }
  std::vector<std::pair<int32_t, int>> out(on_node.begin(), on_node.end());
  std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) {
    int ga = gpu_count(s.running[a.first]), gb = gpu_count(s.running[b.first]);
    return ga != gb ? ga < gb : a.first < b.first;
  });
  return out;
}

struct NodeCost {
  NodeId node;
  int lost;                     // GPUs of the victims (whole jobs, also their GPUs elsewhere)
  std::vector<int32_t> victims;
};

// Fewest GPUs lost to free `need` GPUs on node n; nullopt when even all scavengers are not enough.
std::optional<NodeCost> node_cost(const Snapshot& s, const ClusterUsage& u, NodeId n, int need,
                                  const std::vector<char>& gone) {
  NodeCost c{n, 0, {}};
  if (need <= 0) return c;
  auto scav = scavengers_on(s, u, n, gone);
  int freed = 0;
  for (const auto& [job, here] : scav) {
    if (freed >= need) break;
    c.victims.push_back(job);
    freed += here;
  }
  if (freed < need) return std::nullopt;
  for (size_t i = c.victims.size(); i-- > 0;) {  // drop victims that are not needed after all
    int here = 0;
    for (const auto& [job, h] : scav)
      if (job == c.victims[i]) here = h;
    if (freed - here >= need) freed -= here, c.victims.erase(c.victims.begin() + static_cast<long>(i));
  }
  for (int32_t v : c.victims) c.lost += gpu_count(s.running[v]);
  return c;
}

// Cheapest n candidates inside the smallest domain that has n of them.
std::vector<NodeCost> choose_nodes(const topology::Cluster& c, std::vector<NodeCost> cands, int n) {
  std::sort(cands.begin(), cands.end(), [](const auto& a, const auto& b) {
    return a.lost != b.lost ? a.lost < b.lost : a.node < b.node;
  });
  if (n == 1) return cands.empty() ? cands : std::vector<NodeCost>{cands.front()};
  for (topology::Level level : topology::kSwitchLevels) {
    std::map<topology::DomainId, std::vector<NodeCost>> by_domain;
    for (const auto& nc : cands)
      if (auto d = c.node(nc.node).domain_at(level); d >= 0) by_domain[d].push_back(nc);
    std::vector<NodeCost> best;
    int best_cost = 1 << 30;
    for (auto& [d, list] : by_domain) {
      if (static_cast<int>(list.size()) < n) continue;
      int cost = 0;
      for (int i = 0; i < n; ++i) cost += list[i].lost;
      if (cost < best_cost) best_cost = cost, best.assign(list.begin(), list.begin() + n);
    }
    if (!best.empty()) return best;
  }
  if (static_cast<int>(cands.size()) < n) return {};
  cands.resize(n);
  return cands;
}

}  // namespace

std::optional<PreemptionChoice> plan_preemption(const Snapshot& s, const ClusterUsage& u, const Request& req,
                                                const std::vector<char>& gone) {
  if (req.is_mig() || req.replicas > 1) return std::nullopt;
  const int k = req.shape.k_max();
  std::vector<NodeCost> cands;
  for (NodeId n = 0; n < u.cluster().node_count(); ++n) {
    if (!u.node_usable(n) || !req.eligible[u.classes().class_of[n]]) continue;
    if (req.shape.whole_nodes && u.cluster().node(n).gpus != k) continue;
    if (auto c = node_cost(s, u, n, k - u.usable_on(n, req.window), gone)) cands.push_back(std::move(*c));
  }
  auto chosen = choose_nodes(u.cluster(), std::move(cands), req.shape.nodes);
  if (chosen.empty()) return std::nullopt;
  ClusterUsage scratch = u;
  std::set<int32_t> freed;
  for (const auto& nc : chosen) freed.insert(nc.victims.begin(), nc.victims.end());
  for (int32_t v : freed) {
    scratch.give(s.running[v].gpus);
    for (const auto& sl : s.running[v].slices) scratch.give_slice(sl);
  }
  auto choice = place_topology(scratch, req);
  if (!choice) return std::nullopt;
  PreemptionChoice out{std::move(*choice), {}};
  std::set<int32_t> victims;
  for (GpuId g : out.choice.gpus)
    if (int32_t o = u.owner(g); o >= 0) victims.insert(o);
  out.victims.assign(victims.begin(), victims.end());
  return out;
}

}  // namespace railyard::sched
