// Test harness for the daemon's Service (scheduler/daemon/service.hpp), no sockets: a loop that runs posted
// work only when told, a one-SU cluster's service over a real SQLite file (ArrayWorld), and a row count read
// through a connection of its own. Shared by daemon_store_test.cpp, daemon_lifecycle_test.cpp and the
// daemon_service_*_test.cpp files.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/daemon/service.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "tests/daemon_client.hpp"
#include "tests/sqlite_rows.hpp"
#include "topology/generator.hpp"

namespace railyard::service_test {

using testing::count_rows;

using jobs::JobState;
using store::JobRecord;
using store::SqliteStateStore;

// A loop that runs posted work only when told, so a test controls what arrives "together".
struct FakeLoop {
  std::deque<std::function<void()>> work;
  void run() {
    while (!work.empty()) {
      auto fn = std::move(work.front());
      work.pop_front();
      fn();
    }
  }
};

// A one-SU cluster, a service on a fake loop over a database that outlives it (reopen() is a restart).
struct ArrayWorld {
  testing::TempDir dir;
  Result<topology::Cluster> cluster = topology::generate_superpod("dgx-h100-superpod", 1);
  FakeLoop loop;
  std::unique_ptr<daemon::Service> svc;
  int64_t now = 5000;
  const daemon::Caller ada{"ada", store::Role::kUser};

  // `before_open`: what a test sets on the new service before open() (a submit committer).
  void reopen(const std::function<void(daemon::Service&)>& before_open = {}) {
    svc.reset();
    loop.work.clear();
    auto st = SqliteStateStore::open(dir.file("a.db"));
    ASSERT_TRUE(st);
    daemon::Loop fake{
        [this](std::function<void()> fn) { loop.work.push_back(std::move(fn)); },
        [this](std::chrono::milliseconds, std::function<void()> fn) { loop.work.push_back(std::move(fn)); }};
    svc =
        std::make_unique<daemon::Service>(*cluster, std::move(*st), std::move(fake), [this] { return now; });
    if (before_open) before_open(*svc);
    ASSERT_TRUE(svc->open());
    loop.run();
  }
  jobs::JobId submit(jobs::JobSpec spec) {
    if (auto s = svc->prepare(spec, ada); !s) {
      ADD_FAILURE() << s.error().message;
      return 0;
    }
    jobs::JobId id = 0;
    svc->submit({spec}, ada, [&](Result<std::vector<jobs::JobId>> ids) {
      if (ids) id = ids->front();
    });
    loop.run();
    return id;
  }
  jobs::JobId submit_array(const std::string& array, int gpus = 8) {
    jobs::JobSpec spec;
    spec.gpus = gpus;
    spec.command = {"true"};
    spec.array = jobs::parse_array_spec(array).value();
    return submit(spec);
  }
  const JobRecord& job(jobs::JobId id) { return *svc->table().find(id); }
  const daemon::ArrayProgress& progress(jobs::JobId id) { return *svc->table().array(id); }
  std::vector<jobs::JobId> tasks(jobs::JobId array) { return progress(array).tasks; }
  // Ends tasks as the agent hub would (one commit), then lets the passes run.
  void end(const std::vector<jobs::JobId>& ids, JobState state, std::optional<int> exit_code = {}) {
    store::WriteBatch b;
    b.durability = store::Durability::kWritten;
    for (jobs::JobId id : ids) {
      JobRecord r = job(id);
      r.state = state;
      r.end_time = now;
      r.exit_code = exit_code;
      b.updates.push_back(r);
    }
    ASSERT_TRUE(svc->commit(b));
    loop.run();
  }
  std::vector<int> indexes(jobs::JobId array) {
    std::vector<int> out;
    for (jobs::JobId t : tasks(array)) out.push_back(job(t).spec.array_task);
    return out;
  }
  size_t count(jobs::JobId array, JobState state) {
    size_t n = 0;
    for (jobs::JobId t : tasks(array)) n += job(t).state == state;
    return n;
  }
};

}  // namespace railyard::service_test
