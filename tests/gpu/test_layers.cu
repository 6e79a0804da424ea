// Layers, lambda activations and lambda losses on the GPU against the CPU, in float
// and double; the mixed model of the layer-protocol issue trained on both from the
// same parameters; the float64 seed fit against a plain float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <vector>

#include "../../examples/seed_fit.hpp"
#include "../support/gpu_main.hpp"
#include "tapeless/cuda/checkpoint.hpp"
#include "../support/gpu_check.hpp"
#include "../support/model_check.hpp"
#include "../support/scale_layer.hpp"
#include "../support/seed_reference.hpp"

namespace {

using tl_test::random_batch;
using tl_test::random_parameters;
using tl_test::cast;
using tl_test::relative_difference;
using tl_test::expect_gpu_equals_cpu;
constexpr auto gelu_lambda = [](auto x) {
  return 0.5 * x * (1.0 + tl::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
};

auto mixed_model() {
  return tl::chain(tl::dense<2, 8>(tl::gelu),
                   tl::skip(tl::dense<8, 8>([](auto x) { return x * tl::sigmoid(1.702 * x); }), tl::dense<8, 8>()),
                   tl::layer_norm<8>(), tl::dense<8, 1>());
}

template <class Activation>
__global__ void activation_kernel(Activation act, const float* x, float* y, float* d, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = act.value_and_derivative(x[i], d[i]);
}

// An activation's values and slopes at xs, computed in a kernel.
struct device_activation_values {
  std::vector<float> values, slopes;
};
template <class Activation>
device_activation_values on_device(const Activation& act, const std::vector<float>& xs) {
  const int n = int(xs.size());
  tl::device_buffer<float> dx(xs.data(), xs.size()), dy(n), dd(n);
  activation_kernel<<<(n + 63) / 64, 64>>>(act, dx.data(), dy.data(),
                                           dd.data(), n);
  TL_CUDA_CHECK(cudaDeviceSynchronize());
  device_activation_values out{std::vector<float>(n), std::vector<float>(n)};
  dy.copy_to(out.values.data());
  dd.copy_to(out.slopes.data());
  return out;
}

// A lambda activation evaluated in a kernel equals the same object on the host. (It
// did not while expression nodes used [[no_unique_address]]: nvcc's device compiler
// ignores it, so host and device laid the same object out differently, 104 and 192
// bytes, and the kernel read its constants from the wrong places.)
TEST(GpuLayers, LambdaActivationValuesMatchHost) {
  const auto layer = tl::dense<1, 1>(gelu_lambda);
  const auto act = layer.activation;
  std::vector<float> xs;
  for (float x = -4.0f; x <= 4.0f; x += 0.37f) xs.push_back(x);
  const auto [ys, ds] = on_device(act, xs);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    float d;
    const float y = act.value_and_derivative(xs[i], d);
    EXPECT_NEAR(ys[i], y, 1e-5f * std::max(1.0f, std::abs(y))) << "x = " << xs[i];
    EXPECT_NEAR(ds[i], d, 1e-5f * std::max(1.0f, std::abs(d))) << "x = " << xs[i];
  }
}

// The built-in activations whose host forms are tapeless's own (exp, expm1, tanh, erf,
// log1p: core/math.hpp) against CUDA's on the device, far below 0 too (elu's slope
// there is e^x, which its old form e^x - 1 + 1 rounded to 0 below -17).
TEST(GpuLayers, BuiltInActivationValuesMatchHost) {
  std::vector<float> xs;
  for (float x = -30.0f; x <= 8.0f; x += 0.173f) xs.push_back(x);
  xs.push_back(-1e-6f);
  const auto check = [&](const auto& act, const char* name) {
    const auto [ys, ds] = on_device(act, xs);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      float d;
      const float y = act.value_and_derivative(xs[i], d);
      // relative, with an absolute floor at erf's host error (4.4e-7)
      EXPECT_NEAR(ys[i], y, 1e-5f * std::abs(y) + 1e-6f) << name << " at x = " << xs[i];
      EXPECT_NEAR(ds[i], d, 1e-5f * std::abs(d) + 1e-6f) << name << "' at x = " << xs[i];
    }
  };
  check(tl::elu_fn(0.5), "elu");
  check(tl::tanh, "tanh");
  check(tl::gelu_erf, "gelu_erf");
  check(tl::softplus, "softplus");
  check(tl::silu, "silu");
  // elu far below 0: both sides keep e^x's relative accuracy.
  float d_host;
  const float d_device = on_device(tl::elu, {-25.0f}).slopes[0];
  (void)tl::elu.value_and_derivative(-25.0f, d_host);
  EXPECT_NEAR(d_device, std::exp(-25.0), 1e-6 * std::exp(-25.0));
  EXPECT_NEAR(d_host, std::exp(-25.0), 1e-6 * std::exp(-25.0));
}

TEST(GpuLayers, LambdaActivationsAndLossesMatchCpu) {
  const auto model = tl::chain(tl::dense<3, 8>(gelu_lambda), tl::dense<8, 5>(tl::tanh), tl::dense<5, 3>());
  const auto log_cosh = tl::elementwise_loss([](auto yhat, auto y) { return tl::log(tl::cosh(yhat - y)); });
  const auto softmax_ce = tl::sample_loss<3>(
      [](const auto& yhat, const auto& y) { return tl::logsumexp(yhat) * tl::sum(y) - tl::dot(y, yhat); });
  for (std::size_t batch : {1u, 37u, 5000u}) {
    expect_gpu_equals_cpu<float>(model, tl::mse, batch, 1);
    expect_gpu_equals_cpu<float>(model, log_cosh, batch, 2);
    expect_gpu_equals_cpu<float>(model, softmax_ce, batch, 3);
    expect_gpu_equals_cpu<double>(model, log_cosh, batch, 4);
  }
}

// A sample loss over 60 outputs (544 scheduled nodes): device code calls it out of line
// (nn/expression_loss.hpp, inlined_sample_loss_nodes).
TEST(GpuLayers, LargeSampleLossCalledOutOfLineMatchesCpu) {
  const auto model = tl::chain(tl::dense<3, 8>(tl::tanh), tl::dense<8, 60>());
  const auto softmax_ce = tl::sample_loss<60>(
      [](const auto& yhat, const auto& y) { return tl::logsumexp(yhat) * tl::sum(y) - tl::dot(y, yhat); });
  static_assert(tl::graph::schedule_size<std::remove_cvref_t<decltype(softmax_ce.expr_.get())>> >
                tl::inlined_sample_loss_nodes);
  for (std::size_t batch : {1u, 37u, 5000u}) {
    expect_gpu_equals_cpu<float>(model, softmax_ce, batch, 15);
    expect_gpu_equals_cpu<double>(model, softmax_ce, batch, 16);
  }
}

TEST(GpuLayers, LayerNormAndSkipMatchCpu) {
  for (std::size_t batch : {1u, 65u, 3000u}) {
    expect_gpu_equals_cpu<float>(mixed_model(), tl::mse, batch, 5);
    expect_gpu_equals_cpu<double>(mixed_model(), tl::mse, batch, 6);
  }
}

TEST(GpuLayers, DesignDocumentLayerMatchesCpu) {
  const auto model = tl::chain(tl::dense<2, 8>(tl::tanh), scale_layer<8>{}, tl::dense<8, 1>());
  expect_gpu_equals_cpu<float>(model, tl::mse, 1000, 13);
  expect_gpu_equals_cpu<double>(model, tl::mse, 1000, 14);
}

// Over 255 parameters and not only dense layers: the general per-thread kernel.
auto general_model() {
  return tl::chain(tl::dense<3, 24>(tl::silu), tl::skip(tl::dense<24, 24>(tl::tanh)), tl::layer_norm<24>(),
                   tl::dense<24, 2>());
}
using general_model_t = decltype(general_model());
static_assert(tl::detail::fused_path<general_model_t, float> == tl::detail::gpu_path::general);

TEST(GpuLayers, GeneralPathMatchesCpu) {
  const auto model = general_model();
  static_assert(decltype(model)::parameter_count > 255);
  for (std::size_t batch : {2u, 300u, 20000u}) {
    expect_gpu_equals_cpu<float>(model, tl::mse, batch, 7);
    expect_gpu_equals_cpu<double>(model, tl::mse, batch, 8);
  }
}

// The general kernel with block sums V (cuda/general_kernel.hpp, general_sums): its
// partial rows, one of partial_row<P> values per block.
template <tl::detail::gpu::general_sums V, class T>
std::vector<T> general_rows(const tl::parameters<general_model_t, T>& p, const tl::basic_device_matrix<T>& x,
                            const tl::basic_device_matrix<T>& y) {
  tl::device_buffer<T> params(p.flat().data(), p.flat().size()), partials;
  const int blocks = tl::detail::launch_partials<V>(general_model(), tl::mse, params.data(),
                                                    x, y, partials, nullptr, tl::matmul_precision::fp32);
  TL_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> rows(std::size_t(blocks) * tl::detail::gpu::partial_row<general_model_t::parameter_count>);
  partials.copy_to(rows.data(), 0, rows.size());
  return rows;
}

// All three block sums write the same rows (to rounding: their orders differ), and
// each one's rows, added up on the host as reduce_update_kernel adds them, give the
// CPU's loss and gradient. 1e-5 (float), 1e-12 (double). In double, P + 1 = 795 sums
// pass CUB's ring of 512 TempStorages once: its barrier before reuse is exercised
// (and run under compute-sanitizer: bench/gpu/run.sh filters GeneralPath*).
template <class T>
void general_sums_agree(std::size_t batch, std::uint64_t seed) {
  using tl::detail::gpu::general_sums;
  constexpr std::size_t P = general_model_t::parameter_count, R = tl::detail::gpu::partial_row<P>;
  const auto model = general_model();
  tl::rng gen(seed);
  const auto p = cast<T>(random_parameters(model, gen));
  const auto x = cast<T>(random_batch(gen, 3, batch, -1.5, 1.5)), y = cast<T>(random_batch(gen, 2, batch, 0.05, 1));
  const auto cpu = tl::value_and_grad(tl::mse, model, p, x, y);
  const auto dx = tl::to_device(x), dy = tl::to_device(y);
  const auto shuffles = general_rows<general_sums::per_entry_shuffles>(p, dx, dy);
  const auto chunked = general_rows<general_sums::chunked_reduce_scatter>(p, dx, dy);
  const auto cub = general_rows<general_sums::cub_block_reduce>(p, dx, dy);
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  ASSERT_EQ(chunked.size(), shuffles.size());
  ASSERT_EQ(cub.size(), shuffles.size());
  EXPECT_LE(relative_difference(chunked, shuffles), tolerance) << batch;
  EXPECT_LE(relative_difference(cub, shuffles), tolerance) << batch;
  const double scale = tl::detail::loss_scale<double, general_model_t, tl::mse_loss>(batch);
  for (const auto* rows : {&shuffles, &chunked, &cub}) {
    const char* name = rows == &shuffles ? "per_entry_shuffles" : rows == &chunked ? "chunked_reduce_scatter" : "cub";
    std::vector<double> gradient(P, 0.0);
    double loss = 0;
    for (std::size_t b = 0; b * R < rows->size(); ++b) {
      for (std::size_t j = 0; j < P; ++j) gradient[j] += double((*rows)[b * R + j]) * scale;
      loss += double((*rows)[b * R + P]) * scale;
      EXPECT_EQ((*rows)[b * R + P + 1], T(0)) << name << ", block " << b << ": flagged non-finite";
    }
    EXPECT_LE(std::abs(loss - double(cpu.loss)) / std::abs(double(cpu.loss)), tolerance) << name << ", " << batch;
    EXPECT_LE(relative_difference(gradient, cpu.gradient.flat()), tolerance) << name << ", " << batch;
  }
}

TEST(GpuLayers, GeneralPathSumVariantsAgree) {
  for (std::size_t batch : {2u, 300u, 20000u}) {
    general_sums_agree<float>(batch, 30);
    general_sums_agree<double>(batch, 31);
  }
}

// The mixed model trains 200 Adam steps on both devices from the same parameters.
// In double the histories agree to 1e-10. In float two bounds: the first
// early_steps losses within 1e-5 (measured 1.9e-7 here and 2.2e-6 for the wide model
// below: a wrong value in a gradient or an update shows within them; a gradient off by
// a constant factor, which Adam does not see, is the direct checks' above), and the
// whole history within 1e-3 or, where float itself drifts further on this trajectory,
// 4 times the CPU's own float-vs-double difference on the same data. Adam divides by
// sqrt(v), so a rounding difference in a small gradient moves a parameter by a step of
// ~lr whatever its size, and two float runs that add their sums in different orders
// drift apart: 1.7e-4 after 200 steps here (H100, 2026-12-07), more than float drifts
// from double on the CPU (4e-5 since Adam forms 1 - beta in double; 8e-4 before).
inline constexpr std::size_t early_steps = 20;
template <class T>
double history_difference(const std::vector<double>& a, const std::vector<double>& b, std::size_t steps = ~std::size_t(0)) {
  double worst = 0;
  for (std::size_t e = 0; e < std::min(steps, b.size()); ++e) worst = std::max(worst, std::abs(a[e] - b[e]) / b[e]);
  return worst;
}

template <class T, class Model>
void trains_alike(const Model& model, std::size_t batch, bool one_launch, const char* name, double lr = 0.01,
                  std::size_t steps = 200) {
  // one_launch asks for the one-block loop, which fit takes only where it is the faster
  // (detail::one_block_fits): the batch must be one it takes, or this tests the per-step path twice.
  if (one_launch) ASSERT_TRUE(tl::detail::one_block_fits<Model>(batch)) << name << ", batch " << batch;
  tl::rng gen(9);
  const auto p64 = random_parameters(model, gen);
  const auto params = cast<T>(p64);
  const auto x = cast<T>(random_batch(gen, 2, batch, -2, 2));
  tl::basic_matrix<T> y(1, batch);
  for (std::size_t s = 0; s < batch; ++s) y(0, s) = static_cast<T>(std::sin(3 * x(0, s)) * x(1, s));
  tl::train_state cpu(model, params, tl::adam{lr});
  auto gpu = tl::to_device(cpu, tl::default_device());
  const auto cpu_run = tl::fit(cpu, tl::mse, x, y, steps, {.progress = false});
  tl::cuda_fit_options options;
  options.one_launch = one_launch;
  const auto gpu_run = tl::fit(gpu, tl::mse, tl::to_device(x), tl::to_device(y), steps, options);
  ASSERT_EQ(gpu_run.loss_history.size(), steps);
  double tolerance = 1e-10, early_tolerance = 1e-10, precision_drift = 0;
  if constexpr (std::is_same_v<T, float>) {  // the same start and data, in double, on the CPU
    using M = std::remove_cvref_t<decltype(model)>;
    const tl::parameters<M, double> wide_params(std::vector<double>(params.flat().begin(), params.flat().end()));
    tl::train_state wide(model, wide_params, tl::adam{lr});
    const auto wide_run =
        tl::fit(wide, tl::mse, x.template cast<double>(), y.template cast<double>(), steps, {.progress = false});
    precision_drift = history_difference<T>(cpu_run.loss_history, wide_run.loss_history);
    tolerance = std::max(1e-3, 4 * precision_drift);
    early_tolerance = 1e-5;
  }
  const double worst = history_difference<T>(gpu_run.loss_history, cpu_run.loss_history);
  const double worst_early = history_difference<T>(gpu_run.loss_history, cpu_run.loss_history, early_steps);
  EXPECT_LE(worst_early, early_tolerance);
  EXPECT_LE(worst, tolerance);
  EXPECT_LT(cpu_run.loss_history.back(), 0.5 * cpu_run.loss_history.front());
  std::printf("%s, %s, batch %zu, %s: loss %.4g -> %.4g, worst GPU/CPU history difference %.2e, in the first %zu "
              "steps %.2e (CPU float vs double: %.2e)\n",
              name, std::is_same_v<T, float> ? "float" : "double", batch, one_launch ? "one launch" : "per step",
              cpu_run.loss_history.front(), cpu_run.loss_history.back(), worst, early_steps, worst_early,
              precision_drift);
}

TEST(GpuLayers, MixedModelTrainsLikeCpuInFloat) {
  trains_alike<float>(mixed_model(), 256, true, "mixed model");
  trains_alike<float>(mixed_model(), 256, false, "mixed model");
}
TEST(GpuLayers, MixedModelTrainsLikeCpuInDouble) {
  trains_alike<double>(mixed_model(), 256, true, "mixed model");
  trains_alike<double>(mixed_model(), 256, false, "mixed model");
}

// Past 8192 parameters, models with other layers than dense ones take the layered path
// (tests/gpu/test_layered_stages.cu has more) or, under gpu_regime::fused, the general
// kernel with its sums in rows of global memory (wide_general_sums_kernel): for
// 2-128-skip(128, 128)-norm-1, 33.8k parameters, 3968 rows in float (as many as fit
// 512 MB), so at 9000 samples each thread runs two or three.
auto wide_residual_model() {
  return tl::chain(tl::dense<2, 128>(tl::silu), tl::skip(tl::dense<128, 128>(gelu_lambda), tl::dense<128, 128>()),
                   tl::layer_norm<128>(), tl::dense<128, 1>(tl::tanh));
}
static_assert(tl::detail::general_sums_in_rows<decltype(wide_residual_model())>);

TEST(GpuLayers, WideModelsWithOtherLayersMatchCpu) {
  const auto model = wide_residual_model();
  using model_t = decltype(model);
  EXPECT_EQ((tl::detail::gpu::wide_general_rows<model_t, float>(9000)), 3968u);
  for (std::size_t batch : {1u, 65u, 9000u}) {
    expect_gpu_equals_cpu<float>(model, tl::mse, batch, 40);
    expect_gpu_equals_cpu<double>(model, tl::mse, batch, 41);
  }
}
// 100 steps of Adam(0.003): at 0.01, or over 200 steps, this model's trajectory is
// chaotic enough that the order of the sums alone moves the loss by 1e-7 in double and
// 2e-3 in float (the CPU's two passes differ so too); over these 100 steps the CPU's
// passes differ by 2e-15 and 5e-6.
TEST(GpuLayers, WideModelWithOtherLayersTrainsLikeCpu) {
  trains_alike<float>(wide_residual_model(), 300, false, "2-128-skip(128,128)-norm-1", 0.003, 100);
  trains_alike<double>(wide_residual_model(), 300, false, "2-128-skip(128,128)-norm-1", 0.003, 100);
}

TEST(SeedFit, Float64OnGpuMatchesPlainReference) {
  const auto data = seed_fit::make_data();
  const auto x = cast<double>(tl::basic_matrix<double>(1, data.x.batch(), {data.x.values().begin(), data.x.values().end()}));
  const auto y = cast<double>(tl::basic_matrix<double>(1, data.y.batch(), {data.y.values().begin(), data.y.values().end()}));
  tl::rng gen(42);
  const auto params = tl::init<double>(seed_fit::make_model(), gen);
  tl::cuda_train_state gpu(seed_fit::make_model(), params, tl::adam{0.01});
  const auto run = tl::fit(gpu, tl::mse, tl::to_device(x), tl::to_device(y), seed_fit::epochs);
  const auto reference = tl_test::seed_fit_float64({params.flat().begin(), params.flat().end()},
                                                   {x.values().begin(), x.values().end()},
                                                   {y.values().begin(), y.values().end()}, int(seed_fit::epochs));
  double worst = 0;
  for (std::size_t e = 0; e < seed_fit::epochs; ++e)
    worst = std::max(worst, std::abs(run.loss_history[e] - reference.loss_history[e]) / reference.loss_history[e]);
  EXPECT_LE(worst, 1e-10);
  EXPECT_LE(relative_difference(gpu.host_params().flat(), reference.params), 1e-10);
  std::printf("float64 seed fit on the GPU: worst loss difference to the plain reference %.2e\n", worst);
}

// Save at step 150 on the GPU, load into a fresh state, 150 more: the history of an
// uninterrupted 300-step run, within 1e-6.
TEST(Checkpoint, GpuRunResumesWhereItStopped) {
  const auto model = mixed_model();
  tl::rng gen(12);
  const auto params = tl::init(model, gen);
  const auto x = cast<float>(random_batch(gen, 2, 256, -2, 2)), y = cast<float>(random_batch(gen, 1, 256, -1, 1));
  const auto dx = tl::to_device(x), dy = tl::to_device(y);
  tl::cuda_train_state whole(model, params, tl::adam{0.01});
  const auto run = tl::fit(whole, tl::mse, dx, dy, 300);
  tl::cuda_train_state first(model, params, tl::adam{0.01});
  auto history = tl::fit(first, tl::mse, dx, dy, 150).loss_history;
  const auto path = std::filesystem::temp_directory_path() / "tapeless_gpu_resume.safetensors";
  tl::save(path, first);
  tl::cuda_train_state second(model, tl::init(model, gen), tl::adam{0.01});
  tl::load(path, second);
  const auto rest = tl::fit(second, tl::mse, dx, dy, 150).loss_history;
  history.insert(history.end(), rest.begin(), rest.end());
  ASSERT_EQ(history.size(), 300u);
  for (std::size_t e = 0; e < 300; ++e) EXPECT_NEAR(history[e], run.loss_history[e], 1e-6 * run.loss_history[e]) << e;
  EXPECT_LE(relative_difference(second.host_params().flat(), whole.host_params().flat()), 1e-6);
  std::filesystem::remove(path);
}

}  // namespace
