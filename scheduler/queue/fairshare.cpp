#include "scheduler/queue/fairshare.hpp"

#include <cmath>

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
  users_[user] += gpu_seconds;
  projects_[project] += gpu_seconds;
}

}  // namespace railyard::sched
