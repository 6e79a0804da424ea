// A small persistent pool for the CPU batch loop: starting threads every step costs
// tens of microseconds, which is what a mid-size step takes in all. run(n, task)
// calls task(0..n-1) and returns when all are done. Thread t claims index t first (the
// caller 0), so a step's ranges stay on the cores whose caches hold them, then any
// index still unclaimed: a worker that the OS has not scheduled (a machine busier
// than its cores) leaves its index to the caller instead of holding the step for a
// time slice. With both cores busy, a 2-thread step of 20-200 us took 4 ms when each
// worker had its index to itself. Which thread runs which index never changes the
// result: the caller splits work by index and joins it in index order.
//
// Waiting spins briefly before it sleeps: a training loop calls run() once a step,
// and a worker that slept on the condition variable took ~60 µs to wake on the
// development machine (a VM), against well under a microsecond for one still
// spinning. The spin is bounded (spin_time), so an idle pool costs no CPU.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
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
  // (run_ keeps 16 bits for the thread count)
  explicit thread_pool(std::size_t workers) : claimed_(std::min<std::size_t>(workers, 0xfffe) + 1) {
    workers = claimed_.size() - 1;
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

  // Tests: workers that see a run take no index of it, as if the OS had not scheduled
  // them; the caller then runs them all.
  void hold_workers(bool hold) { holding_.store(hold); }

  // n <= size(). Runs from several threads (two models trained at once on one process's
  // pool) take turns. A run called from inside a task (a loss or layer of the user's
  // that calls tl::apply, say) runs its indices on the calling thread, one after the
  // other: waiting for the pool it is part of would never end. A task that throws does
  // not end the run early: the other indices still run, and run() rethrows the first
  // exception once every index has finished, so no thread is left inside a task whose
  // caller has returned.
  // (A pointer to the caller's callable and one to a function that calls it, rather
  // than std::function: <functional> alone costs the seed example ~0.1 s of build.)
  template <class Task>
  void run(std::size_t n, const Task& task) {
    if (n > size()) throw std::logic_error("tapeless: thread_pool::run was given more tasks than threads");
    if (n <= 1) {
      if (n == 1) task(0);
      return;
    }
    if (inside_task()) {
      std::exception_ptr failure;
      for (std::size_t i = 0; i < n; ++i) {
        try {
          task(i);
        } catch (...) {
          if (!failure) failure = std::current_exception();
        }
      }
      if (failure) std::rethrow_exception(failure);
      return;
    }
    std::lock_guard one_run_at_a_time(run_mutex_);
    context_ = &task;
    call_ = [](const void* context, std::size_t index) { (*static_cast<const Task*>(context))(index); };
    pending_.store(n);
    generation_ += 1;
    run_.store(generation_ << 16 | n);  // publishes the task to spinning workers
    // Sleeping workers check the generation under the mutex: taking it once here
    // means each either saw the new generation or is already waiting, and woken.
    { std::lock_guard lock(mutex_); }
    wake_.notify_all();
    for (std::size_t i = 0; i < n; ++i) {  // its own index 0 first, then what is left
      if (claim(i, generation_)) {
        try {
          const task_scope scope;
          task(i);
        } catch (...) {
          keep_failure(std::current_exception());
        }
        pending_.fetch_sub(1);
      }
    }
    if (!spin_until([&] { return pending_.load() == 0; })) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return pending_.load() == 0; });
    }
    context_ = nullptr;
    std::exception_ptr failure;
    {
      std::lock_guard lock(mutex_);
      failure.swap(failure_);
    }
    if (failure) std::rethrow_exception(failure);
  }

 private:
  // Whether this thread is running a task of some pool's run, which a nested run() asks.
  static bool& inside_task() {
    static thread_local bool inside = false;
    return inside;
  }
  struct task_scope {
    bool before = inside_task();
    task_scope() { inside_task() = true; }
    ~task_scope() { inside_task() = before; }
  };

  void work(std::size_t own) {
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
      const std::size_t n = run & 0xffff;
      if (holding_.load()) continue;
      // context_ and call_ stay this run's until every index it claimed has finished; a
      // claim fails once the run has moved on, so a late worker reads nothing else.
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (own + k) % n;  // its own index first (when the run has it)
        if (!claim(i, seen)) continue;
        try {
          const task_scope scope;
          call_(context_, i);
        } catch (...) {
          keep_failure(std::current_exception());
        }
        if (pending_.fetch_sub(1) == 1) {
          { std::lock_guard lock(mutex_); }  // as in run(): the caller is spinning or waiting
          done_.notify_one();
        }
      }
    }
  }

  // The run's first exception, rethrown by run() on the calling thread.
  void keep_failure(std::exception_ptr e) {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = std::move(e);
  }

  // Claims index i for run `generation`: true for exactly one thread a run. claimed_[i]
  // holds the last run that claimed it; a worker still on an older run fails, since
  // every index of that run was claimed before the next run began.
  bool claim(std::size_t i, std::uint64_t generation) {
    std::uint64_t c = claimed_[i].load();
    while (c < generation)
      if (claimed_[i].compare_exchange_weak(c, generation)) return true;
    return false;
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
  std::vector<std::atomic<std::uint64_t>> claimed_;  // per index: the last run that claimed it
  std::atomic<std::size_t> pending_{0};             // indices of the current run not yet finished
  std::atomic<bool> holding_{false};
  std::exception_ptr failure_;  // under mutex_
  std::mutex run_mutex_;        // held by the thread whose run this is
  std::atomic<bool> stopping_{false};
};

}  // namespace tl::detail
