// A small persistent pool for the CPU batch loop: starting threads every step costs
// tens of microseconds, which is what a mid-size step takes in all. run(n, task)
// calls task(0..n-1), task(0) on the calling thread, and returns when all are done.
// Which thread runs which index never changes the result: the caller splits work by
// index and joins it in index order.
//
// Waiting spins briefly before it sleeps: a training loop calls run() once a step,
// and a worker that slept on the condition variable took ~60 µs to wake on the
// development machine (a VM), against well under a microsecond for one still
// spinning. The spin is bounded (spin_time), so an idle pool costs no CPU.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace tl::detail {

// How long a waiting thread spins before it sleeps; docs/performance.md, "CPU threads".
inline constexpr std::chrono::microseconds spin_time{200};

// Spins until done() or spin_time has passed; true when done. It yields between
// rounds: when the machine is busier than its cores (other processes; the tests'
// pools of more threads than cores), the thread it waits for may be queued on this
// very core, and a spin that never yields would only delay it (measured: every
// run took the whole spin time, twice). No pause instruction: in the development VM
// it made an empty two-thread run take 3.4 us instead of 1.5-1.9 (a hypervisor's
// pause-loop exits), and the spin is too short to matter for power.
template <class Done>
bool spin_until(const Done& done) {
  const auto until = std::chrono::steady_clock::now() + spin_time;
  for (;;) {
    for (int i = 0; i < 1024; ++i)  // about a microsecond a round
      if (done()) return true;
    if (std::chrono::steady_clock::now() > until) return done();
    std::this_thread::yield();
  }
}

class thread_pool {
 public:
  explicit thread_pool(std::size_t workers) {
    // (run_ keeps 16 bits for the thread count)
    if (workers > 0xfffe) workers = 0xfffe;
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
    context_ = &task;
    call_ = [](const void* context, std::size_t index) { (*static_cast<const Task*>(context))(index); };
    pending_.store(n - 1);
    generation_ += 1;
    run_.store(generation_ << 16 | n);  // publishes the task to spinning workers
    // Sleeping workers check the generation under the mutex: taking it once here
    // means each either saw the new generation or is already waiting, and woken.
    { std::lock_guard lock(mutex_); }
    wake_.notify_all();
    task(0);
    if (!spin_until([&] { return pending_.load() == 0; })) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return pending_.load() == 0; });
    }
    context_ = nullptr;
  }

 private:
  void work(std::size_t index) {
    std::uint64_t seen = 0;
    for (;;) {
      const auto next = [&] { return run_.load() >> 16 != seen || stopping_.load(); };
      if (!spin_until(next)) {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, next);
      }
      if (stopping_.load()) return;
      const std::uint64_t run = run_.load();
      seen = run >> 16;
      // context_ and call_ stay this run's until this worker has finished its part;
      // a worker outside the run reads nothing else, whatever run comes next.
      if (index >= (run & 0xffff)) continue;
      call_(context_, index);
      if (pending_.fetch_sub(1) == 1) {
        { std::lock_guard lock(mutex_); }  // as in run(): the caller is spinning or waiting
        done_.notify_one();
      }
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  // Written by run() before run_ moves on; read by workers after they see it.
  const void* context_ = nullptr;
  void (*call_)(const void*, std::size_t) = nullptr;
  std::uint64_t generation_ = 0;  // run()'s own count of runs
  // The current run, generation << 16 | threads taking part, in one atomic so that a
  // worker never pairs one run's generation with another's thread count.
  std::atomic<std::uint64_t> run_{0};
  std::atomic<std::size_t> pending_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace tl::detail
