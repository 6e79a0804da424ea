// Per-step time of the seed fit on the CPU: 300 Adam steps, repeated; prints the
// median per-step time over the repetitions, for the built-in gelu and for gelu
// written as a lambda (repetitions interleaved, so both see the same machine).
//   build/bench/seed_fit_step [repetitions]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../examples/seed_fit.hpp"

template <class Model>
double one_run(const Model& model, const seed_fit::data& data, float& loss) {
  const auto initial = seed_fit::initial_parameters();  // the same values for both models
  tl::train_state state(model, tl::parameters<Model>(std::vector<float>(initial.flat().begin(), initial.flat().end())),
                        tl::adam{seed_fit::learning_rate});
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t e = 0; e < seed_fit::epochs; ++e) loss = tl::train_step(state, tl::mse, data.x, data.y);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
         double(seed_fit::epochs);
}

int main(int argc, char** argv) {
  const int repetitions = argc > 1 ? std::atoi(argv[1]) : 200;
  const auto data = seed_fit::make_data();
  const auto builtin = seed_fit::make_model();
  const auto lambda = seed_fit::make_lambda_model();
  std::vector<double> a, b;
  float loss_a = 0, loss_b = 0;
  for (int r = 0; r < repetitions + 5; ++r) {
    const double ta = one_run(builtin, data, loss_a), tb = one_run(lambda, data, loss_b);
    if (r >= 5) a.push_back(ta), b.push_back(tb);  // first 5: warm-up
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  const auto median = [](const std::vector<double>& v) { return v[v.size() / 2]; };
  std::printf("tapeless_cpu_seed_step_us %.3f (median of %d x 300 steps; min %.3f, max %.3f; final loss %.5f)\n",
              median(a), repetitions, a.front(), a.back(), double(loss_a));
  std::printf("tapeless_cpu_seed_lambda_gelu_step_us %.3f (median; min %.3f; final loss %.5f; lambda/built-in %.3f)\n",
              median(b), b.front(), double(loss_b), median(b) / median(a));
}
