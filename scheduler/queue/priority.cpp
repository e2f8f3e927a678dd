#include "scheduler/queue/priority.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <sstream>

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

}  // namespace

std::unordered_map<std::string, FairShare> fair_shares(const std::unordered_map<std::string, double>& usage,
                                                       const std::unordered_map<std::string, double>& shares,
                                                       const std::unordered_map<std::string, int64_t>& pending) {
  std::unordered_map<std::string, FairShare> out;
  for (const auto& [who, used] : usage) out[who].usage = used;
  for (const auto& [who, jobs] : pending)
    if (jobs > 0) out[who].pending_jobs = jobs;
  std::vector<std::pair<const std::string*, FairShare*>> named;
  named.reserve(out.size());
  for (auto& [who, f] : out) named.emplace_back(&who, &f);
  std::sort(named.begin(), named.end(), [](const auto& a, const auto& b) { return *a.first < *b.first; });
  double total = 0, all_shares = 0;
  for (auto& [who, f] : named) {
    if (auto it = shares.find(*who); it != shares.end()) f->shares = it->second;
    total += f->usage;
    all_shares += f->shares;
  }
  for (auto& [who, f] : named) {
    f->share = f->shares / all_shares;
    f->usage_share = total > 0 ? f->usage / total : 0;
    f->factor = std::exp2(-f->usage_share / f->share);
  }
  return out;
}

std::unordered_map<std::string, FairShare> fair_shares(const std::unordered_map<std::string, double>& usage,
                                                       const std::unordered_map<std::string, double>& shares,
                                                       std::span<const PendingJob> pending, bool by_user) {
  std::unordered_map<std::string, int64_t> jobs;
  for (const auto& p : pending) ++jobs[by_user ? p.spec->user : p.spec->project];
  return fair_shares(usage, shares, jobs);
}

PriorityModel::PriorityModel(const PolicyConfig& config, int cluster_gpus)
    : weight_qos_(config.weight_qos),
      weight_size_(config.weight_size),
      weight_fairshare_(config.weight_fairshare),
      cluster_gpus_(std::max(1, cluster_gpus)),
      rate_(config.age_max_s > 0 ? std::llround(config.weight_age * kPriorityUnit / static_cast<double>(config.age_max_s))
                                 : 0),
      age_max_(std::max<int64_t>(0, config.age_max_s)) {}

Priority PriorityModel::base(const jobs::JobSpec& spec) const {
  const double size = std::min(1.0, spec.total_gpus() * std::max(1, spec.replicas) / static_cast<double>(cluster_gpus_));
  return std::llround(weight_qos_ * qos_factor(spec.qos) * kPriorityUnit) +
         std::llround(weight_size_ * size * kPriorityUnit) + static_cast<Priority>(spec.priority) * static_cast<Priority>(kPriorityUnit);
}

Priority PriorityModel::fair(double user_factor, double project_factor) const {
  return std::llround(weight_fairshare_ * (user_factor + project_factor) / 2.0 * kPriorityUnit);
}

std::vector<Priority> compute_priorities(const Snapshot& s) {
  const PriorityModel model(s.config, s.cluster->gpu_count());
  const auto users = fair_shares(s.user_usage, s.user_shares, s.pending, true);
  const auto projects = fair_shares(s.project_usage, s.project_shares, s.pending, false);
  std::vector<Priority> out;
  out.reserve(s.pending.size());
  for (const auto& job : s.pending) {
    const auto& spec = *job.spec;
    out.push_back(model.base(spec) + model.age(job.submit_time, s.now) +
                  model.fair(users.at(spec.user).factor, projects.at(spec.project).factor));
  }
  return out;
}

std::vector<size_t> priority_order(const Snapshot& s, const std::vector<Priority>& priorities) {
  std::vector<size_t> order(s.pending.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ahead(priorities[a], s.pending[a].submit_time, s.pending[a].id, priorities[b], s.pending[b].submit_time,
                 s.pending[b].id);
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
