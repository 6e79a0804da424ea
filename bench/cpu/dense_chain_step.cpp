// Per-step time of wide dense chains on the CPU, and the fraction of the machine's
// fp32 FMA peak it reaches; then the time of tl::apply on the same batch. A cell:
// 2 -> W -> ... -> W -> 1, `depth` dense layers
// (tanh on the hidden ones, the last linear; the models of bench/grid), MSE, Adam, one
// full-batch train_step, median over repetitions. FLOPs per step: 6 B In Out per layer
// (forward, input delta, weight gradient); activations and Adam count as zero.
//   build/bench/dense_chain_step [--widths 32,...] [--depths 2,4,8] [--batches 1e3,1e4,1e5]
//                                [--peak GFLOPS] [--max-step-s 3] [--reps 5]
// A cell whose step would take longer than --max-step-s (estimated from the cell at the
// largest batch measured so far) is skipped and says so. --peak: the fp32 FMA peak to
// divide by (docs/performance.md: 330 GFLOP/s measured on the 2-core machine).
// Width and depth are template arguments: each width is its own function, built once.
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

struct options {
  std::vector<std::size_t> widths{32, 64, 128, 256, 512, 1024}, depths{2, 4, 8}, batches{1000, 10000, 100000};
  double peak = 330, max_step_s = 3;
  int reps = 5;
};

template <std::size_t Width, std::size_t Depth>
void run_cells(const options& o) {
  const auto model = bench::make_mlp<Width, Depth>();
  double seconds_per_flop = 0;  // of the last measured cell: estimates the next
  for (const std::size_t batch : o.batches) {
    const double estimate = seconds_per_flop * bench::chain_flops(Width, Depth, batch);
    if (estimate > o.max_step_s) {
      std::printf("%5zu %5zu %8zu  skipped (estimated %.1f s a step)\n", Width, Depth, batch, estimate);
      continue;
    }
    tl::matrix x, y;
    bench::grid_batch(batch, x, y);
    tl::rng gen(42);
    tl::train_state state(model, tl::init(model, gen), tl::adam{1e-3f});
    const auto step = [&] {
      const auto start = std::chrono::steady_clock::now();
      tl::train_step(state, tl::mse, x, y);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    const double probe = step();  // warm-up: buffers, pool, caches
    const int per_rep = std::max(1, int(0.05 / std::max(probe, 1e-9)));  // ~50 ms a repetition
    std::vector<double> times;
    for (int r = 0; r < o.reps; ++r) {
      double t = 0;
      for (int k = 0; k < per_rep; ++k) t += step();
      times.push_back(t / per_rep);
    }
    const double median = median_of(times);
    seconds_per_flop = median / bench::chain_flops(Width, Depth, batch);
    const double gflops = bench::chain_flops(Width, Depth, batch) / median / 1e9;
    // tl::apply on the same batch: a forward, about a third of a step's work.
    std::vector<double> apply_times;
    float sink = 0;
    for (int r = 0; r < o.reps; ++r) {
      const auto start = std::chrono::steady_clock::now();
      sink += tl::apply(model, state.params, x)(0, batch - 1);
      apply_times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::printf("%5zu %5zu %8zu %12.1f %9.1f %7.1f%% %12.1f%s\n", Width, Depth, batch, median * 1e6, gflops,
                100 * gflops / o.peak, median_of(apply_times) * 1e6, std::isfinite(sink) ? "" : " (NaN)");
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  bench::read_options(argc, argv, "bench/cpu/dense_chain_step.cpp", [&](const std::string& a, const char* v) {
    if (a == "--widths") o.widths = sizes(v);
    else if (a == "--depths") o.depths = sizes(v);
    else if (a == "--batches") o.batches = sizes(v);
    else if (a == "--peak") o.peak = std::atof(v);
    else if (a == "--max-step-s") o.max_step_s = std::atof(v);
    else if (a == "--reps") o.reps = std::max(1, std::atoi(v));
    else return false;
    return true;
  });
  bench::run_built(
      bench::built<32, 64, 128, 256, 512, 1024>{}, bench::built<2, 4, 8>{}, o.widths, o.depths,
      [&] { std::printf("width depth    batch   us/step   GFLOP/s  of peak (%.0f GFLOP/s fp32 FMA)   apply us\n", o.peak); },
      [&](auto width, auto depth) { run_cells<width, depth>(o); });
}
