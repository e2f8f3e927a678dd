#include "scheduler/daemon/worker_thread.hpp"

#include <utility>

namespace railyard::daemon {

WorkerThread::WorkerThread() : thread_([this] { work_loop(); }) {}

WorkerThread::~WorkerThread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void WorkerThread::run(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(fn));
  }
  wake_.notify_one();
}

Executor WorkerThread::executor() {
  return [this](std::function<void()> fn) { run(std::move(fn)); };
}

void WorkerThread::work_loop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

}  // namespace railyard::daemon
