// Where the blocked CPU pass's threads lose their time on a wide dense chain: one
// step split into its phases, at each thread count.
//   build/bench/thread_scaling [--widths 256,512] [--depths 4] [--batches 1e4,1e5]
//                              [--threads 1,8,16] [--reps 5] [--pin 1]
// Per cell: the whole train_step (the library's split: slots, cpu/parallel.hpp); the
// pass over the samples (blocked_chain::accumulate) split two ways in one run, one
// range a thread ("ranges", the split before slots) and slots taken as threads finish
// ("slots"), each with its imbalance (the busiest thread's time over the mean);
// one thread's share run alone on an otherwise idle pool, so
//   contention = mean thread time of the ranges / alone   (what the threads cost each
//                                                          other: memory, caches, clocks)
//   gain       = ranges / slots
//   rest       = (step - slots) / step                    (packing, join, optimizer)
// and the slowest thread of the ranges each repetition, with its time over the fastest's.
// --pin 1 binds the pool's threads to one CPU each first (the library never does).
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

#include "tapeless/tapeless.hpp"

namespace {

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

std::vector<std::size_t> sizes(const char* list) {
  std::vector<std::size_t> out;
  for (const char* c = list; *c;) {
    char* end;
    out.push_back(std::size_t(std::strtod(c, &end)));  // "1e5" reads
    c = *end == ',' ? end + 1 : end;
    if (end == c && *c) break;
  }
  return out;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

template <std::size_t Width, std::size_t Depth>
auto make_mlp() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return tl::chain(tl::dense<2, Width>(tl::tanh), ((void)I, tl::dense<Width, Width>(tl::tanh))...,
                     tl::dense<Width, 1>());
  }(std::make_index_sequence<Depth - 2>{});
}

template <std::size_t Width, std::size_t Depth>
void run_cells(const options& o) {
  if (std::find(o.depths.begin(), o.depths.end(), Depth) == o.depths.end()) return;
  const auto model = make_mlp<Width, Depth>();
  using Model = std::remove_const_t<decltype(model)>;
  using pass_type = tl::detail::blocked_chain<Model, float>;
  constexpr std::size_t P = Model::parameter_count;
  for (const std::size_t batch : o.batches) {
    tl::matrix x(2, batch), y(1, batch);
    for (std::size_t s = 0; s < batch; ++s) {  // the additive recurrence of bench/grid
      const double a = 0.5 + double(s) * 0.7548776662466927, b = 0.5 + double(s) * 0.5698402909980532;
      x(0, s) = float(-2.0 + 4.0 * (a - double(std::size_t(a))));
      x(1, s) = float(-2.0 + 4.0 * (b - double(std::size_t(b))));
      y(0, s) = float(std::sin(double(x(0, s))) * std::cos(double(x(1, s))));
    }
    tl::rng gen(42);
    const double flops = 6.0 * double(batch) * (2.0 * Width + double(Depth - 2) * Width * Width + Width);
    for (const std::size_t wanted : o.threads) {
      const std::size_t threads = std::min(wanted, tl::detail::cpu_pool().size());
      if (threads != wanted) continue;
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
      // The pass over the samples alone, each thread adding up its own time: split as
      // the step splits it (slots taken as threads finish, cpu/parallel.hpp) or one
      // range a thread (the split before slots), in one run.
      const float* packed = tl::detail::packed_weights<Model>(state.params.data(), ws);
      const std::size_t slots = tl::detail::cpu_slots_for(batch, threads, P);
      std::vector<double> sums(slots * P), own(threads);
      const auto pass = [&](bool slotted) {
        std::fill(own.begin(), own.end(), 0.0);
        const auto start = clock_type::now();
        tl::detail::for_each_slot(batch, slotted ? slots : threads, threads,
                                  [&](std::size_t t, std::size_t slot, std::size_t first, std::size_t last) {
                                    const auto mine = clock_type::now();
                                    double* g = sums.data() + slot * P;
                                    std::fill(g, g + P, 0.0);
                                    pass_type::accumulate(model, tl::mse, packed, x.data(), y.data(), first, last,
                                                          pass_type::thread_buffer(), g);
                                    own[t] += seconds_since(mine);
                                  });
        return seconds_since(start);
      };
      const auto alone = [&] {  // one thread's share, nothing else running
        const auto r = tl::detail::chunk_range(batch, 0, threads);
        const auto start = clock_type::now();
        std::fill(sums.begin(), sums.begin() + P, 0.0);
        pass_type::accumulate(model, tl::mse, packed, x.data(), y.data(), r.first, r.last, pass_type::thread_buffer(),
                              sums.data());
        return seconds_since(start);
      };
      whole_step();  // warm-up: buffers, pool, caches
      pass(false);
      pass(true);
      std::vector<double> step_t, ranges_t, slots_t, mean_t, max_t, slotted_max_t, alone_t, spread;
      std::vector<std::size_t> slowest;
      for (int r = 0; r < o.reps; ++r) {
        step_t.push_back(whole_step());
        ranges_t.push_back(pass(false));
        double mean = 0, most = 0;
        for (const double t : own) mean += t / double(threads), most = std::max(most, t);
        mean_t.push_back(mean);
        max_t.push_back(most);
        slowest.push_back(std::size_t(std::max_element(own.begin(), own.end()) - own.begin()));
        spread.push_back(most / *std::min_element(own.begin(), own.end()));
        slots_t.push_back(pass(true));
        double slotted_mean = 0, slotted_most = 0;
        for (const double t : own) slotted_mean += t / double(threads), slotted_most = std::max(slotted_most, t);
        slotted_max_t.push_back(slotted_most / slotted_mean);
        alone_t.push_back(alone());
      }
      const double step = median_of(step_t), ranges = median_of(ranges_t), slotted = median_of(slots_t),
                   mean = median_of(mean_t), most = median_of(max_t), single = median_of(alone_t);
      std::printf("%5zu %5zu %8zu %7zu %5zu %11.1f %8.1f %11.1f %9.2f %10.2f %11.1f %9.2f %7.2fx %6.1f%%  slowest", Width,
                  Depth, batch, threads, slots, step * 1e6, flops / step / 1e9, ranges * 1e6, most / mean, mean / single,
                  slotted * 1e6, median_of(slotted_max_t), ranges / slotted, 100 * (step - slotted) / step);
      for (std::size_t r = 0; r < slowest.size(); ++r) std::printf(" %zu (%.2fx)", slowest[r], spread[r]);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
}

template <std::size_t Width>
void run_width(const options& o) {
  if (std::find(o.widths.begin(), o.widths.end(), Width) == o.widths.end()) return;
  run_cells<Width, 4>(o);
  run_cells<Width, 8>(o);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--widths") o.widths = sizes(argv[i + 1]);
    else if (a == "--depths") o.depths = sizes(argv[i + 1]);
    else if (a == "--batches") o.batches = sizes(argv[i + 1]);
    else if (a == "--threads") o.threads = sizes(argv[i + 1]);
    else if (a == "--reps") o.reps = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--pin") o.pin = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "unknown option %s (see the comment at the top of bench/cpu/thread_scaling.cpp)\n",
                   a.c_str());
      return 2;
    }
  }
  if (o.pin) pin_pool_threads();
  std::printf("width depth    batch threads slots     step us  GFLOP/s   ranges us imbalance contention    slots us imbalance   gain   rest"
              "  slowest thread of the ranges (max / min) each repetition\n");
  run_width<256>(o);
  run_width<512>(o);
  run_width<1024>(o);
}
