// The GPU benchmarks' timing of fit(): each run starts from `initial`'s parameters,
// optimizer state and step 0 (s's settings are kept), is timed with CUDA events, and the first run (which
// captures the graph the others replay) is not counted.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "tapeless/cuda.hpp"

namespace bench {

struct fit_timing {
  double median_us_per_step;
  double last_loss;  // of the last run
};

template <class State, class Loss>
fit_timing time_fits(State& s, const State& initial, const Loss& loss, const tl::device_matrix& x,
                     const tl::device_matrix& y, std::size_t steps, int repetitions,
                     const tl::cuda_fit_options& options = {}) {
  cudaEvent_t start, stop;
  TL_CUDA_CHECK(cudaEventCreate(&start));
  TL_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> per_step;
  double last = 0;
  for (int r = 0; r < repetitions + 1; ++r) {
    initial.params.copy_to(s.params.data());
    initial.optimizer_state.copy_to(s.optimizer_state.data());
    s.step = 0;
    TL_CUDA_CHECK(cudaDeviceSynchronize());
    TL_CUDA_CHECK(cudaEventRecord(start));
    last = tl::fit(s, loss, x, y, steps, options).loss_history.back();
    TL_CUDA_CHECK(cudaEventRecord(stop));
    TL_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms;
    TL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r > 0) per_step.push_back(ms * 1e3 / double(steps));
  }
  TL_CUDA_CHECK(cudaEventDestroy(start));
  TL_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(per_step.begin(), per_step.end());
  return {per_step[per_step.size() / 2], last};
}

}  // namespace bench
