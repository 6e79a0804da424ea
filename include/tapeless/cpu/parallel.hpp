// How a CPU pass splits a batch over threads: how many (by work, so that a small
// step is not slowed by waking threads), and which contiguous range of samples each
// takes (split_range). The ranges depend on the batch and the thread count only and
// callers join their per-thread results in index order, so a result depends on the
// thread count, never on timing. TAPELESS_CPU_THREADS caps the count.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "tapeless/cpu/thread_pool.hpp"

namespace tl::detail {

// samples a pass sums per lane (or per blocked chunk) in the working precision before
// adding them to its double sums, counted within a thread's range from its start.
inline constexpr std::size_t cpu_chunk = 256;
// samples: the unit of the split over threads. Small, so that the threads' shares differ
// by at most 64 samples: in whole chunks, 10^4 samples over 16 threads gave some
// threads 3 chunks and others 2 (the step waits for the 3: 81 % of the cores busy), and
// 1000 samples kept 12 of 16 threads idle (a 2-256x3-1 step at 0.57x JAX's speed there,
// docs/performance.md 2026-12-06). Whole lane groups of 16, and 64 so that a thread's
// samples outweigh what it costs whatever their number: clearing and joining its own
// gradient sums, P doubles, about as much as 16 samples' products. (Least squares,
// whose per-thread sums are P^2 / 2 x 16 lanes, splits in whole chunks.)
inline constexpr std::size_t cpu_split_unit = 64;

// Work below which one more thread costs more than it saves, in parameter-samples
// of the lane pass (a step's multiply-adds are about 3 per parameter and sample);
// the blocked pass, faster per parameter-sample, has its own (cpu/batch.hpp).
// Measured: docs/performance.md, "CPU threads" and 2026-12-07 (2^16 had been measured
// where two threads were one core's hyperthreads; on two cores a 1-16-1 step of 1000
// samples takes 0.69x the time on two threads). tl::apply on the lane pass counts a
// third of a step's work per sample against the same figure (4000 samples of 1-16-1:
// 36 -> 21 µs with it lowered).
inline constexpr double cpu_work_per_thread = double(1 << 14);
// Least squares' own: its threads' sums are P(P+1)/2 x 16 lanes (cpu/least_squares.hpp),
// and its threshold was not measured again with the lane pass's.
inline constexpr double lsq_work_per_thread = double(1 << 16);

// The most threads a step may use: the hardware's, or fewer when the environment
// variable TAPELESS_CPU_THREADS caps it. A value that is not a positive whole number
// (digits alone) is an error (std::invalid_argument) rather than a silent default; an
// empty one counts as unset.
inline std::size_t cpu_thread_cap() {
  static const std::size_t cap = [] {
    const std::size_t hardware = std::max<std::size_t>(1, std::thread::hardware_concurrency());
    if (const char* env = std::getenv("TAPELESS_CPU_THREADS"); env && *env) {
      char* end = nullptr;
      // (strtol would skip blanks and take a sign; past LONG_MAX it gives LONG_MAX, which
      // the hardware caps as it caps any large count)
      const long n = std::strtol(env, &end, 10);
      if (n <= 0 || *end != '\0' || *env < '0' || *env > '9')
        throw std::invalid_argument(std::string("tapeless: TAPELESS_CPU_THREADS must be a positive whole number, got '") +
                                    env + "'");
      return std::min<std::size_t>(hardware, static_cast<std::size_t>(n));
    }
    return hardware;
  }();
  return cap;
}

// Threads for a step: one per work_per_thread of work, a `unit` of samples at
// least each (the unit split_range cuts the batch into).
inline std::size_t cpu_threads_for(std::size_t batch, std::size_t parameter_count,
                                   double work_per_thread = cpu_work_per_thread,
                                   std::size_t unit = cpu_split_unit) {
  const double work = double(batch) * double(parameter_count);
  const std::size_t by_work = static_cast<std::size_t>(work / work_per_thread);
  const std::size_t units = (batch + unit - 1) / unit;
  return std::max<std::size_t>(1, std::min({cpu_thread_cap(), by_work, units}));
}

// Thread t's samples [first, last) of `threads`: contiguous ranges of whole `unit`s
// (cpu_split_unit, or cpu_chunk for least squares), as even as whole units allow; the
// last range ends at the batch's end.
struct sample_range {
  std::size_t first, last;
};
inline sample_range split_range(std::size_t batch, std::size_t threads, std::size_t t,
                                std::size_t unit = cpu_split_unit) {
  const std::size_t units = (batch + unit - 1) / unit;
  return {std::min(batch, units * t / threads * unit), std::min(batch, units * (t + 1) / threads * unit)};
}

inline thread_pool& cpu_pool() {
  static thread_pool pool(cpu_thread_cap() - 1);
  return pool;
}

// Runs pass(t, first, last) for t < threads over split_range's ranges of [0, batch),
// on the pool when threads > 1. The ranges depend on the batch and the thread count
// only, and callers join per-thread results in index order: deterministic.
template <class Pass>
void for_each_range(std::size_t batch, std::size_t threads, const Pass& pass, std::size_t unit = cpu_split_unit) {
  const auto run = [&](std::size_t t) {
    const sample_range r = split_range(batch, threads, t, unit);
    pass(t, r.first, r.last);
  };
  if (threads == 1) run(0);  // small steps: no pool, no indirect call
  else cpu_pool().run(threads, run);
}

// Elementwise work over a step's parameters (the blocked pass's packed weights and
// the join of its per-thread sums, the optimizer's update): values per thread below
// which a second thread costs more than it saves (a waking worker costs microseconds,
// a value a few nanoseconds: Adam's update about 2 ns a float parameter on one core,
// so 2^14 of them are ~30 us; right after a step's pass the workers are still
// spinning). 2^16 kept a 2-128x3-1 model's (33 k parameters) packing, join and
// update on one thread: 1.13x a step at 1000 samples on 2 cores, 1.45x at 16
// (docs/performance.md, 2026-12-07 (later)).
inline constexpr std::size_t cpu_values_per_thread = std::size_t(1) << 14;

// Runs part(t, first, last) for t < parts over contiguous ranges of [0, n), on the
// pool when parts > 1.
template <class Part>
void for_each_part(std::size_t n, std::size_t parts, const Part& part) {
  if (parts <= 1) return part(std::size_t(0), std::size_t(0), n);
  cpu_pool().run(parts, [&](std::size_t t) { part(t, n * t / parts, n * (t + 1) / parts); });
}

// Threads for elementwise work over n values (a small model never starts the pool).
inline std::size_t cpu_threads_for_values(std::size_t n) {
  const std::size_t by_size = n / cpu_values_per_thread;
  return by_size <= 1 ? 1 : std::min(by_size, cpu_pool().size());
}

// The threads a step takes: `threads` when given, else by work; never more than the pool.
inline std::size_t cpu_step_threads(std::size_t threads, std::size_t batch, std::size_t work_per_sample,
                                    double work_per_thread = cpu_work_per_thread,
                                    std::size_t unit = cpu_split_unit) {
  if (threads == 0) threads = cpu_threads_for(batch, work_per_sample, work_per_thread, unit);
  return threads > 1 ? std::min(threads, cpu_pool().size()) : threads;
}

}  // namespace tl::detail
