// The layer-at-a-time GPU path (cuda/layered.hpp) against the CPU: losses, gradients,
// outputs and fits, for widths 1 to 1024, depth up to 16, odd batches, chunked
// batches, float and double (its errors: test_layered_errors.cu, in the same binary).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "../support/gpu_main.hpp"
#include "../support/layered_models.hpp"
#include "../support/model_check.hpp"

namespace {

using tl_test::random_batch;
using tl_test::cast;
using tl_test::relative_difference;

using tl_test::expect_layered_equals_cpu;

// A layer of width W between wider ones: small widths on a model large enough for the
// layered path (over 255 parameters).
template <std::size_t W>
auto bottleneck() {
  return tl::chain(tl::dense<2, 64>(tl::tanh), tl::dense<64, W>(tl::gelu), tl::dense<W, 1>());
}

template <std::size_t W>
auto three_layers() {
  return tl::chain(tl::dense<2, W>(tl::tanh), tl::dense<W, W>(tl::gelu), tl::dense<W, 1>());
}

template <std::size_t... I>
auto deep_model(std::index_sequence<I...>) {  // 16 dense layers, 64 wide
  return tl::chain(tl::dense<3, 64>(tl::tanh), (void(I), tl::dense<64, 64>(tl::tanh))..., tl::dense<64, 2>());
}

TEST(Layered, ChosenForModelsTooLargeForTheTiledKernels) {
  static_assert(tl::detail::path_for<decltype(tl_test::issue_model()), float> == tl::detail::gpu_path::layered);
  static_assert(tl::detail::path_for<decltype(three_layers<1024>()), double> == tl::detail::gpu_path::layered);
  static_assert(tl::detail::path_for<decltype(three_layers<64>()), float> == tl::detail::gpu_path::tiled);
  // Wide and shallow: too wide for a tile in shared memory; the general kernel could
  // hold its 4097 sums, but automatic choice takes the GEMMs.
  using wide_shallow = decltype(tl::chain(tl::dense<2, 1024>(tl::tanh), tl::dense<1024, 1>()));
  static_assert(tl::detail::path_for<wide_shallow, float> == tl::detail::gpu_path::layered);
  static_assert(tl::detail::fused_path<wide_shallow, float> == tl::detail::gpu_path::general);
  SUCCEED();
}

TEST(Layered, WidthsAndOddBatchesMatchCpuFloat) {
  for (std::size_t batch : {1u, 2u, 31u, 65537u}) {
    expect_layered_equals_cpu<float>(bottleneck<1>(), tl::mse, batch, 1);
    expect_layered_equals_cpu<float>(bottleneck<3>(), tl::mse, batch, 2);
    expect_layered_equals_cpu<float>(three_layers<17>(), tl::mse, batch, 3);
    expect_layered_equals_cpu<float>(tl_test::issue_model(), tl::mse, batch, 4);
  }
  for (std::size_t batch : {1u, 31u, 1000u}) expect_layered_equals_cpu<float>(three_layers<1024>(), tl::mse, batch, 5);
}

TEST(Layered, WidthsAndOddBatchesMatchCpuDouble) {
  for (std::size_t batch : {1u, 31u, 65537u}) {
    expect_layered_equals_cpu<double>(three_layers<17>(), tl::mse, batch, 6);
    expect_layered_equals_cpu<double>(tl_test::issue_model(), tl::huber, batch, 7);
  }
  expect_layered_equals_cpu<double>(three_layers<1024>(), tl::mse, 300, 8);
}

TEST(Layered, DeepModelAndOtherLossesMatchCpu) {
  const auto deep = deep_model(std::make_index_sequence<14>{});
  static_assert(decltype(deep)::depth == 16);
  expect_layered_equals_cpu<float>(deep, tl::mse, 5000, 9);
  expect_layered_equals_cpu<double>(deep, tl::mse, 777, 10);
  const auto classifier = tl::chain(tl::dense<4, 96>(tl::relu), tl::dense<96, 5>());
  expect_layered_equals_cpu<float>(classifier, tl::softmax_cross_entropy, 4099, 11);
}

// Products of up to 4 terms (a first layer's inputs, a last layer's outputs for the
// input delta) run as elementwise kernels, from 5 as GEMMs: both sides of the edge.
TEST(Layered, ThinProductsAtTheEdgeMatchCpu) {
  const auto four_in_five_out = tl::chain(tl::dense<4, 300>(tl::tanh), tl::dense<300, 5>(tl::gelu));
  const auto five_in_four_out = tl::chain(tl::dense<5, 300>(tl::silu), tl::dense<300, 4>());
  for (std::size_t batch : {3u, 4099u}) {
    expect_layered_equals_cpu<float>(four_in_five_out, tl::mse, batch, 23);
    expect_layered_equals_cpu<float>(five_in_four_out, tl::mse, batch, 24);
    expect_layered_equals_cpu<double>(four_in_five_out, tl::huber, batch, 25);
    expect_layered_equals_cpu<double>(five_in_four_out, tl::mse, batch, 26);
  }
}

// Heads of up to 4 outputs are trained in one kernel with the loss
// (cuda/layered.hpp, head_loss_kernel): every loss, heads with an activation, head
// inputs that leave its groups of lanes partly idle (5 inputs: 8 lanes; 33: 32 lanes,
// a second round for one of them), over chunks and odd batches; 5 outputs keep the
// product and loss_delta_kernel.
TEST(Layered, FusedHeadsWithEveryLossMatchCpu) {
  const auto three_classes = tl::chain(tl::dense<3, 120>(tl::tanh), tl::dense<120, 33>(tl::silu), tl::dense<33, 3>());
  const auto logit = tl::chain(tl::dense<2, 150>(tl::gelu), tl::dense<150, 5>(tl::tanh), tl::dense<5, 1>());
  const auto two_gelu = tl::chain(tl::dense<6, 64>(tl::tanh), tl::dense<64, 64>(tl::tanh), tl::dense<64, 2>(tl::gelu));
  using namespace tl::detail::gpu;
  static_assert(fuses_head<decltype(three_classes)> && fuses_head<decltype(logit)> && fuses_head<decltype(two_gelu)>);
  static_assert(!fuses_head<decltype(tl::chain(tl::dense<4, 96>(tl::relu), tl::dense<96, 5>()))>);
  static_assert(head_lanes(5) == 8 && head_lanes(33) == 32 && head_lanes(3) == 4);
  for (std::size_t batch : {1u, 31u, 65537u}) {
    expect_layered_equals_cpu<float>(three_classes, tl::softmax_cross_entropy, batch, 61, 1 << 20);
    expect_layered_equals_cpu<float>(logit, tl::binary_cross_entropy_with_logits, batch, 62);
    expect_layered_equals_cpu<float>(two_gelu, tl::huber, batch, 63, 1 << 20);
    expect_layered_equals_cpu<double>(three_classes, tl::softmax_cross_entropy, batch, 64);
    expect_layered_equals_cpu<double>(two_gelu, tl::mae, batch, 65, 1 << 20);
  }
}

// Hidden layers whose activation's derivative is a function of its value (sigmoid,
// relu, tanh, identity) have it recomputed from their outputs by the input-delta
// kernel (slopes_from_outputs): after GEMMs and thin products, with the next layer's
// input delta from a GEMM and from a thin product (3 and 1 outputs), beside layers
// that keep their slopes (gelu, a lambda, a fused first layer, last layers), over
// chunks and odd batches, float and double.
TEST(Layered, SlopesRecomputedFromOutputsMatchCpu) {
  const auto mixed = tl::chain(tl::dense<6, 40>(tl::sigmoid), tl::dense<40, 48>(tl::relu), tl::dense<48, 3>(tl::tanh),
                               tl::dense<3, 56>(tl::identity), tl::dense<56, 64>(tl::gelu), tl::dense<64, 2>(tl::tanh));
  const auto field = tl::chain(tl::dense<2, 80>(tl::tanh), tl::dense<80, 80>([](auto x) { return x * tl::sigmoid(x); }),
                               tl::dense<80, 70>(tl::sigmoid), tl::dense<70, 1>());
  using namespace tl::detail::gpu;
  using A = decltype(mixed);
  using B = decltype(field);
  static_assert(slopes_from_outputs<A, 0> && slopes_from_outputs<A, 1> && slopes_from_outputs<A, 2> &&
                slopes_from_outputs<A, 3> && !slopes_from_outputs<A, 4> && !slopes_from_outputs<A, 5>);
  static_assert(forward_writes_slopes<A, 4> && forward_writes_slopes<A, 5> && !forward_writes_slopes<A, 0>);
  static_assert(!forward_writes_slopes<B, 0> && forward_writes_slopes<B, 1> && !forward_writes_slopes<B, 2> &&
                forward_writes_slopes<B, 3>);
  for (std::size_t batch : {1u, 31u, 65537u}) {
    expect_layered_equals_cpu<float>(mixed, tl::mse, batch, 66, 1 << 20);
    expect_layered_equals_cpu<float>(field, tl::mse, batch, 67, 1 << 20);
    expect_layered_equals_cpu<double>(mixed, tl::huber, batch, 68, 1 << 20);
    expect_layered_equals_cpu<double>(field, tl::mse, batch, 69);
  }
}

// The neural-field shape: a thin first layer whose gradient comes with the thin last
// layer's backward (fuses_first_layer, thin second layer), over several chunks, float
// and double; and apply writing the thin last layer straight to y.
TEST(Layered, ThinFirstAndLastLayersOverChunksMatchCpu) {
  const auto field = tl::chain(tl::dense<2, 300>(tl::tanh), tl::dense<300, 1>());
  static_assert(tl::detail::gpu::fuses_first_layer<decltype(field)>);
  for (std::size_t batch : {1u, 257u, 10001u}) {
    expect_layered_equals_cpu<float>(field, tl::mse, batch, 27, 20 << 10);
    expect_layered_equals_cpu<double>(field, tl::mse, batch, 28, 20 << 10);
  }
  tl::rng gen(29);
  const auto params = tl::init<double>(field, gen);
  const auto x = random_batch(gen, 2, 9001, -2, 2);
  const tl::device_buffer<double> p(params.flat().data(), params.flat().size());
  const auto gpu = tl::to_host(tl::apply(field, p, tl::to_device(x), tl::gpu_regime::automatic, 20 << 10));
  EXPECT_LE(relative_difference(gpu.values(), tl::apply(field, params, x).values()), 1e-12);
}

// A thin second layer that is not the last: its weight gradient comes from the first
// layer's recomputed activations (fuses_second_layer_weights) while its deltas come
// from the layer after it.
TEST(Layered, ThinSecondLayerInsideAChainMatchesCpu) {
  const auto model = tl::chain(tl::dense<3, 200>(tl::gelu), tl::dense<200, 3>(tl::silu), tl::dense<3, 150>(tl::tanh),
                               tl::dense<150, 2>());
  static_assert(tl::detail::gpu::fuses_second_layer_weights<decltype(model)>);
  for (std::size_t batch : {5u, 5003u}) {
    expect_layered_equals_cpu<float>(model, tl::mse, batch, 31, 20 << 10);
    expect_layered_equals_cpu<double>(model, tl::mse, batch, 32, 20 << 10);
  }
}

// The fused first layer's kernel at widths under a warp (1, 17), across two column
// blocks with a partial one (130) and wide (1024), at batches of one slice, a partial
// warp, one past a power of two (more slices than the kernel's limit), and a chunked one.
TEST(Layered, FirstLayerOfEveryWidthMatchesCpu) {
  const auto one = tl::chain(tl::dense<1, 1>(tl::tanh), tl::dense<1, 100>(tl::silu), tl::dense<100, 2>());
  const auto seventeen = tl::chain(tl::dense<3, 17>(tl::gelu), tl::dense<17, 20>(tl::tanh), tl::dense<20, 1>());
  const auto wide = tl::chain(tl::dense<2, 130>(tl::tanh), tl::dense<130, 1>());
  const auto widest = tl::chain(tl::dense<2, 1024>(tl::silu), tl::dense<1024, 2>());
  for (std::size_t batch : {1u, 2u, 31u, 65537u}) {
    expect_layered_equals_cpu<float>(one, tl::mse, batch, 41);
    expect_layered_equals_cpu<double>(seventeen, tl::mse, batch, 42);
    expect_layered_equals_cpu<float>(wide, tl::mse, batch, 43);
    expect_layered_equals_cpu<float>(widest, tl::mse, batch, 44, 2 << 20);
  }
}

// TF32 and bf16 with a thin first layer, whose fused kernel works in fp32 on deltas that
// come from low-precision products. In the neural-field shape (2-300-1) only the last
// layer's forward is a product (one output column, which cuBLASLt may run without tensor
// cores under TF32), so it is held to the tolerances only; with a wide layer between
// (2-256-256-1) the result is also shown to differ from fp32, so the mode really ran.
TEST(Layered, LowPrecisionWithThinFirstLayer) {
  const auto thin = tl::chain(tl::dense<2, 300>(tl::tanh), tl::dense<300, 1>());
  const auto wide = tl::chain(tl::dense<2, 256>(tl::tanh), tl::dense<256, 256>(tl::silu), tl::dense<256, 1>());
  static_assert(tl::detail::gpu::fuses_first_layer<decltype(thin)> &&
                tl::detail::gpu::fuses_first_layer<decltype(wide)>);
  tl::rng gen(33);
  const auto xh = cast<float>(random_batch(gen, 2, 10001, -1.5, 1.5));
  const auto yh = cast<float>(random_batch(gen, 1, 10001, 0.05, 1));
  // The relative difference of loss and gradient from the CPU's fp32 result.
  const auto difference = [&](const auto& model, tl::matmul_precision precision) {
    const auto params = tl::init(model, gen);
    const auto cpu = tl::value_and_grad(tl::mse, model, params, xh, yh);
    const auto low = tl::value_and_grad(tl::mse, model, params, tl::to_device(xh), tl::to_device(yh), precision,
                                        tl::gpu_regime::layered, 20 << 10);
    return std::pair{std::abs(double(low.loss) - double(cpu.loss)) / double(cpu.loss),
                     relative_difference(low.gradient.flat(), cpu.gradient.flat())};
  };
  for (const auto& [precision, tolerance] :
       {std::pair{tl::matmul_precision::tf32, 5e-3}, std::pair{tl::matmul_precision::bf16, 3e-2}}) {
    const auto [thin_loss, thin_gradient] = difference(thin, precision);
    EXPECT_LE(thin_loss, tolerance);
    EXPECT_LE(thin_gradient, tolerance);
    const auto [wide_loss, wide_gradient] = difference(wide, precision);
    EXPECT_LE(wide_loss, tolerance);
    EXPECT_LE(wide_gradient, tolerance);
    EXPECT_GT(wide_gradient, 1e-6);  // the mode ran
  }
}

// bf16 over several chunks (beta = 1 on bfloat16 products, each chunk's inputs
// converted) with a first layer of 5 inputs (a GEMM reading the bfloat16 inputs).
TEST(Layered, Bf16OverChunksWithinTolerance) {
  const auto model = tl::chain(tl::dense<5, 128>(tl::silu), tl::dense<128, 128>(tl::tanh), tl::dense<128, 2>());
  tl::rng gen(30);
  const auto params = tl::init(model, gen);
  const auto xh = cast<float>(random_batch(gen, 5, 10001, -1.5, 1.5));
  const auto yh = cast<float>(random_batch(gen, 2, 10001, 0.05, 1));
  const auto cpu = tl::value_and_grad(tl::mse, model, params, xh, yh);
  const auto low = tl::value_and_grad(tl::mse, model, params, tl::to_device(xh), tl::to_device(yh),
                                      tl::matmul_precision::bf16, tl::gpu_regime::layered, 20 << 10);
  EXPECT_LE(std::abs(double(low.loss) - double(cpu.loss)) / double(cpu.loss), 3e-2);
  EXPECT_LE(relative_difference(low.gradient.flat(), cpu.gradient.flat()), 3e-2);
  EXPECT_GT(relative_difference(low.gradient.flat(), cpu.gradient.flat()), 1e-6);  // bf16 ran
}

// fit captures its steps as a graph holding the state's buffers; a train_step on a
// larger batch grows (reallocates) them, so the next fit of the first shape must
// capture again, not replay freed memory. On the layered and per-thread paths.
template <class Model>
void expect_fit_after_larger_step_matches_cpu(const Model& model, std::uint64_t seed) {
  tl::rng gen(seed);
  const auto xa = cast<float>(random_batch(gen, Model::inputs, 3000, -1, 1));
  const auto ya = cast<float>(random_batch(gen, 1, 3000, 0, 1));
  const auto xb = cast<float>(random_batch(gen, Model::inputs, 70000, -1, 1));
  const auto yb = cast<float>(random_batch(gen, 1, 70000, 0, 1));
  tl::train_state cpu(model, tl::init(model, gen), tl::adam{1e-3f});
  auto gpu = tl::to_device(cpu, tl::default_device());
  const auto dxa = tl::to_device(xa), dya = tl::to_device(ya);
  const tl::cuda_fit_options per_step{.one_launch = false};
  tl::fit(gpu, tl::mse, dxa, dya, 5, per_step);
  tl::fit(cpu, tl::mse, xa, ya, 5, {.progress = false});
  const float b_gpu = tl::train_step(gpu, tl::mse, tl::to_device(xb), tl::to_device(yb)).get();
  const float b_cpu = tl::train_step(cpu, tl::mse, xb, yb);
  EXPECT_NEAR(b_gpu, b_cpu, 1e-4 * b_cpu);
  const auto again_gpu = tl::fit(gpu, tl::mse, dxa, dya, 5, per_step);
  const auto again_cpu = tl::fit(cpu, tl::mse, xa, ya, 5, {.progress = false});
  for (std::size_t e = 0; e < 5; ++e)
    EXPECT_NEAR(again_gpu.loss_history[e], again_cpu.loss_history[e], 1e-4 * again_cpu.loss_history[e]) << e;
  EXPECT_LE(relative_difference(gpu.host_params().flat(), cpu.params.flat()), 1e-4);
}

TEST(Layered, FitAfterALargerTrainStepCapturesAgain) {
  expect_fit_after_larger_step_matches_cpu(tl_test::issue_model(), 31);
  expect_fit_after_larger_step_matches_cpu(tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>()), 32);
}

TEST(Layered, ManyChunksMatchOneChunk) {
  // 20 KB of activations a chunk: the clamp makes it 4096 samples, so 10001 samples
  // are 3 chunks, the last partial; the gradient rows add over chunks.
  expect_layered_equals_cpu<float>(tl_test::issue_model(), tl::mse, 10001, 12, 20 << 10);
  expect_layered_equals_cpu<double>(three_layers<33>(), tl::mse, 9000, 13, 1);
}

TEST(Layered, ApplyMatchesCpu) {
  const auto model = tl_test::issue_model();
  tl::rng gen(14);
  const auto params = tl::init(model, gen);
  const auto x = cast<float>(random_batch(gen, 2, 9001, -2, 2));
  const auto cpu = tl::apply(model, params, x);
  const tl::device_buffer<float> p(params.flat().data(), params.flat().size());
  const auto gpu = tl::to_host(tl::apply(model, p, tl::to_device(x), tl::gpu_regime::automatic, 20 << 10));
  EXPECT_LE(relative_difference(gpu.values(), cpu.values()), 1e-5);
}

// 50 Adam steps of the issue's model on both devices from the same start.
TEST(Layered, FitMatchesCpu) {
  const auto model = tl_test::issue_model();
  tl::rng gen(15);
  const auto x = cast<float>(random_batch(gen, 2, 3000, -1, 1));
  tl::basic_matrix<float> y(1, x.batch());
  for (std::size_t s = 0; s < x.batch(); ++s) y(0, s) = std::sin(3 * x(0, s)) * std::cos(2 * x(1, s));
  tl::train_state cpu(model, tl::init(model, gen), tl::adam{1e-3f});
  auto gpu = tl::to_device(cpu, tl::default_device());
  const auto cpu_run = tl::fit(cpu, tl::mse, x, y, 50, {.progress = false});
  const auto gpu_run = tl::fit(gpu, tl::mse, tl::to_device(x), tl::to_device(y), 50);
  ASSERT_EQ(gpu_run.loss_history.size(), 50u);
  for (std::size_t e = 0; e < 50; ++e)
    EXPECT_NEAR(gpu_run.loss_history[e], cpu_run.loss_history[e], 1e-4 * cpu_run.loss_history[e]) << e;
  EXPECT_LT(gpu_run.loss_history.back(), 0.9 * gpu_run.loss_history.front());
  EXPECT_LE(relative_difference(gpu.host_params().flat(), cpu.params.flat()), 1e-4);
  // train_step and a second fit (the captured graph replayed) continue the same run.
  const auto more_cpu = tl::fit(cpu, tl::mse, x, y, 5, {.progress = false});
  const auto more_gpu = tl::fit(gpu, tl::mse, tl::to_device(x), tl::to_device(y), 5);
  EXPECT_NEAR(more_gpu.loss_history.back(), more_cpu.loss_history.back(), 1e-4 * more_cpu.loss_history.back());
  EXPECT_EQ(gpu.step, 55);
}

// The regimes give the same training on a model both can take (the tiled kernels'
// 2-64-64-1); the per-thread seed model cannot take the layered path.
TEST(Layered, ForcedLayeredEqualsFusedPaths) {
  const auto wide = three_layers<64>();
  const auto seed = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(16);
  const auto x = cast<float>(random_batch(gen, 2, 5000, -1, 1));
  const auto y = cast<float>(random_batch(gen, 1, 5000, 0, 1));
  tl::train_state cpu(wide, tl::init(wide, gen), tl::adam{1e-3f});
  auto fused = tl::to_device(cpu, tl::default_device()), layered = fused;
  layered.regime = tl::gpu_regime::layered;
  const auto a = tl::fit(fused, tl::mse, tl::to_device(x), tl::to_device(y), 20);
  const auto b = tl::fit(layered, tl::mse, tl::to_device(x), tl::to_device(y), 20);
  for (std::size_t e = 0; e < 20; ++e) EXPECT_NEAR(a.loss_history[e], b.loss_history[e], 1e-5 * a.loss_history[e]);
  // The seed model trains on the per-thread kernels only (its program leaves the GEMMs out).
  const auto seed_params = tl::init(seed, gen);
  const auto xs = tl::to_device(cast<float>(random_batch(gen, 1, 100, -1, 1)));
  const auto ys = tl::to_device(cast<float>(random_batch(gen, 1, 100, 0, 1)));
  EXPECT_THROW(tl::value_and_grad(tl::mse, seed, seed_params, xs, ys, tl::matmul_precision::fp32,
                                  tl::gpu_regime::layered),
               tl::shape_error);
}

// Tensor cores: TF32 (10-bit mantissas) and bf16 (8-bit) inputs with fp32 sums. Each
// mode must really run (differ from fp32) and stay within its documented tolerance of
// the CPU: 5e-3 (TF32) and 3e-2 (bf16) relative, on the loss and the gradient.
TEST(Layered, TensorCoreGradientsWithinTheirTolerance) {
  const auto model = tl_test::issue_model();
  for (std::size_t batch : {33u, 20000u}) {
    tl::rng gen(batch);
    auto params = tl::init(model, gen);
    const auto xh = cast<float>(random_batch(gen, 2, batch, -1.5, 1.5));
    const auto yh = cast<float>(random_batch(gen, 1, batch, 0.05, 1));
    const auto x = tl::to_device(xh), y = tl::to_device(yh);
    const auto cpu = tl::value_and_grad(tl::mse, model, params, xh, yh);
    {
      const auto layered = tl::gpu_regime::layered;
      const std::size_t chunk = tl::detail::gpu::default_chunk_bytes;
      const auto fp32 = tl::value_and_grad(tl::mse, model, params, x, y, tl::matmul_precision::fp32, layered, chunk);
      std::vector<float> tf32_gradient;
      for (const auto& [precision, tolerance] : {std::pair{tl::matmul_precision::tf32, 5e-3},
                                                std::pair{tl::matmul_precision::bf16, 3e-2}}) {
        const auto low = tl::value_and_grad(tl::mse, model, params, x, y, precision, layered, chunk);
        if (precision == tl::matmul_precision::tf32)
          tf32_gradient.assign(low.gradient.flat().begin(), low.gradient.flat().end());
        else  // bf16 really ran: its 8-bit mantissas are not TF32's 10
          EXPECT_GT(relative_difference(low.gradient.flat(), tf32_gradient), 1e-5);
        const double loss_error = std::abs(double(low.loss) - double(cpu.loss)) / double(cpu.loss);
        const double gradient_error = relative_difference(low.gradient.flat(), cpu.gradient.flat());
        std::printf("%s, batch %zu: loss %.2e, gradient %.2e from the CPU (fp32 path: %.2e)\n",
                    precision == tl::matmul_precision::tf32 ? "tf32" : "bf16", batch, loss_error,
                    gradient_error, relative_difference(fp32.gradient.flat(), cpu.gradient.flat()));
        EXPECT_LE(loss_error, tolerance);
        EXPECT_LE(gradient_error, tolerance);
        EXPECT_GT(relative_difference(low.gradient.flat(), fp32.gradient.flat()), 1e-6);  // the mode ran
      }
    }
  }
}

TEST(Layered, Bf16FitTracksFp32) {  // fp32 master weights and Adam state: bf16 trains as fp32 does
  const auto model = tl_test::issue_model();
  tl::rng gen(21);
  const auto x = cast<float>(random_batch(gen, 2, 4096, -1, 1));
  tl::basic_matrix<float> y(1, x.batch());
  for (std::size_t s = 0; s < x.batch(); ++s) y(0, s) = std::sin(3 * x(0, s)) * std::cos(2 * x(1, s));
  auto fp32 = tl::to_device(tl::train_state(model, tl::init(model, gen), tl::adam{1e-3f}), tl::default_device());
  auto bf16 = fp32;
  bf16.precision = tl::matmul_precision::bf16;
  const auto a = tl::fit(fp32, tl::mse, tl::to_device(x), tl::to_device(y), 100);
  const auto b = tl::fit(bf16, tl::mse, tl::to_device(x), tl::to_device(y), 100);
  double differ = 0;
  for (std::size_t e = 0; e < 100; ++e) {
    EXPECT_NEAR(b.loss_history[e], a.loss_history[e], 0.05 * a.loss_history[e]) << e;
    differ = std::max(differ, std::abs(b.loss_history[e] - a.loss_history[e]));
  }
  EXPECT_GT(differ, 0.0);  // the bf16 products ran
}

}  // namespace
