// The daemon's one worker-thread type: the pass, the submit commit, the delayed sync and the log's
// checkpoints each run on one of these, off the event loop.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace railyard::daemon {

// Runs its argument, on any thread, once; may return before it ran.
using Executor = std::function<void(std::function<void()>)>;

// A thread that runs posted work in order, one task at a time. The destructor drops the work not started
// yet, waits for the task running and joins.
class WorkerThread {
 public:
  WorkerThread();
  ~WorkerThread();
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  void run(std::function<void()> fn);
  // run() as an Executor; valid while this thread lives.
  Executor executor();

 private:
  void work_loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace railyard::daemon
