// Decayed usage per user and project, as the fair-share factor needs it. Time is passed in, never read.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace railyard::sched {

class FairShareLedger {
 public:
  explicit FairShareLedger(double half_life_s = 7 * 24 * 3600.0) : half_life_s_(half_life_s) {}

  // Adds GPU-seconds used, as of `now` (decays what was there first).
  void add(const std::string& user, const std::string& project, double gpu_seconds, int64_t now);
  // Decays every balance to `now`. Calling it with an earlier time than before does nothing.
  void decay_to(int64_t now);

  const std::unordered_map<std::string, double>& users() const { return users_; }
  const std::unordered_map<std::string, double>& projects() const { return projects_; }

 private:
  double half_life_s_;
  int64_t last_ = INT64_MIN;
  std::unordered_map<std::string, double> users_;
  std::unordered_map<std::string, double> projects_;
};

}  // namespace railyard::sched
