#include "scheduler/queue/fairshare.hpp"

#include <cmath>
#include <numbers>

namespace railyard::sched {

void FairShareLedger::decay_to(int64_t now) {
  if (last_ == INT64_MIN) {
    last_ = now;
    return;
  }
  if (now <= last_) return;
  const double factor = std::exp2(-static_cast<double>(now - last_) / half_life_s_);
  for (auto& [who, used] : users_) used *= factor;
  for (auto& [who, used] : projects_) used *= factor;
  last_ = now;
}

void FairShareLedger::add(const std::string& user, const std::string& project, double gpu_seconds, int64_t now) {
  decay_to(now);
  if (now < last_) gpu_seconds *= std::exp2(-static_cast<double>(last_ - now) / half_life_s_);
  users_[user] += gpu_seconds;
  projects_[project] += gpu_seconds;
}

double FairShareLedger::decayed_use(int gpus, int64_t start, int64_t end) const {
  if (end <= start || gpus <= 0) return 0;
  // The integral of gpus * 2^(-(end - t) / H) over [start, end].
  const double h = half_life_s_;
  return gpus * h / std::numbers::ln2 * (1 - std::exp2(-static_cast<double>(end - start) / h));
}

}  // namespace railyard::sched
