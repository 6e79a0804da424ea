// The layer-at-a-time GPU path on models with other layers than dense ones
// (cuda/layered_stages.hpp): layer_norm, skip (holding dense layers, other layers,
// another skip), users' layers (tests/support/odd_layers.hpp), such a layer first and
// last, against the CPU;
// the general kernel with sums in rows (gpu_regime::fused) on the same models; TF32;
// apply; a fit; bf16 refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "../support/layered_models.hpp"
#include "../support/model_check.hpp"
#include "../support/odd_layers.hpp"
#include "../support/scale_layer.hpp"

namespace {

using tl_test::cast;
using tl_test::expect_layered_equals_cpu;
using tl_test::random_batch;
using tl_test::relative_difference;

constexpr auto swish = [](auto x) { return x * tl::sigmoid(1.702 * x); };

// A residual block (a lambda inside) and a layer_norm before a 1-output head.
inline auto residual() {
  return tl::chain(tl::dense<2, 128>(tl::silu), tl::skip(tl::dense<128, 128>(swish), tl::dense<128, 128>()),
                   tl::layer_norm<128>(), tl::dense<128, 1>(tl::tanh));
}
// layer_norm after a thin first layer (no fused first layer then), a sigmoid layer
// whose slopes come from its outputs, a head of 4.
inline auto normed() {
  return tl::chain(tl::dense<3, 96>(tl::tanh), tl::layer_norm<96>(), tl::dense<96, 96>(tl::sigmoid),
                   tl::dense<96, 4>());
}
// layer_norm first, a skip ending in a user's layer, a 3-output layer after the skip
// (a thin input delta into a stage that is no dense layer), a user's layer last.
inline auto ends_other() {
  return tl::chain(tl::layer_norm<4>(), tl::dense<4, 128>(tl::tanh),
                   tl::skip(tl::dense<128, 128>(tl::relu), scale_layer<128>{}), tl::dense<128, 3>(), scale_layer<3>{});
}
// A skip of other layers only, holding a skip.
inline auto nested() {
  return tl::chain(tl::dense<2, 100>(tl::tanh), tl::skip(tl::layer_norm<100>(), tl::skip(tl::dense<100, 100>(tl::tanh))),
                   tl::dense<100, 100>(tl::gelu), tl::dense<100, 2>());
}

// Users' layers: no parameters (reading its output in the backward) before a skip of two
// other layers side by side (one overwriting its saved values), a width change.
inline auto odd() {
  return tl::chain(tl::dense<3, 128>(tl::tanh), expo_layer<128>{}, tl::skip(tl::layer_norm<128>(), clobber_layer<128>{}),
                   tl::dense<128, 96>(tl::tanh), halve_layer<96>{}, tl::dense<48, 1>());
}

// A skip around the model's first layer (its open stage copies x), then a skip after a
// dense layer and one right after that skip's close: their open stages pass the rows
// below on (no copy), and their identity deltas are added as the dense layer below's
// deltas are made, or straight into the close stage's.
inline auto skips_in_a_row() {
  return tl::chain(tl::skip(tl::dense<3, 3>(tl::tanh)), tl::dense<3, 128>(tl::tanh), tl::skip(tl::dense<128, 128>(tl::tanh)),
                   tl::skip(tl::dense<128, 128>(tl::gelu), tl::dense<128, 128>()), tl::dense<128, 2>());
}

// The widest layer_norm a warp takes (1024: 32 values a lane) and one wider, which takes
// the generic sample stage (cuda/layer_norm_stage.hpp).
template <std::size_t N>
inline auto wide_norm() {
  return tl::chain(tl::dense<2, N>(tl::tanh), tl::layer_norm<N>(), tl::dense<N, 4>(tl::tanh), tl::dense<4, 1>());
}
// A layer_norm last (its deltas straight from the loss: 128 outputs) and two in a row.
inline auto norm_last() {
  return tl::chain(tl::dense<2, 128>(tl::tanh), tl::dense<128, 128>(tl::gelu), tl::layer_norm<128>());
}
inline auto two_norms() {
  return tl::chain(tl::dense<3, 96>(tl::tanh), tl::layer_norm<96>(), tl::layer_norm<96>(), tl::dense<96, 96>(tl::tanh),
                   tl::dense<96, 1>());
}
static_assert(tl::detail::gpu::warp_layer_norm<tl::layer_norm_layer<1024>> &&
              !tl::detail::gpu::warp_layer_norm<tl::layer_norm_layer<1056>>);

template <class Model>
constexpr bool takes_layered = tl::detail::path_for<Model, float> == tl::detail::gpu_path::layered &&
                               tl::detail::path_for<Model, double> == tl::detail::gpu_path::layered;
static_assert(takes_layered<decltype(residual())> && takes_layered<decltype(normed())> &&
              takes_layered<decltype(ends_other())> && takes_layered<decltype(nested())> &&
              takes_layered<decltype(odd())> && takes_layered<decltype(wide_norm<1024>())> &&
              takes_layered<decltype(wide_norm<1056>())> && takes_layered<decltype(norm_last())> &&
              takes_layered<decltype(two_norms())> && takes_layered<decltype(skips_in_a_row())>);
// Small models with other layers keep the general kernel, and do not compile the layered path.
static_assert(!tl::detail::layered_available<decltype(tl::chain(tl::dense<2, 32>(tl::tanh), tl::layer_norm<32>(),
                                                                tl::dense<32, 1>()))>);

template <class T>
void all_match_cpu(std::size_t batch, std::size_t chunk_bytes, tl::gpu_regime regime) {
  expect_layered_equals_cpu<T>(residual(), tl::mse, batch, 1, chunk_bytes, regime);
  expect_layered_equals_cpu<T>(normed(), tl::mse, batch, 2, chunk_bytes, regime);
  expect_layered_equals_cpu<T>(ends_other(), tl::mse, batch, 3, chunk_bytes, regime);
  expect_layered_equals_cpu<T>(nested(), tl::mse, batch, 4, chunk_bytes, regime);
  expect_layered_equals_cpu<T>(odd(), tl::mse, batch, 14, chunk_bytes, regime);
  expect_layered_equals_cpu<T>(skips_in_a_row(), tl::mse, batch, 23, chunk_bytes, regime);
}

TEST(LayeredStages, MatchCpuFloat) {
  for (std::size_t batch : {1u, 2u, 31u, 65537u}) all_match_cpu<float>(batch, std::size_t(64) << 20, tl::gpu_regime::layered);
}
TEST(LayeredStages, MatchCpuDouble) {
  for (std::size_t batch : {1u, 31u, 9001u}) all_match_cpu<double>(batch, std::size_t(64) << 20, tl::gpu_regime::layered);
}
// Chunks of 4096 samples: 9001 samples in three, the last partial.
TEST(LayeredStages, ManyChunksMatchCpu) {
  all_match_cpu<float>(9001, 1, tl::gpu_regime::layered);
  all_match_cpu<double>(9001, 1, tl::gpu_regime::layered);
}
// A warp a sample at its widest, and the generic stage past it; the backward's rows of
// gradients (at most 4096 warps) over a chunk of 9001 samples and of 1. In double: a
// layer_norm of 1024 values from a 2-input layer cancels enough digits that in float
// at a few samples the CPU's own two passes differ by up to 1.2e-5 (9001 samples: 7e-8).
TEST(LayeredStages, WidestLayerNormsMatchCpu) {
  for (std::size_t batch : {1u, 33u, 9001u}) {
    expect_layered_equals_cpu<double>(wide_norm<1024>(), tl::mse, batch, 15);
    expect_layered_equals_cpu<double>(wide_norm<1056>(), tl::mse, batch, 16);
  }
  expect_layered_equals_cpu<float>(wide_norm<1024>(), tl::mse, 9001, 17);
  expect_layered_equals_cpu<float>(wide_norm<1056>(), tl::mse, 9001, 18);
}
TEST(LayeredStages, LayerNormLastAndTwoInARowMatchCpu) {
  for (std::size_t batch : {1u, 31u, 9001u}) {
    expect_layered_equals_cpu<float>(norm_last(), tl::mse, batch, 19);
    expect_layered_equals_cpu<float>(two_norms(), tl::mse, batch, 20);
    expect_layered_equals_cpu<double>(norm_last(), tl::mse, batch, 21, 1);  // 4096-sample chunks
    expect_layered_equals_cpu<double>(two_norms(), tl::mse, batch, 22, 1);
  }
}
// The other path for these models: the general kernel, its sums in rows of global memory.
TEST(LayeredStages, GeneralKernelInRowsMatchesCpu) {
  for (std::size_t batch : {1u, 65u, 3000u}) {
    expect_layered_equals_cpu<float>(residual(), tl::mse, batch, 5, std::size_t(64) << 20, tl::gpu_regime::fused);
    expect_layered_equals_cpu<double>(ends_other(), tl::mse, batch, 6, std::size_t(64) << 20, tl::gpu_regime::fused);
  }
}
TEST(LayeredStages, OtherLosses) {
  expect_layered_equals_cpu<double>(normed(), tl::huber, 777, 7);
  expect_layered_equals_cpu<double>(ends_other(), tl::softmax_cross_entropy, 777, 8);
}

// TF32 products: within 5e-3 of the CPU's gradient and not equal to fp32's (so they ran).
TEST(LayeredStages, Tf32DiffersFromFp32WithinItsTolerance) {
  const auto model = residual();
  tl::rng gen(9);
  const auto p = tl::init<float>(model, gen);
  const auto x = cast<float>(random_batch(gen, 2, 5000, -1.5, 1.5)), y = cast<float>(random_batch(gen, 1, 5000, 0.05, 1));
  const auto cpu = tl::value_and_grad(tl::mse, model, p, x, y);
  const auto dx = tl::to_device(x), dy = tl::to_device(y);
  const auto fp32 = tl::value_and_grad(tl::mse, model, p, dx, dy, tl::matmul_precision::fp32);
  const auto tf32 = tl::value_and_grad(tl::mse, model, p, dx, dy, tl::matmul_precision::tf32);
  const double fp32_error = relative_difference(fp32.gradient.flat(), cpu.gradient.flat());
  const double tf32_error = relative_difference(tf32.gradient.flat(), cpu.gradient.flat());
  EXPECT_LE(fp32_error, 1e-5);
  EXPECT_LE(tf32_error, 5e-3);
  EXPECT_GT(tf32_error, 10 * fp32_error);
  std::printf("layered stages, tf32: gradient %.2e from the CPU (fp32: %.2e)\n", tf32_error, fp32_error);
}

TEST(LayeredStages, Bf16IsRefused) {
  const auto model = residual();
  tl::rng gen(10);
  const auto p = tl::init<float>(model, gen);
  const auto x = tl::to_device(cast<float>(random_batch(gen, 2, 100, -1, 1)));
  const auto y = tl::to_device(cast<float>(random_batch(gen, 1, 100, -1, 1)));
  EXPECT_THROW(tl::value_and_grad(tl::mse, model, p, x, y, tl::matmul_precision::bf16), tl::shape_error);
}

template <class Model>
void apply_matches_cpu(const Model& model) {
  tl::rng gen(11);
  const auto p = tl::init<double>(model, gen);
  const auto x = random_batch(gen, Model::inputs, 3001, -1.5, 1.5);
  const auto cpu = tl::apply(model, p, x);
  const tl::device_buffer<double> params(p.flat().data(), p.flat().size());
  const auto gpu = tl::to_host(tl::apply(model, params, tl::to_device(x), tl::gpu_regime::automatic, 20 << 10));
  EXPECT_LE(relative_difference(gpu.values(), cpu.values()), 1e-12);
}
TEST(LayeredStages, ApplyMatchesCpu) {
  apply_matches_cpu(residual());
  apply_matches_cpu(ends_other());
  apply_matches_cpu(nested());
  apply_matches_cpu(norm_last());
  apply_matches_cpu(skips_in_a_row());
}

// (apply's chunks: 20 KB of activations, so 4096 samples a chunk, and the last partial.)

// 150 Adam steps in double on both devices from the same start.
TEST(LayeredStages, FitFollowsCpu) {
  const auto model = nested();
  tl::rng gen(12);
  const auto p = tl::init<double>(model, gen);
  const auto x = random_batch(gen, 2, 2000, -2, 2);
  tl::basic_matrix<double> y(2, 2000);
  for (std::size_t s = 0; s < 2000; ++s) {
    y(0, s) = std::sin(3 * x(0, s)) * x(1, s);
    y(1, s) = x(0, s) * x(0, s);
  }
  tl::train_state cpu(model, p, tl::adam{0.003});
  auto gpu = tl::to_device(cpu, tl::default_device());
  const auto cpu_run = tl::fit(cpu, tl::mse, x, y, 150, {.progress = false});
  const auto gpu_run = tl::fit(gpu, tl::mse, tl::to_device(x), tl::to_device(y), 150);
  double worst = 0;
  for (std::size_t e = 0; e < 150; ++e)
    worst = std::max(worst, std::abs(gpu_run.loss_history[e] - cpu_run.loss_history[e]) / cpu_run.loss_history[e]);
  EXPECT_LE(worst, 1e-9);
  EXPECT_LT(cpu_run.loss_history.back(), 0.3 * cpu_run.loss_history.front());
  std::printf("layered stages, fit: loss %.4g -> %.4g, worst GPU/CPU history difference %.2e\n",
              cpu_run.loss_history.front(), cpu_run.loss_history.back(), worst);
}

}  // namespace
