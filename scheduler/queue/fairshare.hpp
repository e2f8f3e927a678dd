// Decayed usage per user and project, as the fair-share factor needs it. Time is passed in, never read.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace railyard::sched {

class FairShareLedger {
 public:
  explicit FairShareLedger(double half_life_s = 7 * 24 * 3600.0) : half_life_s_(half_life_s) {}

  // Adds GPU-seconds used, valued as of `now`: decays what was there to `now` first, or, for a `now` earlier
  // than the ledger's time, decays the amount to the ledger's time.
  void add(const std::string& user, const std::string& project, double gpu_seconds, int64_t now);
  // Decays every balance to `now`. Calling it with an earlier time than before does nothing.
  void decay_to(int64_t now);
  // The time the balances are valued at (INT64_MIN before the first add or decay_to).
  int64_t as_of() const { return last_; }
  double half_life_s() const { return half_life_s_; }
  // The GPU-seconds of `gpus` GPUs held from `start` to `end`, each second decayed to `end` by this ledger's
  // half-life: what add() takes for a run that ended at `end`, and what a running one has used so far.
  double decayed_use(int gpus, int64_t start, int64_t end) const;

  const std::unordered_map<std::string, double>& users() const { return users_; }
  const std::unordered_map<std::string, double>& projects() const { return projects_; }

 private:
  double half_life_s_;
  int64_t last_ = INT64_MIN;
  std::unordered_map<std::string, double> users_;
  std::unordered_map<std::string, double> projects_;
};

}  // namespace railyard::sched
