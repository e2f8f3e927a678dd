#include "scheduler/queue/priority.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <sstream>
#include <unordered_set>

namespace railyard::sched {
namespace {

double qos_factor(jobs::Qos q) {
  switch (q) {
    case jobs::Qos::kHigh: return 1.0;
    case jobs::Qos::kNormal: return 0.5;
    case jobs::Qos::kScavenger: return 0.0;
  }
  return 0.5;
}

struct ShareTable {
  double total = 0;
  size_t parties = 0;
  const std::unordered_map<std::string, double>* usage = nullptr;

  double factor(const std::string& who) const {
    auto it = usage->find(who);
    return fair_share_factor(it == usage->end() ? 0.0 : it->second, total, parties);
  }
};

ShareTable make_table(const std::unordered_map<std::string, double>& usage, const Snapshot& s, bool by_user) {
  ShareTable t;
  t.usage = &usage;
  std::unordered_set<std::string> parties;
  for (const auto& [who, used] : usage) {
    t.total += used;
    parties.insert(who);
  }
  for (const auto& p : s.pending) parties.insert(by_user ? p.spec->user : p.spec->project);
  t.parties = parties.size();
  return t;
}

}  // namespace

double fair_share_factor(double used, double total, size_t parties) {
  if (total <= 0) return 1.0;
  const double share = parties == 0 ? 1.0 : 1.0 / static_cast<double>(parties);
  return std::exp2(-(used / total) / share);
}

std::vector<double> compute_priorities(const Snapshot& s) {
  const auto& cfg = s.config;
  const ShareTable users = make_table(s.user_usage, s, true);
  const ShareTable projects = make_table(s.project_usage, s, false);
  const double cluster_gpus = std::max(1, s.cluster->gpu_count());
  std::vector<double> out;
  out.reserve(s.pending.size());
  for (const auto& job : s.pending) {
    const auto& spec = *job.spec;
    double age = cfg.age_max_s > 0 ? std::clamp(static_cast<double>(s.now - job.submit_time) / cfg.age_max_s, 0.0, 1.0) : 0;
    double fair = (users.factor(spec.user) + projects.factor(spec.project)) / 2.0;
    double size = std::min(1.0, spec.total_gpus() * std::max(1, spec.replicas) / cluster_gpus);
    out.push_back(cfg.weight_qos * qos_factor(spec.qos) + cfg.weight_age * age + cfg.weight_fairshare * fair +
                  cfg.weight_size * size + spec.priority);
  }
  return out;
}

std::vector<size_t> priority_order(const Snapshot& s, const std::vector<double>& priorities) {
  std::vector<size_t> order(s.pending.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (priorities[a] != priorities[b]) return priorities[a] > priorities[b];
    if (s.pending[a].submit_time != s.pending[b].submit_time) return s.pending[a].submit_time < s.pending[b].submit_time;
    return s.pending[a].id < s.pending[b].id;
  });
  return order;
}

Status apply_priority_weights(const std::string& text, sched::PolicyConfig& policy) {
  if (text.empty()) return ok();
  PolicyConfig next = policy;  // all of it or nothing
  for (size_t pos = 0; pos <= text.size();) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    double* weight = key == "qos"         ? &next.weight_qos
                     : key == "age"       ? &next.weight_age
                     : key == "fairshare" ? &next.weight_fairshare
                     : key == "size"      ? &next.weight_size
                                          : nullptr;
    if (eq == std::string::npos || !weight)
      return invalid("'" + item + "': expected qos=N, age=N, fairshare=N or size=N");
    const std::string number = item.substr(eq + 1);
    double value = 0;
    auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc() || p != number.data() + number.size() || number.empty() || !(value >= 0) ||
        value > 1e9)
      return invalid("'" + item + "': the weight must be a number 0..1e9");
    *weight = value;
  }
  policy = next;
  return ok();
}

std::string priority_weights_text(const PolicyConfig& policy) {
  std::string out;
  for (const auto& [key, value] : {std::pair{"qos", policy.weight_qos}, std::pair{"age", policy.weight_age},
                                   std::pair{"fairshare", policy.weight_fairshare},
                                   std::pair{"size", policy.weight_size}}) {
    std::ostringstream number;
    number << value;
    out += (out.empty() ? "" : ",") + std::string(key) + "=" + number.str();
  }
  return out;
}

}  // namespace railyard::sched
