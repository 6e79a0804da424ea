// Per-step GPU time of the seed fit: the whole 300-step loop in one launch, and the
// fused per-step kernels, timed with CUDA events; medians of many repetitions.
//   build-gpu/bench/seed_fit_gpu [repetitions]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include <thrust/gather.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/system/cuda/execution_policy.h>

#include "../../examples/seed_fit.hpp"
#include "tapeless/cuda.hpp"

template <class Reset, class Run>
double median_us_per_step(int repetitions, Reset reset, Run run) {
  cudaEvent_t start, stop;
  TL_CUDA_CHECK(cudaEventCreate(&start));
  TL_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> per_step;
  for (int r = 0; r < repetitions + 3; ++r) {
    reset();
    TL_CUDA_CHECK(cudaDeviceSynchronize());
    TL_CUDA_CHECK(cudaEventRecord(start));
    run();
    TL_CUDA_CHECK(cudaEventRecord(stop));
    TL_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms;
    TL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 3) per_step.push_back(ms * 1e3 / double(seed_fit::epochs));
  }
  std::sort(per_step.begin(), per_step.end());
  return per_step[per_step.size() / 2];
}

int main(int argc, char** argv) {
  const int repetitions = argc > 1 ? std::atoi(argv[1]) : 50;
  tl::cuda_device(0);
  const auto data = seed_fit::make_data();
  const auto x = tl::to_device(data.x), y = tl::to_device(data.y);
  const tl::cuda_train_state initial(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  auto s = initial;
  const auto reset = [&] {  // outside the timed region: no allocation is timed
    initial.params.copy_to(s.params.data());
    initial.optimizer_state.copy_to(s.optimizer_state.data());
    s.step = 0;
  };
  float final_loss = 0;
  // fit() copies its loss history back (one small copy): included, as a user pays it.
  const double one_launch = median_us_per_step(repetitions, reset, [&] {
    final_loss = tl::fit(s, tl::mse, x, y, seed_fit::epochs).loss_history.back();
  });
  std::printf("tapeless_gpu_one_launch_us %.3f\n", one_launch);
  {  // gelu written as a lambda against the built-in, repetitions interleaved
    const auto lambda_model = seed_fit::make_lambda_model();
    using L = std::remove_cvref_t<decltype(lambda_model)>;
    const auto p0 = seed_fit::initial_parameters();
    const tl::parameters<L> lp(std::vector<float>(p0.flat().begin(), p0.flat().end()));
    tl::cuda_train_state ls(lambda_model, lp, tl::adam{0.01f});
    const auto lambda_initial = ls;
    const auto lambda_reset = [&] {
      lambda_initial.params.copy_to(ls.params.data());
      lambda_initial.optimizer_state.copy_to(ls.optimizer_state.data());
      ls.step = 0;
    };
    std::vector<double> builtin_runs, lambda_runs;
    for (int r = 0; r < 9; ++r) {
      builtin_runs.push_back(median_us_per_step(std::max(5, repetitions / 9), reset, [&] {
        tl::fit(s, tl::mse, x, y, seed_fit::epochs);
      }));
      lambda_runs.push_back(median_us_per_step(std::max(5, repetitions / 9), lambda_reset, [&] {
        tl::fit(ls, tl::mse, x, y, seed_fit::epochs);
      }));
    }
    std::sort(builtin_runs.begin(), builtin_runs.end());
    std::sort(lambda_runs.begin(), lambda_runs.end());
    std::printf("tapeless_gpu_one_launch_builtin_gelu_interleaved_us %.3f\n", builtin_runs[4]);
    std::printf("tapeless_gpu_one_launch_lambda_gelu_us %.3f\n", lambda_runs[4]);
    std::printf("(gelu as a lambda / built-in, one launch, interleaved medians: %.3f)\n", lambda_runs[4] / builtin_runs[4]);
  }
  for (int threads : {32, 64}) {
    tl::cuda_fit_options options;
    options.threads = threads;
    std::printf("tapeless_gpu_one_launch_%dthreads_us %.3f\n", threads,
                median_us_per_step(repetitions, reset, [&] { tl::fit(s, tl::mse, x, y, seed_fit::epochs, options); }));
  }
  tl::train_step(s, tl::mse, x, y);  // sizes the per-step buffers before timing
  const double per_step = median_us_per_step(repetitions, reset, [&] {
    for (std::size_t e = 0; e < seed_fit::epochs; ++e) tl::train_step(s, tl::mse, x, y);
  });
  std::printf("tapeless_gpu_per_step_kernels_us %.3f\n", per_step);
  tl::cuda_fit_options graph;
  graph.one_launch = false;
  tl::fit(s, tl::mse, x, y, seed_fit::epochs, graph);  // captures the graph once
  std::printf("tapeless_gpu_per_step_graph_us %.3f\n",
              median_us_per_step(repetitions, reset, [&] { tl::fit(s, tl::mse, x, y, seed_fit::epochs, graph); }));
  {  // Shuffled mini-batches of 256 of 10^5 samples on the device, a cut before each step:
     // a new matrix from host indices (samples), or into reused matrices from an
     // epoch's order uploaded once (samples_into), against steps on one fixed batch.
    const auto big = seed_fit::make_data(5, 100000);
    const auto bx = tl::to_device(big.x), by = tl::to_device(big.y);
    tl::rng gen(3);
    const std::vector<std::size_t> order = gen.permutation(big.x.batch());
    const tl::device_indices device_order(order);
    const std::size_t mb = 256;
    const auto fixed_x = bx.samples(0, mb), fixed_y = by.samples(0, mb);
    tl::device_matrix xb, yb;
    const auto host_batch = [&](std::size_t e) { return std::span<const std::size_t>(order).subspan(e * mb, mb); };
    const double fixed = median_us_per_step(repetitions, reset, [&] {
      for (std::size_t e = 0; e < seed_fit::epochs; ++e) tl::train_step(s, tl::mse, fixed_x, fixed_y);
    });
    const double cut = median_us_per_step(repetitions, reset, [&] {
      for (std::size_t e = 0; e < seed_fit::epochs; ++e)
        tl::train_step(s, tl::mse, bx.samples(host_batch(e)), by.samples(host_batch(e)));
    });
    const double cut_into = median_us_per_step(repetitions, reset, [&] {
      for (std::size_t e = 0; e < seed_fit::epochs; ++e) {
        bx.samples_into(xb, device_order, e * mb, mb);
        by.samples_into(yb, device_order, e * mb, mb);
        tl::train_step(s, tl::mse, xb, yb);
      }
    });
    // The A/B for samples_into's hand-written kernel: the same cut by thrust::gather
    // (what samples_into ran until 2026-12-07), on the same stream, allocating nothing.
    const auto thrust_cut = [&](const tl::device_matrix& from, tl::device_matrix& out, std::size_t first) {
      const auto map = thrust::make_transform_iterator(
          thrust::counting_iterator<std::size_t>(0),
          tl::detail::gathered_value_index{device_order.values().data() + first, from.rows});
      thrust::gather(thrust::cuda::par_nosync, map, map + std::ptrdiff_t(from.rows * mb), from.data(), out.data());
    };
    const double cut_thrust = median_us_per_step(repetitions, reset, [&] {
      for (std::size_t e = 0; e < seed_fit::epochs; ++e) {
        thrust_cut(bx, xb, e * mb);
        thrust_cut(by, yb, e * mb);
        tl::train_step(s, tl::mse, xb, yb);
      }
    });
    std::printf("tapeless_gpu_minibatch256_fixed_us %.3f\n", fixed);
    std::printf("tapeless_gpu_minibatch256_samples_us %.3f\n", cut);
    std::printf("tapeless_gpu_minibatch256_samples_into_us %.3f\n", cut_into);
    std::printf("tapeless_gpu_minibatch256_thrust_gather_us %.3f\n", cut_thrust);
  }
  std::printf("(medians of %d runs of 300 steps, CUDA events; final loss %.5f)\n", repetitions,
              double(final_loss));
}
