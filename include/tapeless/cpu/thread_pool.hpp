// A small persistent pool for the CPU batch loop: starting threads every step costs
// tens of microseconds, which is what a mid-size step takes in all. run(n, task)
// calls task(0..n-1), task(0) on the calling thread, and returns when all are done.
// Which thread runs which index never changes the result: the caller splits work by
// index and joins it in index order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tl::detail {

class thread_pool {
 public:
  explicit thread_pool(std::size_t workers) {
    for (std::size_t w = 0; w < workers; ++w) threads_.emplace_back([this, w] { work(w + 1); });
  }
  ~thread_pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  std::size_t size() const { return threads_.size() + 1; }

  // n <= size(). Not reentrant: one run at a time (the batch loop is not nested).
  void run(std::size_t n, const std::function<void(std::size_t)>& task) {
    if (n <= 1) {
      if (n == 1) task(0);
      return;
    }
    {
      std::lock_guard lock(mutex_);
      task_ = &task;
      active_ = n;
      pending_ = n - 1;
      ++generation_;
    }
    wake_.notify_all();
    task(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    task_ = nullptr;
  }

 private:
  void work(std::size_t index) {
    std::size_t seen = 0;
    for (;;) {
      const std::function<void(std::size_t)>* task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        if (index >= active_) continue;
        task = task_;
      }
      (*task)(index);
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t)>* task_ = nullptr;
  std::size_t active_ = 0, pending_ = 0, generation_ = 0;
  bool stopping_ = false;
};

}  // namespace tl::detail
