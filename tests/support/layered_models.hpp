// Models and the check the layered GPU path's tests share (nvcc only).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tapeless/cuda.hpp"
#include "tapeless/tapeless.hpp"
#include "model_check.hpp"

namespace tl_test {

// Issue 8's model (2-128-128-128-1, silu): too large for the tiled kernels' shared
// memory, so the automatic choice takes the layered path.
inline auto issue_model() {
  return tl::chain(tl::dense<2, 128>(tl::silu), tl::dense<128, 128>(tl::silu), tl::dense<128, 128>(tl::silu),
                   tl::dense<128, 1>());
}

// Loss and gradient through the layered path equal the CPU's: 1e-5 relative in float,
// 1e-12 in double. `chunk_bytes` small forces many chunks
// and a partial last one; `regime`: gpu_regime::fused compares the other path instead.
template <class T, class Model, class Loss>
void expect_layered_equals_cpu(const Model& model, const Loss& loss, std::size_t batch, std::uint64_t seed,
                               std::size_t chunk_bytes = std::size_t(64) << 20,
                               tl::gpu_regime regime = tl::gpu_regime::layered) {
  tl::rng gen(seed);
  auto params = tl::init<T>(model, gen);
  for (T& v : tl::flat(params)) v += T(0.05) * T(gen.uniform(-1, 1));  // non-zero biases too
  const auto x = cast<T>(random_batch(gen, Model::inputs, batch, -1.5, 1.5));
  const auto y = cast<T>(random_batch(gen, Model::outputs, batch, 0.05, 1));
  const auto cpu = tl::value_and_grad(loss, model, params, x, y);
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  const auto gpu = tl::value_and_grad(loss, model, params, tl::to_device(x), tl::to_device(y),
                                      tl::matmul_precision::fp32, regime, chunk_bytes);
  EXPECT_LE(std::abs(double(gpu.loss) - double(cpu.loss)) / std::abs(double(cpu.loss)), tolerance) << "batch " << batch;
  EXPECT_LE(relative_difference(gpu.gradient.flat(), cpu.gradient.flat()), tolerance) << "batch " << batch;
  EXPECT_GT(std::abs(double(gpu.loss)), 0.0);
}

}  // namespace tl_test
