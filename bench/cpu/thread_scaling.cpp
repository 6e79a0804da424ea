// Where the blocked CPU pass's threads lose their time on a wide dense chain: one
// step split into its phases, at each thread count.
//   build/bench/thread_scaling [--widths 256,512 (of 128-1024)] [--depths 4 (4 or 8)] [--batches 1e4,1e5]
//                              [--threads 1,8,16] [--reps 5] [--pin 1]
// Per cell: the whole train_step; the pass over the samples (for_each_range around
// blocked_chain::accumulate: its wall time, each thread's own time, their mean and
// maximum); thread 0's range run alone on one thread, every other thread idle,
// for the same work; the rest of the step (packing, the join of the threads' sums,
// the optimizer) as step - pass. So:
//   imbalance  = max thread / mean thread    (threads' shares differ by up to 64 samples)
//   contention = mean thread / alone         (what the threads cost each other:
//                                             memory, shared caches, clocks)
//   rest       = (step - pass) / step
// and the slowest thread's index with its time over the fastest's. --pin 1 binds
// each of the pool's threads to one CPU first (the library never does).
// GFLOP/s counts 6 B In Out per layer as bench/cpu/dense_chain_step does.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "chain_cells.hpp"
#include "tapeless/tapeless.hpp"

namespace {

using bench::median_of;
using bench::sizes;

using clock_type = std::chrono::steady_clock;

struct options {
  std::vector<std::size_t> widths{256, 512}, depths{4}, batches{10000, 100000}, threads{1, 2, 4, 8, 16};
  int reps = 5;
  bool pin = false;
};

// Binds each of the pool's threads to its own CPU (thread t to CPU t), as far as the
// pool lets a caller reach them: each task index runs once, on some thread.
void pin_pool_threads() {
  auto& pool = tl::detail::cpu_pool();
  std::vector<int> pinned(pool.size(), -1);
  pool.run(pool.size(), [&](std::size_t t) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(int(t), &set);
    pinned[t] = pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 ? int(t) : -1;
  });
  for (std::size_t t = 0; t < pinned.size(); ++t)
    if (pinned[t] < 0) std::printf("# thread %zu not pinned\n", t);
}

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

template <std::size_t Width, std::size_t Depth>
void run_cells(const options& o) {
  const auto model = bench::make_mlp<Width, Depth>();
  using Model = std::remove_const_t<decltype(model)>;
  using pass_type = tl::detail::blocked_chain<Model, float>;
  constexpr std::size_t P = Model::parameter_count;
  for (const std::size_t batch : o.batches) {
    tl::matrix x, y;
    bench::grid_batch(batch, x, y);
    tl::rng gen(42);
    const double flops = bench::chain_flops(Width, Depth, batch);
    for (const std::size_t wanted : o.threads) {
      const std::size_t threads = std::min(wanted, tl::detail::cpu_pool().size());
      if (threads != wanted) {  // said, not skipped silently
        std::printf("%5zu %5zu %8zu %7zu  skipped: the pool has %zu threads (TAPELESS_CPU_THREADS or the CPUs)\n",
                    Width, Depth, batch, wanted, threads);
        continue;
      }
      // The whole step: train_step at this thread count (the cap is read once, so the
      // pass's threads are given here through the same function train_step calls).
      tl::train_state state(model, tl::init(model, gen), tl::adam{1e-3f});
      auto& ws = tl::detail::workspace_for_this_thread<float>();
      const auto whole_step = [&] {
        const auto start = clock_type::now();
        const auto r = tl::detail::fused_loss_and_gradient(state.model, tl::mse, state.params.data(), x.data(),
                                                           y.data(), batch, state.gradient.data(), threads);
        const std::size_t parts = tl::detail::cpu_threads_for_values(P);
        tl::detail::for_each_part(P, parts, [&](std::size_t, std::size_t first, std::size_t last) {
          tl::detail::optimizer_update_range(state.optimizer, state.step + 1, state.params.data(),
                                             state.gradient.data(), state.optimizer_state.data(), first, last, P);
        });
        ++state.step;
        if (!std::isfinite(r.loss)) std::fprintf(stderr, "non-finite loss\n");
        return seconds_since(start);
      };
      // The pass alone, each thread timing its own range.
      const float* packed = tl::detail::packed_weights<Model>(state.params.data(), ws);
      std::vector<double> sums(threads * P), own(threads);
      std::vector<std::pair<std::size_t, std::size_t>> range(threads);
      const auto pass = [&] {
        const auto start = clock_type::now();
        tl::detail::for_each_range(batch, threads, [&](std::size_t t, std::size_t first, std::size_t last) {
          const auto mine = clock_type::now();
          double* g = sums.data() + t * P;
          std::fill(g, g + P, 0.0);
          pass_type::accumulate(model, tl::mse, packed, x.data(), y.data(), first, last, pass_type::thread_buffer(), g);
          own[t] = seconds_since(mine);
          range[t] = {first, last};
        });
        return seconds_since(start);
      };
      const auto alone = [&] {  // thread 0's range, nothing else running
        const auto start = clock_type::now();
        std::fill(sums.begin(), sums.begin() + P, 0.0);
        pass_type::accumulate(model, tl::mse, packed, x.data(), y.data(), range[0].first, range[0].second,
                              pass_type::thread_buffer(), sums.data());
        return seconds_since(start);
      };
      whole_step();  // warm-up: buffers, pool, caches
      pass();
      std::vector<double> step_t, pass_t, mean_t, max_t, alone_t, spread;
      std::vector<std::size_t> slowest;
      for (int r = 0; r < o.reps; ++r) {
        step_t.push_back(whole_step());
        pass_t.push_back(pass());
        double mean = 0, most = 0;
        for (const double t : own) mean += t / double(threads), most = std::max(most, t);
        slowest.push_back(std::size_t(std::max_element(own.begin(), own.end()) - own.begin()));
        spread.push_back(most / *std::min_element(own.begin(), own.end()));
        mean_t.push_back(mean);
        max_t.push_back(most);
        alone_t.push_back(alone());
      }
      const double step = median_of(step_t), wall = median_of(pass_t), mean = median_of(mean_t),
                   most = median_of(max_t), single = median_of(alone_t);
      std::printf("%5zu %5zu %8zu %7zu %11.1f %9.1f %11.1f %11.1f %11.1f %11.1f %10.2f %10.2f %7.1f%%  slowest", Width,
                  Depth, batch, threads, step * 1e6, flops / step / 1e9, wall * 1e6, mean * 1e6, most * 1e6,
                  single * 1e6, most / mean, mean / single, 100 * (step - wall) / step);
      for (std::size_t r = 0; r < slowest.size(); ++r) std::printf(" %zu (%.2fx)", slowest[r], spread[r]);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  bench::read_options(argc, argv, "bench/cpu/thread_scaling.cpp", [&](const std::string& a, const char* v) {
    if (a == "--widths") o.widths = sizes(v);
    else if (a == "--depths") o.depths = sizes(v);
    else if (a == "--batches") o.batches = sizes(v);
    else if (a == "--threads") o.threads = sizes(v);
    else if (a == "--reps") o.reps = std::max(1, std::atoi(v));
    else if (a == "--pin") o.pin = std::atoi(v) != 0;
    else return false;
    return true;
  });
  if (o.pin) pin_pool_threads();
  bench::run_built(
      bench::built<128, 256, 512, 1024>{}, bench::built<4, 8>{}, o.widths, o.depths,
      [] {
        std::printf("width depth    batch threads     step us   GFLOP/s     pass us  mean thread   max thread"
                    "    alone us  imbalance contention    rest  slowest thread (max / min) each repetition\n");
      },
      [&](auto width, auto depth) { run_cells<width, depth>(o); });
}
