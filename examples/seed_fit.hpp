// The seed fit's data and model, shared by the example, the tests and the benchmarks:
// 128 evenly spaced x in [-2, 2], y = x^2 - 2x + 0.1 N(0, 1), Dense(1=>16, gelu) ->
// Dense(16=>1), MSE, Adam(0.01), 300 full-batch steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tapeless/tapeless.hpp"

namespace seed_fit {

inline constexpr std::size_t points = 128;
inline constexpr std::size_t epochs = 300;
inline constexpr float learning_rate = 0.01f;

inline auto make_model() { return tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>()); }
using model_type = decltype(make_model());

// The same model with gelu written as a lambda: its derivative comes from the
// expression core (benchmarked against the built-in, which has a hand-written one).
inline auto make_lambda_model() {
  const auto gelu = [](auto x) { return 0.5 * x * (1.0 + tl::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); };
  return tl::chain(tl::dense<1, 16>(gelu), tl::dense<16, 1>());
}

struct data {
  tl::matrix x, y;
};

inline data make_data(std::uint64_t seed = 1, std::size_t n = points) {
  tl::rng noise(seed);
  std::vector<float> xs(n), ys(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double x = n > 1 ? -2.0 + 4.0 * double(i) / double(n - 1) : 0.0;
    xs[i] = static_cast<float>(x);
    ys[i] = static_cast<float>(x * x - 2.0 * x + 0.1 * noise.normal());
  }
  return {tl::matrix(1, n, std::move(xs)), tl::matrix(1, n, std::move(ys))};
}

inline tl::parameters<model_type> initial_parameters(std::uint64_t seed = 42) {
  tl::rng generator(seed);
  return tl::init(make_model(), generator);
}

}  // namespace seed_fit
