// One job lifecycle, two shells (issue 29): the same random events (submits with dependencies and arrays,
// hold, release, cancel, job ends, lost nodes) go through the daemon's Service, which commits every change
// to SQLite before applying it, and through the simulator's VirtualCluster, which applies it at once. After
// every event each shell schedules until a pass changes nothing (the daemon passes after every change), and
// the two tables must hold the same jobs in the same states, on the same GPUs. At the end what a restarted
// daemon loads from the database must equal both.
#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <functional>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

#include "scheduler/daemon/service.hpp"
#include "scheduler/sim/virtual_cluster.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "tests/daemon_client.hpp"
#include "tests/fat_tree.hpp"

namespace railyard {
namespace {

using jobs::JobEvent;
using jobs::JobId;
using jobs::JobState;
using lifecycle::JobRecord;
using lifecycle::JobTable;

daemon::Caller admin() {
  daemon::Caller c;
  c.user = "root";
  c.role = store::Role::kAdmin;
  return c;
}

topology::Cluster small_cluster() { return test_clusters::fat_tree(8, 4); }

// What both shells must agree on, job by job.
std::string describe(const JobTable& t) {
  std::ostringstream o;
  for (const auto& [id, r] : t.jobs()) {
    o << id << ' ' << jobs::to_string(r.state) << " attempt " << r.attempt << " gpus";
    for (auto g : r.gpus) o << ' ' << g;
    o << " exit " << (r.exit_code ? std::to_string(*r.exit_code) : "-") << " start "
      << r.start_time.value_or(-1) << " end " << r.end_time.value_or(-1);
    // A waiting job's reason is the last pass's note, kept in memory only (JobTable::plan_changes).
    if (jobs::is_terminal(r.state)) o << " reason " << r.reason;
    if (const auto* a = t.array(id))
      o << " array " << a->created() << '/' << a->active << '/' << a->completed << '/' << a->failed;
    o << '\n';
  }
  for (topology::NodeId n = 0; n < t.cluster().node_count(); ++n)
    if (t.health(n) != sched::NodeHealth::kUp) o << "node " << n << ' ' << sched::to_string(t.health(n)) << '\n';
  return o.str();
}

// The daemon's shell: a Service on a SQLite file over a loop that runs posted work when told. Delayed work
// (pass pacing, a compact wait's wake-up, the delayed sync) runs once per settle(), whatever its delay: the
// pacing is about wall time, which this test does not model, and a wake-up posted again by the pass it
// ran waits for the next settle().
struct Daemon {
  explicit Daemon(const topology::Cluster& cluster, const std::string& db, const int64_t& now) {
    auto st = store::SqliteStateStore::open(db);
    EXPECT_TRUE(st) << st.error().message;
    daemon::Loop loop{[this](std::function<void()> fn) { work.push_back(std::move(fn)); },
                      [this](std::chrono::milliseconds, std::function<void()> fn) { timers.push_back(std::move(fn)); }};
    svc = std::make_unique<daemon::Service>(cluster, std::move(*st), std::move(loop), [&now] { return now; });
    EXPECT_TRUE(svc->open());
    settle();
  }
  void run_posted() {
    while (!work.empty()) {
      auto fn = std::move(work.front());
      work.pop_front();
      fn();
    }
  }
  void settle() {
    run_posted();
    for (auto& fn : std::exchange(timers, {})) {
      fn();
      run_posted();
    }
  }
  // Passes until one changes nothing; placed jobs are marked running as their agents would report.
  void schedule(int64_t now) {
    for (int round = 0; round < 50; ++round) {
      const std::string before = describe(svc->table());
      svc->request_pass();
      settle();
      store::WriteBatch started;
      for (const auto& [id, r] : svc->table().jobs())
        JobTable::running_changes(started, r, "agent", "running as " + std::to_string(id), now);
      if (!started.empty()) {
        EXPECT_TRUE(svc->commit(std::move(started)));
      }
      settle();
      if (describe(svc->table()) == before) return;
    }
    ADD_FAILURE() << "the daemon's passes did not settle";
  }
  std::deque<std::function<void()>> work;
  std::vector<std::function<void()>> timers;
  std::unique_ptr<daemon::Service> svc;
};

void schedule(sim::VirtualCluster& vc, int64_t now) {
  for (int round = 0; round < 50; ++round) {
    const std::string before = describe(vc.table());
    vc.pass(now);
    if (describe(vc.table()) == before) return;
  }
  ADD_FAILURE() << "the simulator's passes did not settle";
}

// Random events over a small cluster, each applied to both shells.
class Events {
 public:
  Events(uint32_t seed, const topology::Cluster& cluster, const std::string& db)
      : rng_(seed), cluster_(cluster), daemon_(cluster, db, now_), vc_(cluster, sched::PolicyConfig{}) {}

  void run(int steps) {
    for (int i = 0; i < steps && !::testing::Test::HasFatalFailure(); ++i) {
      now_ += pick(1, 900);
      step();
      daemon_.schedule(now_);
      schedule(vc_, now_);
      ASSERT_EQ(describe(daemon_.svc->table()), describe(vc_.table())) << "after step " << i << ": " << last_;
    }
  }
  const JobTable& daemon_table() const { return daemon_.svc->table(); }
  const JobTable& sim_table() const { return vc_.table(); }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(int percent) { return pick(1, 100) <= percent; }
  JobId any_job() {
    const JobId last = vc_.next_id() - 1;
    return last < 1 ? 1 : pick(1, static_cast<int>(last) + 1);  // one past the end: an unknown id
  }

  void step() {
    const int what = pick(1, 100);
    if (what <= 40) return submit();
    if (what <= 55) return act();
    if (what <= 95) return finish();
    lose_node();
  }

  void submit() {
    jobs::JobSpec spec;
    spec.name = "j";
    spec.user = chance(50) ? "ada" : "bob";
    spec.kind = jobs::JobKind::kBatch;
    spec.command = {"true"};
    static constexpr int kGpus[] = {1, 2, 4, 8, 16, 32};
    spec.gpus = kGpus[pick(0, 5)];
    spec.time_limit_s = pick(60, 3600);
    spec.requeue = chance(30);
    if (chance(20)) {
      auto a = jobs::parse_array_spec("0-" + std::to_string(pick(1, 5)) + (chance(50) ? "%2" : ""));
      spec.array = *a;
    }
    if (vc_.next_id() > 1 && chance(40)) {
      const JobId target = pick(1, static_cast<int>(vc_.next_id()) - 1);
      const JobRecord* t = vc_.table().find(target);
      using T = jobs::Dependency::Type;
      const T type = std::array{T::kAfterOk, T::kAfterAny, T::kAfterNotOk}[static_cast<size_t>(pick(0, 2))];
      if (t && t->spec.array && spec.array && chance(50))
        spec.after.push_back({T::kAfterCorr, target, -1});
      else if (t && t->spec.array && chance(50))
        spec.after.push_back({type, target, t->spec.array->index_at(0)});
      else if (type == T::kAfterOk)
        spec.afterok.push_back(target);
      else
        spec.after.push_back({type, target, -1});
    }
    if (auto s = daemon_.svc->prepare(spec, admin()); !s) {
      last_ = "submit refused: " + s.error().message;
      return;
    }
    std::optional<JobId> daemon_id;
    daemon_.svc->submit({spec}, admin(), [&](Result<std::vector<JobId>> ids) {
      ASSERT_TRUE(ids) << ids.error().message;
      daemon_id = ids->front();
    });
    daemon_.settle();
    const JobId sim_id = vc_.submit(spec, now_);
    ASSERT_EQ(daemon_id, sim_id);
    last_ = "submit " + std::to_string(sim_id);
  }

  void act() {
    const JobId id = any_job();
    const JobEvent event = std::array{JobEvent::kCancelled, JobEvent::kHeld, JobEvent::kReleased}[static_cast<size_t>(pick(0, 2))];
    auto d = daemon_.svc->act(id, event, admin());
    daemon_.settle();
    auto s = vc_.act(id, event, now_, "root");
    EXPECT_EQ(d.has_value(), static_cast<bool>(s)) << jobs::to_string(event) << ' ' << id;
    last_ = std::string(jobs::to_string(event)) + ' ' + std::to_string(id);
  }

  // A live job ends: as its agents would report it to the daemon, as its clock says in the simulator.
  void finish() {
    std::vector<JobId> live;
    for (const auto& [id, r] : vc_.table().jobs())
      if (r.state == JobState::kRunning) live.push_back(id);
    if (live.empty()) return;
    const JobId id = live[static_cast<size_t>(pick(0, static_cast<int>(live.size()) - 1))];
    const bool ok = chance(70);
    const JobState end = ok ? JobState::kCompleted : JobState::kFailed;
    store::WriteBatch b;
    JobTable::end_changes(b, *daemon_.svc->table().find(id), end, ok ? 0 : 1, ok ? "" : "ended", "sim", !ok, now_);
    EXPECT_TRUE(daemon_.svc->commit(std::move(b)));
    daemon_.settle();
    EXPECT_TRUE(vc_.finish(id, end, ok ? 0 : 1, now_));
    last_ = std::string(jobs::to_string(end)) + ' ' + std::to_string(id);
  }

  void lose_node() {
    const std::vector<std::string> names{cluster_.node(pick(0, cluster_.node_count() - 1)).name};
    EXPECT_TRUE(daemon_.svc->commit(store::WriteBatch(daemon_.svc->table().nodes_down_changes(names, "lost", now_))));
    daemon_.settle();
    vc_.nodes_down(names, "lost", now_);
    last_ = "node down " + names.front();
  }

  std::mt19937 rng_;
  const topology::Cluster& cluster_;
  int64_t now_ = 1'000'000;
  Daemon daemon_;
  sim::VirtualCluster vc_;
  std::string last_;
};

class LifecycleShells : public ::testing::TestWithParam<uint32_t> {};

TEST_P(LifecycleShells, TheDaemonAndTheSimulatorAgreeEventByEvent) {
  const auto cluster = small_cluster();
  testing::TempDir dir;
  const std::string db = dir.file("state.db");
  std::string sim_state;
  {
    Events events(GetParam(), cluster, db);
    events.run(120);
    if (HasFatalFailure()) return;
    sim_state = describe(events.sim_table());
    // The run must have exercised what it compares (else a seed proves little).
    int ended = 0, arrays = 0, dependent = 0;
    for (const auto& [id, r] : events.sim_table().jobs()) {
      ended += jobs::is_terminal(r.state) ? 1 : 0;
      arrays += r.spec.array ? 1 : 0;
      dependent += r.spec.any_dependency([](const jobs::Dependency&) { return true; }) ? 1 : 0;
    }
    EXPECT_GT(ended, 5);
    EXPECT_GT(arrays, 0);
    EXPECT_GT(dependent, 0);
  }
  // What a restart after the last event loads (before its first pass), from the store alone.
  auto store = store::SqliteStateStore::open(db);
  ASSERT_TRUE(store) << store.error().message;
  auto state = (*store)->load();
  ASSERT_TRUE(state) << state.error().message;
  JobTable restarted(cluster);
  restarted.load(std::move(*state));
  EXPECT_EQ(describe(restarted), sim_state);
}

INSTANTIATE_TEST_SUITE_P(Seeds, LifecycleShells, ::testing::Range(1u, 9u));

}  // namespace
}  // namespace railyard
