// Quotas and fair share in the daemon's Service: quotas an admin sets bound the GPUs a user's or project's
// jobs hold, survive a restart and can be lifted; passes order jobs by fair-share usage, rebuilt from the
// runs, weighed by the shares an admin sets.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/daemon/service.hpp"
#include "tests/service_harness.hpp"

namespace railyard {
namespace {

using lifecycle::QuotaRecord;
using namespace service_test;  // NOLINT(google-build-using-namespace): the shared harness

const daemon::Caller kRoot{"root", store::Role::kAdmin};

jobs::JobSpec gpus(int n, const std::string& project = "") {
  jobs::JobSpec spec;
  spec.gpus = n;
  spec.command = {"true"};
  spec.project = project;
  return spec;
}

jobs::JobId submit_as(ArrayWorld& w, const daemon::Caller& who, jobs::JobSpec spec) {
  if (auto s = w.svc->prepare(spec, who); !s) {
    ADD_FAILURE() << s.error().message;
    return 0;
  }
  jobs::JobId id = 0;
  w.svc->submit({spec}, who, [&](Result<std::vector<jobs::JobId>> ids) {
    if (ids) id = ids->front();
  });
  w.loop.run();
  return id;
}

TEST(Quotas, AJobPastItsUsersQuotaWaitsUntilTheQuotaIsLiftedAndTheQuotaSurvivesARestart) {
  ArrayWorld w;
  w.reopen();
  const QuotaRecord ada16{QuotaRecord::Kind::kUser, "ada", 16};
  auto refused = w.svc->set_quota(ada16, w.ada);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kPermission);
  ASSERT_TRUE(w.svc->set_quota(ada16, kRoot));
  w.loop.run();
  const jobs::JobId a = w.submit(gpus(8)), b = w.submit(gpus(8)), c = w.submit(gpus(8));
  EXPECT_EQ(w.job(a).state, JobState::kStarting);
  EXPECT_EQ(w.job(b).state, JobState::kStarting);
  EXPECT_EQ(w.job(c).state, JobState::kPending);
  EXPECT_EQ(w.job(c).reason, "quota_user: quota of user ada reached (16 of 16 GPUs in use, needs 8)");

  w.reopen();  // a restart: the quota is read back, and the job still waits
  ASSERT_NE(w.svc->table().quota(QuotaRecord::Kind::kUser, "ada"), nullptr);
  EXPECT_EQ(w.svc->table().quota(QuotaRecord::Kind::kUser, "ada")->gpus, 16);
  w.svc->request_pass();
  w.loop.run();
  EXPECT_EQ(w.job(c).state, JobState::kPending);
  EXPECT_NE(w.job(c).reason.find("quota of user ada reached"), std::string::npos) << w.job(c).reason;

  // Raised: the waiting job fits, and starts with the pass the change requests.
  ASSERT_TRUE(w.svc->set_quota({QuotaRecord::Kind::kUser, "ada", 24}, kRoot));
  w.loop.run();
  EXPECT_EQ(w.job(c).state, JobState::kStarting);
  const jobs::JobId d = w.submit(gpus(8));
  EXPECT_EQ(w.job(d).state, JobState::kPending);
  ASSERT_TRUE(w.svc->set_quota({QuotaRecord::Kind::kUser, "ada", std::nullopt}, kRoot));
  w.loop.run();
  EXPECT_EQ(w.job(d).state, JobState::kStarting);
  EXPECT_TRUE(w.svc->table().quotas().empty());
  auto again = w.svc->set_quota({QuotaRecord::Kind::kUser, "ada", std::nullopt}, kRoot);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
  w.reopen();
  EXPECT_TRUE(w.svc->table().quotas().empty()) << "a lifted quota stays lifted";
  EXPECT_EQ(count_rows(w.dir.file("a.db"), "SELECT COUNT(*) FROM events WHERE subject = 'quota:user:ada'"), 3);
}

TEST(Quotas, AProjectQuotaBoundsEveryUserOfTheProjectAndBadQuotasAreRefused) {
  ArrayWorld w;
  w.reopen();
  ASSERT_TRUE(w.svc->set_quota({QuotaRecord::Kind::kProject, "vision", 8}, kRoot));
  const daemon::Caller bob{"bob", store::Role::kUser};
  const jobs::JobId a = submit_as(w, w.ada, gpus(8, "vision"));
  const jobs::JobId b = submit_as(w, bob, gpus(8, "vision"));
  const jobs::JobId other = submit_as(w, bob, gpus(8, "speech"));
  EXPECT_EQ(w.job(a).state, JobState::kStarting);
  EXPECT_EQ(w.job(b).state, JobState::kPending);
  EXPECT_EQ(w.job(b).reason, "quota_project: quota of project vision reached (8 of 8 GPUs in use, needs 8)");
  EXPECT_EQ(w.job(other).state, JobState::kStarting);
  EXPECT_EQ(w.svc->table().gpus_in_use().projects.at("vision"), 8);
  // An ended allocation whose kill is not confirmed yet still holds its GPUs, and counts until released.
  const std::string alloc = std::to_string(a) + ".1";
  w.svc->table().hold_gpus({alloc, a, w.job(a).gpus, w.job(a).nodes});
  w.end({a}, JobState::kCompleted);
  EXPECT_EQ(w.svc->table().gpus_in_use().projects.at("vision"), 8) << "a draining allocation counts";
  EXPECT_EQ(w.job(b).state, JobState::kPending);
  w.svc->table().release_gpus(alloc);
  w.svc->request_pass();
  w.loop.run();
  EXPECT_EQ(w.job(b).state, JobState::kStarting);

  for (const QuotaRecord& bad : {QuotaRecord{QuotaRecord::Kind::kUser, "", 8},
                                 QuotaRecord{QuotaRecord::Kind::kUser, "ada\n", 8},
                                 QuotaRecord{QuotaRecord::Kind::kUser, "ada", -1},
                                 QuotaRecord{QuotaRecord::Kind::kProject, "vision", 1'000'001},
                                 QuotaRecord{QuotaRecord::Kind::kUser, "ada", 8, 0},
                                 QuotaRecord{QuotaRecord::Kind::kUser, "ada", std::nullopt, -2},
                                 QuotaRecord{QuotaRecord::Kind::kUser, "ada", std::nullopt, std::nan("")},
                                 QuotaRecord{QuotaRecord::Kind::kUser, "ada", std::nullopt, 2e6}}) {
    auto s = w.svc->set_quota(bad, kRoot);
    ASSERT_FALSE(s) << bad.name;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument) << s.error().message;
  }
  ASSERT_EQ(w.svc->table().quotas().size(), 1u);
  EXPECT_EQ(w.svc->table().quota(QuotaRecord::Kind::kProject, "vision")->gpus, 8);
}

// Ada used the whole SU for ten hours, then bob for two; then ada and bob each ask for it again while carol
// holds it. When carol's job ends, ada's goes first (it came first) without fair share; with it, bob's goes
// first, having used less; and ada's again once an admin gives ada 20 shares to bob's 1. All in one project,
// so only the users' factors differ.
struct FairShareCase {
  const char* name;
  bool tracked;
  double ada_shares;
  bool ada_first;
};

class FairShare : public ::testing::TestWithParam<FairShareCase> {};

TEST_P(FairShare, UsageAndSharesOrderTheQueue) {
  const FairShareCase c = GetParam();
  constexpr double kHalfLife = 7 * 86400.0;
  ArrayWorld w;
  const auto open = [&](daemon::Service& s) {
    if (c.tracked) s.track_usage(kHalfLife);
  };
  w.reopen(open);
  const daemon::Caller bob{"bob", store::Role::kUser}, carol{"carol", store::Role::kUser};
  const auto run_for = [&](const daemon::Caller& who, int64_t seconds) {
    const jobs::JobId id = submit_as(w, who, gpus(256, "lab"));
    ASSERT_EQ(w.job(id).state, JobState::kStarting);
    w.now += seconds;
    w.end({id}, JobState::kCompleted);
  };
  run_for(w.ada, 36000);  // t = 5000 .. 41000
  run_for(bob, 7200);     // t = 41000 .. 48200
  const jobs::JobId filler = submit_as(w, carol, gpus(256, "lab"));
  ASSERT_EQ(w.job(filler).state, JobState::kStarting);
  w.now += 10;
  const jobs::JobId ada = submit_as(w, w.ada, gpus(256, "lab"));
  w.now += 10;
  const jobs::JobId bobs = submit_as(w, bob, gpus(256, "lab"));
  if (c.ada_shares != 1) {
    ASSERT_TRUE(w.svc->set_quota({QuotaRecord::Kind::kUser, "ada", std::nullopt, c.ada_shares}, kRoot));
  }
  w.now += 1000;
  const auto usage = w.svc->table().usage_at(w.now);
  if (c.tracked) {
    const sched::FairShareLedger ledger(kHalfLife);
    const auto decayed = [&](int64_t start, int64_t end) {
      return ledger.decayed_use(256, start, end) * std::exp2(-static_cast<double>(w.now - end) / kHalfLife);
    };
    EXPECT_NEAR(usage.users.at("ada"), decayed(5000, 41000), 1e-3);
    EXPECT_NEAR(usage.users.at("bob"), decayed(41000, 48200), 1e-3);
    EXPECT_NEAR(usage.users.at("carol"), decayed(48200, w.now), 1e-3) << "running: so far";
  } else {
    EXPECT_TRUE(usage.users.empty());
  }
  w.end({filler}, JobState::kCompleted);
  EXPECT_EQ(w.job(c.ada_first ? ada : bobs).state, JobState::kStarting);
  EXPECT_EQ(w.job(c.ada_first ? bobs : ada).state, JobState::kPending);

  // A restart rebuilds the usage from the runs it loads.
  const auto before = w.svc->table().usage_at(w.now);
  w.reopen(open);
  const auto after = w.svc->table().usage_at(w.now);
  if (c.ada_shares != 1) {
    ASSERT_NE(w.svc->table().quota(QuotaRecord::Kind::kUser, "ada"), nullptr);
    EXPECT_EQ(w.svc->table().quota(QuotaRecord::Kind::kUser, "ada")->shares, c.ada_shares);
  }
  ASSERT_EQ(after.users.size(), before.users.size());
  for (const auto& [who, u] : before.users) EXPECT_NEAR(after.users.at(who), u, u * 1e-9) << who;
}

// Running jobs count what they used so far, each from its own start: overlapping runs of one user in two
// projects, one ended between, a restart, and a start 40 half-lives later (which moves the table's origin for
// the running sums) each give the sum of every run's decayed use.
TEST(FairShareUsage, RunningJobsCountEachRunFromItsStart) {
  constexpr double kHalfLife = 3600;
  ArrayWorld w;
  const auto open = [&](daemon::Service& s) { s.track_usage(kHalfLife); };
  w.reopen(open);
  const sched::FairShareLedger ledger(kHalfLife);
  struct Run {
    jobs::JobId id;
    int gpus;
    std::string project;
    int64_t start;
    std::optional<int64_t> end;
  };
  std::vector<Run> runs;
  const auto start = [&](int n, const std::string& project) {
    const jobs::JobId id = submit_as(w, w.ada, gpus(n, project));
    ASSERT_EQ(w.job(id).state, JobState::kStarting);
    runs.push_back({id, n, project, w.now, std::nullopt});
  };
  const auto expect_usage = [&](const std::string& when) {
    double ada = 0;
    std::map<std::string, double> projects;
    for (const Run& r : runs) {
      const int64_t end = r.end.value_or(w.now);
      const double used =
          ledger.decayed_use(r.gpus, r.start, end) * std::exp2(-static_cast<double>(w.now - end) / kHalfLife);
      ada += used;
      projects[r.project] += used;
    }
    const auto usage = w.svc->table().usage_at(w.now);
    EXPECT_NEAR(usage.users.at("ada"), ada, ada * 1e-9) << when;
    for (const auto& [p, used] : projects)
      EXPECT_NEAR(usage.projects.at(p), used, used * 1e-9) << when << ": " << p;
  };
  start(8, "vision");
  w.now += 600;
  start(16, "speech");
  w.now += 1200;
  start(8, "vision");
  w.now += 300;
  expect_usage("three running");
  w.end({runs[1].id}, JobState::kCompleted);
  runs[1].end = w.now;
  w.now += 900;
  expect_usage("one ended");
  w.reopen(open);
  expect_usage("after a restart");
  w.now += static_cast<int64_t>(40 * kHalfLife);
  start(24, "speech");
  w.now += 60;
  expect_usage("a start 40 half-lives on");
  w.end({runs[0].id, runs[3].id}, JobState::kCompleted);
  runs[0].end = runs[3].end = w.now;
  w.now += 60;
  expect_usage("two more ended");
}

INSTANTIATE_TEST_SUITE_P(Cases, FairShare,
                         ::testing::Values(FairShareCase{"Untracked", false, 1, true},
                                           FairShareCase{"Tracked", true, 1, false},
                                           FairShareCase{"TrackedAdaHas20Shares", true, 20, true}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace railyard
