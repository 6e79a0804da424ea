// The tiled kernels (cuda/tiled.hpp) against the CPU path: the scaled fit's
// 1-64-64-1, and chains whose layers pack their weight-gradient sums differently
// (thin layers split by samples and sharing register slots, widths that are not
// multiples of 4, slots that wrap), in fp32 and TF32. Exits 77 (skipped) where no GPU
// is usable; CI still compiles it with nvcc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "../../examples/seed_fit.hpp"
#include "tapeless/cuda.hpp"
#include "../support/model_check.hpp"

namespace {
using tl_test::relative_difference;

template <class Model>
constexpr bool takes_tiled_path = tl::detail::path_for<Model, float> == tl::detail::gpu_path::tiled;

// A model's loss and gradient on the GPU against the CPU, on random inputs in [-1.5,
// 1.5] and targets in [-1, 1], parameters moved off their initialisation.
template <class Model>
void check_tiled(const Model& model, std::size_t batch, tl::matmul_precision precision, double tolerance) {
  static_assert(takes_tiled_path<Model>, "the model must take the tiled kernels");
  tl::rng gen(batch * 13 + 5);
  auto params = tl::init(model, gen);
  for (float& v : tl::flat(params)) v += 0.05f * gen.uniform(-1, 1);
  tl::matrix x(Model::inputs, batch), y(Model::outputs, batch);
  for (float& v : x.values()) v = gen.uniform(-1.5f, 1.5f);
  for (float& v : y.values()) v = gen.uniform(-1, 1);
  const auto cpu = tl::value_and_grad(tl::mse, model, params, x, y);
  const auto gpu = tl::value_and_grad(tl::mse, model, params, tl::to_device(x), tl::to_device(y), precision);
  EXPECT_LE(std::abs(gpu.loss - cpu.loss) / cpu.loss, tolerance) << "batch " << batch;
  EXPECT_LE(relative_difference(gpu.gradient.flat(), cpu.gradient.flat()), tolerance) << "batch " << batch;
}

// 2-16x7-1: every weight gradient split 4 ways by samples, eight layers' sums in two
// register slots; the bias threads wrap into a second slot.
auto thin_deep_model() {
  return tl::chain(tl::dense<2, 16>(tl::tanh), tl::dense<16, 16>(tl::tanh), tl::dense<16, 16>(tl::tanh),
                   tl::dense<16, 16>(tl::tanh), tl::dense<16, 16>(tl::tanh), tl::dense<16, 16>(tl::tanh),
                   tl::dense<16, 16>(tl::tanh), tl::dense<16, 1>());
}
// Split 2 ways, slots wrapping mid-layer; widths that are not multiples of 4 (17, 5:
// partial micro-tiles, no 16-byte weight rows); a 1-output layer split 4 ways.
auto mixed_model() {
  return tl::chain(tl::dense<3, 32>(tl::gelu), tl::dense<32, 32>(tl::silu), tl::dense<32, 17>(tl::tanh),
                   tl::dense<17, 5>(tl::gelu), tl::dense<5, 32>(tl::tanh), tl::dense<32, 1>());
}

TEST(TiledPath, PackedGradientsOfEveryShapeMatchCpu) {
  for (std::size_t batch : {1u, 2u, 31u, 65537u}) {
    check_tiled(thin_deep_model(), batch, tl::matmul_precision::fp32, 1e-5);
    check_tiled(mixed_model(), batch, tl::matmul_precision::fp32, 1e-5);
  }
}

// TF32: the 16-wide layers on tensor cores, the first and last in fp32, in one kernel.
TEST(TiledPath, PackedGradientsWithTensorCoresWithinTheirTolerance) {
  for (std::size_t batch : {31u, 65537u}) check_tiled(thin_deep_model(), batch, tl::matmul_precision::tf32, 1e-2);
}

TEST(TiledPath, SanitizerSizedThinDeepModel) {  // two tiles and a partial one, both precisions
  check_tiled(thin_deep_model(), 150, tl::matmul_precision::fp32, 1e-5);
  check_tiled(thin_deep_model(), 150, tl::matmul_precision::tf32, 1e-2);
}

// fp32 models whose 64-sample tile leaves room for one block a multiprocessor and a
// 32-sample tile for two, and whose widest layer has 61 outputs or more, take tiles of
// 32 (tiled_layout::tile): the grid's 64-4 and a 100-wide layer (rows of whole float4s,
// widths no multiple of 16). The grid's 32-8 would fit two blocks at 32 too, but keeps
// 64 (its layers are thin); TF32 layouts keep 64.
auto grid_64_4() {
  return tl::chain(tl::dense<2, 64>(tl::tanh), tl::dense<64, 64>(tl::tanh), tl::dense<64, 64>(tl::tanh),
                   tl::dense<64, 1>());
}
auto grid_32_8() {
  return tl::chain(tl::dense<2, 32>(tl::silu), tl::dense<32, 32>(tl::silu), tl::dense<32, 32>(tl::tanh),
                   tl::dense<32, 32>(tl::gelu), tl::dense<32, 32>(tl::silu), tl::dense<32, 32>(tl::tanh),
                   tl::dense<32, 32>(tl::silu), tl::dense<32, 1>());
}
auto wide_100() { return tl::chain(tl::dense<2, 100>(tl::gelu), tl::dense<100, 100>(tl::tanh), tl::dense<100, 3>()); }
template <class Model>
constexpr std::size_t fp32_tile = tl::detail::gpu::tiled_layout<Model, tl::matmul_precision::fp32>::tile;
static_assert(tl::detail::gpu::tiled_layout<decltype(grid_64_4()), tl::matmul_precision::tf32>::tile == 64 &&
              fp32_tile<decltype(grid_64_4())> == 32 && fp32_tile<decltype(grid_32_8())> == 64 &&
              fp32_tile<decltype(wide_100())> == 32 && fp32_tile<decltype(thin_deep_model())> == 64);

TEST(TiledPath, ShortTilesMatchCpu) {
  for (std::size_t batch : {1u, 31u, 32u, 33u, 1000u, 70001u}) {
    check_tiled(grid_64_4(), batch, tl::matmul_precision::fp32, 1e-5);
    check_tiled(grid_32_8(), batch, tl::matmul_precision::fp32, 1e-5);
    check_tiled(wide_100(), batch, tl::matmul_precision::fp32, 1e-5);
  }
  check_tiled(grid_64_4(), 70001, tl::matmul_precision::tf32, 1e-2);
}

// One dense layer of 80 outputs (its own first and last layer), and batches around
// whole tiles.
TEST(TiledPath, OneLayerModelMatchesCpu) {
  const auto model = tl::chain(tl::dense<4, 80>(tl::tanh));
  for (std::size_t batch : {1u, 63u, 64u, 65u, 1000u}) check_tiled(model, batch, tl::matmul_precision::fp32, 1e-5);
}

TEST(TiledPath, SanitizerSizedShortTiles) {  // three tiles of 32 and a partial one
  check_tiled(grid_64_4(), 100, tl::matmul_precision::fp32, 1e-5);
}
}  // namespace

namespace {
using tl_test::relative_difference;

// The scaled fit's shape (1-64-64-1, 4353 parameters) runs the tiled kernels.
auto wide_model() { return tl::chain(tl::dense<1, 64>(tl::gelu), tl::dense<64, 64>(tl::gelu), tl::dense<64, 1>()); }

TEST(TiledPath, LossAndGradientMatchCpu) {
  const auto model = wide_model();
  for (std::size_t batch : {2u, 33u, 3000u, 70000u}) {
    const auto data = seed_fit::make_data(9, batch);
    tl::rng gen(batch);
    auto params = tl::init(model, gen);
    for (float& v : tl::flat(params)) v += 0.05f * gen.uniform(-1, 1);
    const auto cpu = tl::value_and_grad(tl::mse, model, params, data.x, data.y);
    const auto gpu = tl::value_and_grad(tl::mse, model, params, tl::to_device(data.x), tl::to_device(data.y));
    EXPECT_LE(std::abs(gpu.loss - cpu.loss) / cpu.loss, 1e-5) << batch;
    EXPECT_LE(relative_difference(gpu.gradient.flat(), cpu.gradient.flat()), 1e-5) << batch;
  }
}

TEST(TiledPath, SanitizerSizedBatch) {  // small enough for racecheck, 4 tiles and a partial one
  const auto model = wide_model();
  const auto data = seed_fit::make_data(8, 100);
  tl::rng gen(3);
  const auto params = tl::init(model, gen);
  const auto cpu = tl::value_and_grad(tl::mse, model, params, data.x, data.y);
  const auto gpu = tl::value_and_grad(tl::mse, model, params, tl::to_device(data.x), tl::to_device(data.y));
  EXPECT_LE(relative_difference(gpu.gradient.flat(), cpu.gradient.flat()), 1e-5);
}

// The wide model trained on the CPU and on the GPU from the same start: the GPU's
// loss history within `tolerance` (relative) of the CPU's, epoch by epoch.
template <class Check>
void fit_against_cpu(tl::matmul_precision precision, std::size_t epochs, double tolerance, Check check) {
  const auto model = wide_model();
  const auto data = seed_fit::make_data(4, 4096);
  tl::rng gen(2);
  tl::train_state cpu(model, tl::init(model, gen), tl::adam{0.01f});
  auto gpu = tl::to_device(cpu, tl::default_device());
  gpu.precision = precision;
  const auto cpu_run = tl::fit(cpu, tl::mse, data.x, data.y, epochs, {.progress = false});
  const auto gpu_run = tl::fit(gpu, tl::mse, tl::to_device(data.x), tl::to_device(data.y), epochs);
  for (std::size_t e = 0; e < epochs; ++e)
    EXPECT_NEAR(gpu_run.loss_history[e], cpu_run.loss_history[e], tolerance * cpu_run.loss_history[e]);
  check(cpu, gpu, gpu_run);
}

TEST(TiledPath, FitMatchesCpu) {
  fit_against_cpu(tl::matmul_precision::fp32, 20, 1e-4, [](const auto& cpu, const auto& gpu, const auto&) {
    EXPECT_LE(relative_difference(gpu.host_params().flat(), cpu.params.flat()), 1e-4);
  });
}
// Tensor cores on TF32 inputs: the 64x64 layer's products lose precision (10-bit
// mantissas), to about 1e-3; the mode must really run (it differs from fp32) and stay
// within its own tolerance.
TEST(TiledPath, Tf32GradientsWithinTheirTolerance) {
  const auto model = wide_model();
  for (std::size_t batch : {100u, 70000u}) {
    const auto data = seed_fit::make_data(5, batch);
    tl::rng gen(batch + 1);
    auto params = tl::init(model, gen);
    for (float& v : tl::flat(params)) v += 0.05f * gen.uniform(-1, 1);
    const auto x = tl::to_device(data.x), y = tl::to_device(data.y);
    const auto cpu = tl::value_and_grad(tl::mse, model, params, data.x, data.y);
    const auto fp32 = tl::value_and_grad(tl::mse, model, params, x, y);
    const auto tf32 = tl::value_and_grad(tl::mse, model, params, x, y, tl::matmul_precision::tf32);
    const double loss_error = std::abs(tf32.loss - cpu.loss) / cpu.loss;
    const double gradient_error = relative_difference(tf32.gradient.flat(), cpu.gradient.flat());
    EXPECT_LE(loss_error, 5e-3) << batch;
    EXPECT_LE(gradient_error, 1e-2) << batch;
    EXPECT_GT(relative_difference(tf32.gradient.flat(), fp32.gradient.flat()), 1e-6) << "tf32 ran as fp32";
    std::printf("tf32, batch %zu: loss %.2e, gradient %.2e (relative to the CPU)\n", batch, loss_error, gradient_error);
  }
}

TEST(TiledPath, Tf32FitFollowsCpu) {
  fit_against_cpu(tl::matmul_precision::tf32, 50, 2e-2, [](const auto&, const auto&, const auto& gpu_run) {
    EXPECT_LT(gpu_run.loss_history.back(), 0.5 * gpu_run.loss_history.front());
  });
}
}  // namespace
