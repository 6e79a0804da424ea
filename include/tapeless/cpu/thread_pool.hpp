// A small persistent pool for the CPU batch loop: starting threads every step costs
// tens of microseconds, which is what a mid-size step takes in all. run(n, task)
// calls task(0..n-1), task(0) on the calling thread, and returns when all are done.
// Which thread runs which index never changes the result: the caller splits work by
// index and joins it in index order.
#pragma once

#include <condition_variable>
#include <cstddef>
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
  // (A pointer to the caller's callable and one to a function that calls it, rather
  // than std::function: <functional> alone costs the seed example ~0.1 s of build.)
  template <class Task>
  void run(std::size_t n, const Task& task) {
    if (n <= 1) {
      if (n == 1) task(0);
      return;
    }
    {
      std::lock_guard lock(mutex_);
      context_ = &task;
      call_ = [](const void* context, std::size_t index) { (*static_cast<const Task*>(context))(index); };
      active_ = n;
      pending_ = n - 1;
      ++generation_;
    }
    wake_.notify_all();
    task(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    context_ = nullptr;
  }

 private:
  void work(std::size_t index) {
    std::size_t seen = 0;
    for (;;) {
      const void* context;
      void (*call)(const void*, std::size_t);
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        if (index >= active_) continue;
        context = context_;
        call = call_;
      }
      call(context, index);
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const void* context_ = nullptr;
  void (*call_)(const void*, std::size_t) = nullptr;
  std::size_t active_ = 0, pending_ = 0, generation_ = 0;
  bool stopping_ = false;
};

}  // namespace tl::detail
