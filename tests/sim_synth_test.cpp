// Synthetic traces (scheduler/sim/synth.hpp) and what the simulator does with them: offered load as asked,
// deterministic, readable back from CSV, and the same placements with and without the core's search
// shortcuts (PolicyConfig::search_shortcuts).
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "scheduler/sim/simulator.hpp"
#include "scheduler/sim/synth.hpp"
#include "scheduler/sim/trace.hpp"
#include "tests/fat_tree.hpp"

namespace railyard::sim {
namespace {

using test_clusters::fat_tree;

SynthSpec spec_of(std::string_view text) {
  auto s = parse_synth_spec(text);
  EXPECT_TRUE(s) << s.error().message;
  return s ? *s : SynthSpec{};
}

TEST(Synth, OfferedLoadIsWhatWasAsked) {
  for (double load : {0.5, 1.0, 1.2}) {
    SynthSpec s = spec_of("jobs=20000,seed=3");
    s.load = load;
    auto jobs = synthesize(s, 1024);
    ASSERT_TRUE(jobs);
    double work = 0;
    for (const TraceJob& j : *jobs) work += j.duration_s * j.gpus;
    const double span = jobs->back().submit_s - jobs->front().submit_s;
    EXPECT_NEAR(work / (1024 * span), load, 0.03 * load) << "load " << load;
  }
}

TEST(Synth, SizesFollowTheMixAndDurationsStayInBounds) {
  auto jobs = synthesize(spec_of("jobs=10000,mix=1:1/64:3,min=100,max=5000,median=1000"), 512);
  ASSERT_TRUE(jobs);
  std::map<int, int> sizes;
  for (const TraceJob& j : *jobs) {
    ++sizes[j.gpus];
    EXPECT_GE(j.duration_s, 100);
    EXPECT_LE(j.duration_s, 5000);
  }
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_NEAR(sizes[64] / 10000.0, 0.75, 0.02);
  for (size_t i = 1; i < jobs->size(); ++i) EXPECT_LE((*jobs)[i - 1].submit_s, (*jobs)[i].submit_s);
}

TEST(Synth, SameSpecSameTraceAndOtherSeedOtherTrace) {
  auto a = synthesize(spec_of("jobs=500,seed=9"), 1024), b = synthesize(spec_of("jobs=500,seed=9"), 1024);
  auto c = synthesize(spec_of("jobs=500,seed=10"), 1024);
  ASSERT_TRUE(a && b && c);
  std::ostringstream ta, tb, tc;
  write_trace_csv(ta, *a);
  write_trace_csv(tb, *b);
  write_trace_csv(tc, *c);
  EXPECT_EQ(ta.str(), tb.str());
  EXPECT_NE(ta.str(), tc.str());
}

TEST(Synth, CsvReadsBackAsTheSameJobs) {
  auto jobs = synthesize(spec_of("jobs=300,seed=2"), 1024);
  ASSERT_TRUE(jobs);
  std::ostringstream out;
  write_trace_csv(out, *jobs);
  std::istringstream in(out.str());
  auto back = read_trace(in, {});
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->jobs.size(), jobs->size());
  for (size_t i = 0; i < jobs->size(); ++i) {
    EXPECT_EQ(back->jobs[i].job_id, (*jobs)[i].job_id);
    EXPECT_EQ(back->jobs[i].submit_s, (*jobs)[i].submit_s);
    EXPECT_EQ(back->jobs[i].duration_s, (*jobs)[i].duration_s);
    EXPECT_EQ(back->jobs[i].gpus, (*jobs)[i].gpus);
  }
}

// high / scavenger mark jobs above / up to 8 GPUs with their probability, from a generator of their own: the
// jobs are those of the same spec without them, and the QoS reads back from the CSV.
TEST(Synth, QosKeysMarkJobsAndChangeNothingElse) {
  auto plain = synthesize(spec_of("jobs=2000,seed=4"), 1024);
  auto marked = synthesize(spec_of("jobs=2000,seed=4,high=0.5,scavenger=1"), 1024);
  ASSERT_TRUE(plain && marked);
  int big = 0, high = 0;
  for (size_t i = 0; i < plain->size(); ++i) {
    const TraceJob &p = (*plain)[i], &m = (*marked)[i];
    EXPECT_EQ(p.qos, jobs::Qos::kNormal);
    ASSERT_EQ(m.gpus, p.gpus);
    ASSERT_EQ(m.submit_s, p.submit_s);
    ASSERT_EQ(m.duration_s, p.duration_s);
    ASSERT_EQ(m.user, p.user);
    if (m.gpus <= 8) {
      EXPECT_EQ(m.qos, jobs::Qos::kScavenger) << m.job_id;
    } else {
      ++big;
      EXPECT_NE(m.qos, jobs::Qos::kScavenger) << m.job_id;
      high += m.qos == jobs::Qos::kHigh;
    }
  }
  ASSERT_GT(big, 300);
  EXPECT_NEAR(static_cast<double>(high) / big, 0.5, 0.1);
  std::ostringstream out;
  write_trace_csv(out, *marked);
  std::istringstream in(out.str());
  auto back = read_trace(in, {});
  ASSERT_TRUE(back) << back.error().message;
  for (size_t i = 0; i < marked->size(); ++i) EXPECT_EQ(back->jobs[i].qos, (*marked)[i].qos);
  EXPECT_FALSE(parse_synth_spec("high=1.5"));
  EXPECT_FALSE(parse_synth_spec("scavenger=-0.1"));
  EXPECT_EQ(to_string(spec_of("high=0.25")).find("scavenger"), std::string::npos);
  EXPECT_NE(to_string(spec_of("high=0.25")).find(",high=0.25"), std::string::npos);
}

TEST(Synth, BadSpecsSayWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"jobs=0", "jobs"},        {"load=-1", "load"},           {"colour=red", "unknown key"},
      {"mix=8", "GPUS:WEIGHT"},  {"mix=8:0", "weight above 0"}, {"min=10,max=5", "min <= max"},
      {"jobs", "KEY=VALUE"},     {"sigma=x", "not a number"},
  };
  for (auto [text, words] : cases) {
    auto s = parse_synth_spec(text);
    ASSERT_FALSE(s) << text;
    EXPECT_NE(s.error().message.find(words), std::string::npos) << text << ": " << s.error().message;
  }
  auto too_big = synthesize(spec_of("mix=256:1"), 128);
  ASSERT_FALSE(too_big);
  EXPECT_NE(too_big.error().message.find("256-GPU"), std::string::npos) << too_big.error().message;
}

TEST(Synth, SpecTextRoundTrips) {
  const SynthSpec s = spec_of("jobs=77,load=0.8,mix=1:2/16:1.5,median=600,sigma=1,min=10,max=900,users=3,seed=5");
  const SynthSpec back = spec_of(to_string(s));
  EXPECT_EQ(to_string(back), to_string(s));
  EXPECT_EQ(back.mix, s.mix);
  EXPECT_EQ(back.jobs, 77);
}

// A loaded mixed workload on a small tree (4 leaf groups of 8 nodes): compact waits and their reservation
// searches run in most passes. The shortcuts must not change a single placement.
TEST(Synth, SearchShortcutsChangeNoPlacement) {
  const auto cluster = fat_tree(32, 8);
  auto jobs = synthesize(spec_of("jobs=1500,load=1.1,mix=1:3/8:3/16:2/32:2/64:1,seed=4"), cluster.gpu_count());
  ASSERT_TRUE(jobs);
  auto with = policy_by_name("railyard"), without = policy_by_name("railyard");
  ASSERT_TRUE(with && without);
  without->config.search_shortcuts = false;
  const SimResult a = simulate(cluster, *jobs, *with, {}), b = simulate(cluster, *jobs, *without, {});
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  int scattered_waits = 0;
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    const JobResult &x = a.jobs[i], &y = b.jobs[i];
    EXPECT_EQ(x.first_start, y.first_start) << "job " << x.id;
    EXPECT_EQ(x.end, y.end) << "job " << x.id;
    EXPECT_EQ(x.leaves_spanned, y.leaves_spanned) << "job " << x.id;
    scattered_waits += x.nodes > 1 && x.first_start > x.submit;
  }
  EXPECT_GT(scattered_waits, 50) << "the trace must make multi-node jobs wait, or it tests nothing";
  EXPECT_EQ(a.passes, b.passes);
}

// slurm-tree is railyard's placement without the compact wait: on a loaded trace railyard keeps more
// multi-node jobs on their fewest leaf groups.
TEST(Synth, SlurmTreeNeverWaitsForACompactPlacement) {
  const auto cluster = fat_tree(32, 8);
  auto jobs = synthesize(spec_of("jobs=1500,load=1.0,mix=1:3/8:3/16:2/32:2/64:1,seed=6"), cluster.gpu_count());
  ASSERT_TRUE(jobs);
  auto slurm = policy_by_name("slurm-tree"), railyard = policy_by_name("railyard");
  ASSERT_TRUE(slurm && railyard);
  EXPECT_EQ(slurm->config.compact_wait_s, 0);
  auto at_minimum = [&](const SimResult& r) {
    int multi = 0, minimum = 0;
    for (const JobResult& j : r.jobs)
      if (j.nodes > 1) ++multi, minimum += j.leaves_spanned == j.min_leaves;
    return static_cast<double>(minimum) / multi;
  };
  const double s = at_minimum(simulate(cluster, *jobs, *slurm, {}));
  const double r = at_minimum(simulate(cluster, *jobs, *railyard, {}));
  EXPECT_GT(r, s) << "railyard " << r << ", slurm-tree " << s;
  EXPECT_GE(r, 0.95);
}

}  // namespace
}  // namespace railyard::sim
