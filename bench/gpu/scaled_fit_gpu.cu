// Per-step GPU time of the scaled fit: 2^20 points, 1-64-64-1 gelu, MSE, Adam(0.01),
// 100 steps through fit() (tiled per-step kernels replayed as a CUDA graph), in fp32
// (the default) and with matmul_precision::tf32; median of several runs, CUDA events.   build-gpu/bench/scaled_fit_gpu [repetitions]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../examples/seed_fit.hpp"
#include "fit_timing.hpp"
#include "tapeless/cuda.hpp"

int main(int argc, char** argv) {
  const int repetitions = argc > 1 ? std::atoi(argv[1]) : 7;
  constexpr std::size_t points = std::size_t(1) << 20, steps = 100;
  tl::cuda_device(0);
  const auto model = tl::chain(tl::dense<1, 64>(tl::gelu), tl::dense<64, 64>(tl::gelu), tl::dense<64, 1>());
  const auto data = seed_fit::make_data(1, points);
  const auto x = tl::to_device(data.x), y = tl::to_device(data.y);
  tl::rng gen(42);
  const auto p0 = tl::init(model, gen);
  tl::cuda_train_state s(model, p0, tl::adam{0.01f});
  const tl::cuda_train_state initial = s;
  const double flops = double(points) * 3 * 2 * (64 + 64 * 64 + 64);  // forward + backward, multiply-adds x 2
  for (const auto precision : {tl::matmul_precision::fp32, tl::matmul_precision::tf32}) {
    s.precision = precision;
    const auto [median, last] = bench::time_fits(s, initial, tl::mse, x, y, steps, repetitions);
    const char* name = precision == tl::matmul_precision::tf32 ? "tf32" : "fp32";
    std::printf("tapeless_scaled_%s_step_us %.1f\n", name, median);
    std::printf("(%s: median of %d runs of 100 steps; %.1f TFLOP/s of the %.1f GFLOP counted per step; final loss %.5f)\n",
                name, repetitions, flops / (median * 1e-6) / 1e12, flops / 1e9, double(last));
  }
}
