// Quotas and fair share in the daemon's Service: quotas an admin sets bound the GPUs a user's or project's
// jobs hold, survive a restart and can be lifted; passes order jobs by fair-share usage rebuilt from the runs.
#include <gtest/gtest.h>

#include <cmath>

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
  EXPECT_EQ(w.svc->table().user_quotas().at("ada"), 16);
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
  EXPECT_TRUE(w.svc->table().user_quotas().empty());
  auto again = w.svc->set_quota({QuotaRecord::Kind::kUser, "ada", std::nullopt}, kRoot);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
  w.reopen();
  EXPECT_TRUE(w.svc->table().user_quotas().empty()) << "a lifted quota stays lifted";
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

  for (const QuotaRecord& bad : {QuotaRecord{QuotaRecord::Kind::kUser, "", 8},
                                 QuotaRecord{QuotaRecord::Kind::kUser, "ada\n", 8},
                                 QuotaRecord{QuotaRecord::Kind::kUser, "ada", -1},
                                 QuotaRecord{QuotaRecord::Kind::kProject, "vision", 1'000'001}}) {
    auto s = w.svc->set_quota(bad, kRoot);
    ASSERT_FALSE(s) << bad.name;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument) << s.error().message;
  }
  EXPECT_EQ(w.svc->table().project_quotas().at("vision"), 8);
  EXPECT_EQ(w.svc->table().user_quotas().size(), 0u);
}

// Ada used the whole SU for ten hours; then ada and bob each ask for it while carol holds it. When carol's
// job ends, bob's goes first although ada's came first, and only with fair share tracked.
class FairShare : public ::testing::TestWithParam<bool> {};

TEST_P(FairShare, AUserWhoUsedTheClusterGoesAfterOneWhoDidNot) {
  const bool tracked = GetParam();
  ArrayWorld w;
  w.reopen([&](daemon::Service& s) {
    if (tracked) s.track_usage(7 * 86400.0);
  });
  const daemon::Caller bob{"bob", store::Role::kUser}, carol{"carol", store::Role::kUser};
  const jobs::JobId used = submit_as(w, w.ada, gpus(256));
  ASSERT_EQ(w.job(used).state, JobState::kStarting);
  w.now += 36000;
  w.end({used}, JobState::kCompleted);
  const jobs::JobId filler = submit_as(w, carol, gpus(256));
  ASSERT_EQ(w.job(filler).state, JobState::kStarting);
  w.now += 10;
  const jobs::JobId first = submit_as(w, w.ada, gpus(256));
  w.now += 10;
  const jobs::JobId second = submit_as(w, bob, gpus(256));
  w.now += 1000;
  const auto usage = w.svc->table().usage_at(w.now);
  if (tracked) {
    sched::FairShareLedger ledger(7 * 86400.0);
    const double ada = ledger.decayed_use(256, 5000, 41000) * std::exp2(-1020.0 / (7 * 86400));
    EXPECT_NEAR(usage.users.at("ada"), ada, ada * 1e-9);
    EXPECT_NEAR(usage.users.at("carol"), ledger.decayed_use(256, 41000, 42020), 1e-6) << "running: so far";
    EXPECT_EQ(usage.users.count("bob"), 0u);
  } else {
    EXPECT_TRUE(usage.users.empty());
  }
  w.end({filler}, JobState::kCompleted);
  EXPECT_EQ(w.job(tracked ? second : first).state, JobState::kStarting);
  EXPECT_EQ(w.job(tracked ? first : second).state, JobState::kPending);

  // A restart rebuilds the usage from the runs it loads.
  const auto before = w.svc->table().usage_at(w.now);
  w.reopen([&](daemon::Service& s) {
    if (tracked) s.track_usage(7 * 86400.0);
  });
  const auto after = w.svc->table().usage_at(w.now);
  ASSERT_EQ(after.users.size(), before.users.size());
  for (const auto& [who, u] : before.users) EXPECT_NEAR(after.users.at(who), u, u * 1e-9) << who;
}

INSTANTIATE_TEST_SUITE_P(WithAndWithout, FairShare, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Tracked" : "Untracked"; });

}  // namespace
}  // namespace railyard
