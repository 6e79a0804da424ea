// The GPU tests' one check of an op or model on the device: loss and gradient from
// value_and_grad on the GPU against the CPU's, on the same random float64 data cast
// to the precision under test. (CUDA sources only: it includes the CUDA backend.)
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../support/model_check.hpp"
#include "tapeless/cuda.hpp"

namespace tl_test {

// Float64 parameters (the tests' random ones) at precision T.
template <class T, class Model>
tl::parameters<Model, T> cast(const tl::parameters<Model, double>& p) {
  return tl::parameters<Model, T>(std::vector<T>(p.flat().begin(), p.flat().end()));
}

// Loss and gradient on the GPU equal the CPU's: 1e-5 (float), 1e-12 (double).
template <class T, class Model, class Loss>
void expect_gpu_equals_cpu(const Model& model, const Loss& loss, std::size_t batch, std::uint64_t seed) {
  tl::rng gen(seed);
  const auto p64 = random_parameters(model, gen);
  const auto x64 = random_batch(gen, Model::inputs, batch, -1.5, 1.5);
  const auto y64 = random_batch(gen, Model::outputs, batch, 0.05, 1);
  const auto p = cast<T>(p64);
  const auto x = cast<T>(x64), y = cast<T>(y64);
  const auto cpu = tl::value_and_grad(loss, model, p, x, y);
  const auto gpu = tl::value_and_grad(loss, model, p, tl::to_device(x), tl::to_device(y));
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  EXPECT_LE(std::abs(double(gpu.loss) - double(cpu.loss)) / std::abs(double(cpu.loss)), tolerance) << batch;
  EXPECT_LE(relative_difference(gpu.gradient.flat(), cpu.gradient.flat()), tolerance) << batch;
}

}  // namespace tl_test
