// Per-step time of the seed fit on the CPU: 300 Adam steps, repeated; prints the
// median per-step time over the repetitions.
//   build/bench/seed_fit_step [repetitions]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../examples/seed_fit.hpp"

int main(int argc, char** argv) {
  const int repetitions = argc > 1 ? std::atoi(argv[1]) : 200;
  const auto data = seed_fit::make_data();
  std::vector<double> per_step;
  float loss = 0;
  for (int r = 0; r < repetitions + 5; ++r) {
    tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{seed_fit::learning_rate});
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t e = 0; e < seed_fit::epochs; ++e) loss = tl::train_step(state, tl::mse, data.x, data.y);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (r >= 5) per_step.push_back(us / double(seed_fit::epochs));  // first 5: warm-up
  }
  std::sort(per_step.begin(), per_step.end());
  std::printf("tapeless_cpu_seed_step_us %.3f (median of %d x 300 steps; min %.3f, max %.3f; final loss %.5f)\n",
              per_step[per_step.size() / 2], repetitions, per_step.front(), per_step.back(), double(loss));
}
