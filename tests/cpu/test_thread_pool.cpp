// The persistent pool: every index runs exactly once per run, whatever the thread
// count of the run before; runs after the workers have fallen asleep still complete;
// indices a busy worker has not claimed are run by the caller; a task's exception
// reaches the caller after the whole run; late workers never join the wrong run.
#include <gtest/gtest.h>

#include <atomic>
#include <array>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tapeless/cpu/thread_pool.hpp"

namespace {

TEST(ThreadPool, EveryIndexOncePerRunAcrossChangingCounts) {
  tl::detail::thread_pool pool(3);
  ASSERT_EQ(pool.size(), 4u);
  std::vector<std::atomic<int>> calls(4);
  std::vector<int> expected(4, 0);
  for (int run = 0; run < 5000; ++run) {
    const std::size_t n = 1 + std::size_t(run * 7 % 4);  // 1..4, in an order that mixes them
    pool.run(n, [&](std::size_t i) { calls[i].fetch_add(1); });
    for (std::size_t i = 0; i < n; ++i) ++expected[i];
  }
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(calls[i].load(), expected[i]) << i;
}

TEST(ThreadPool, RunAfterWorkersSleepCompletes) {
  tl::detail::thread_pool pool(2);
  std::atomic<int> sum{0};
  for (int run = 0; run < 3; ++run) {
    // Longer than the spin: the workers are asleep on the condition variable.
    std::this_thread::sleep_for(tl::detail::spin_time * 5);
    pool.run(3, [&](std::size_t i) { sum.fetch_add(int(i) + 1); });
    EXPECT_EQ(sum.load(), 6 * (run + 1));
  }
}

TEST(ThreadPool, TaskResultsJoinedInIndexOrder) {
  tl::detail::thread_pool pool(1);
  std::vector<double> part(2);
  double first = 0;
  for (int run = 0; run < 1000; ++run) {
    pool.run(2, [&](std::size_t i) {
      double s = 0;
      for (int k = 0; k < 1000; ++k) s += 1.0 / double(k + 1 + int(i) * 1000);
      part[i] = s;
    });
    const double joined = part[0] + part[1];
    if (run == 0) first = joined;
    ASSERT_EQ(joined, first) << run;  // the same bits each run
  }
}

// Workers that take no index of a run (as if the OS had not scheduled them): the
// caller runs every index itself, once, and the run completes. With an index fixed to
// each worker, it would wait for them.
TEST(ThreadPool, CallerRunsWhatWorkersHaveNotClaimed) {
  tl::detail::thread_pool pool(3);
  const auto caller = std::this_thread::get_id();
  pool.hold_workers(true);
  for (int run = 0; run < 100; ++run) {
    const std::size_t n = 2 + std::size_t(run % 3);
    std::vector<std::atomic<int>> calls(n);
    std::atomic<int> elsewhere{0};
    pool.run(n, [&](std::size_t i) {
      calls[i].fetch_add(1);
      if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1);
    });
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(calls[i].load(), 1) << "run " << run << ", index " << i;
    ASSERT_EQ(elsewhere.load(), 0) << run;
  }
  // Released, they take part again: some run of many has a worker's help.
  pool.hold_workers(false);
  std::atomic<int> elsewhere{0};
  for (int run = 0; run < 2000 && elsewhere.load() == 0; ++run) {
    pool.run(4, [&](std::size_t) {
      if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    });
  }
  EXPECT_GT(elsewhere.load(), 0);
}

// A task that throws, on the caller or on a worker: run() rethrows it once every other
// index has run, and the pool serves the next run. More tasks than threads: an error.
TEST(ThreadPool, TaskExceptionReachesTheCallerAfterTheRun) {
  tl::detail::thread_pool pool(3);
  for (std::size_t thrower = 0; thrower < 4; ++thrower) {
    std::vector<std::atomic<int>> calls(4);
    EXPECT_THROW(pool.run(4,
                          [&](std::size_t i) {
                            calls[i].fetch_add(1);
                            if (i == thrower) throw std::runtime_error("task failed");
                          }),
                 std::runtime_error);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(calls[i].load(), 1) << thrower << " " << i;
    std::atomic<int> sum{0};
    pool.run(4, [&](std::size_t i) { sum.fetch_add(int(i)); });
    EXPECT_EQ(sum.load(), 6);
  }
  EXPECT_THROW(pool.run(5, [](std::size_t) {}), std::logic_error);
}

// More threads than cores, counts that shrink and grow, runs after the workers slept:
// each index of a run once, none past its count, every call from that run's task.
TEST(ThreadPool, LateWorkersNeverJoinTheWrongRun) {
  tl::detail::thread_pool pool(7);
  unsigned seed = 12345;
  const auto random = [&] { return (seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff; };
  for (long run = 0; run < 20000; ++run) {
    const std::size_t n = 2 + random() % 7;
    std::array<std::atomic<int>, 8> calls{};
    std::atomic<int> wrong{0};
    const long id = run;  // a stale call of an earlier run's task would see `run` moved on
    pool.run(n, [&, id](std::size_t i) {
      if (id != run) wrong.fetch_add(1);
      calls[i].fetch_add(1);
    });
    for (std::size_t i = 0; i < 8; ++i) ASSERT_EQ(calls[i].load(), i < n ? 1 : 0) << "run " << run << ", index " << i;
    ASSERT_EQ(wrong.load(), 0) << run;
    if (random() % 2000 == 0) std::this_thread::sleep_for(tl::detail::spin_time * 2);  // workers asleep
  }
}

// Two threads (two models trained at once) share one pool: their runs take turns, and
// each sees every index of its own runs once.
// A task that starts a run of its own (a user's loss or layer calling tl::apply)
// gets every index of it, on its own thread, instead of waiting for the pool it is
// part of; an exception there reaches the task.
TEST(ThreadPool, RunInsideATaskRunsInline) {
  tl::detail::thread_pool pool(3);
  std::array<std::atomic<int>, 4> outer{}, inner{};
  std::atomic<int> caught{0};
  pool.run(4, [&](std::size_t i) {
    outer[i].fetch_add(1);
    pool.run(3, [&](std::size_t j) { inner[j].fetch_add(1); });
    try {
      pool.run(2, [&](std::size_t j) {
        if (j == 1) throw std::runtime_error("inner");
      });
    } catch (const std::runtime_error&) {
      caught.fetch_add(1);
    }
  });
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(outer[i].load(), 1) << i;
  for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(inner[j].load(), 4) << j;
  EXPECT_EQ(inner[3].load(), 0);
  EXPECT_EQ(caught.load(), 4);
  pool.run(4, [&](std::size_t i) { outer[i].fetch_add(1); });  // the pool still runs afterwards
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(outer[i].load(), 2) << i;
}

TEST(ThreadPool, RunsFromTwoThreadsTakeTurns) {
  tl::detail::thread_pool pool(2);
  std::atomic<int> bad{0};
  const auto user = [&](int salt) {
    for (int run = 0; run < 1000; ++run) {
      std::array<std::atomic<int>, 3> calls{};
      const std::size_t n = 2 + std::size_t((run + salt) % 2);
      pool.run(n, [&](std::size_t i) {
        calls[i].fetch_add(1);
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(5);
        while (std::chrono::steady_clock::now() < until) {}  // long enough for the runs to overlap
      });
      for (std::size_t i = 0; i < 3; ++i) bad.fetch_add(calls[i].load() != (i < n ? 1 : 0));
    }
  };
  std::thread other(user, 1);
  user(0);
  other.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
