// The CUDA backend against the CPU path: loss and gradients for every activation and
// loss, the seed fit, the one-launch loop against the per-step path, and errors.
// Exits 77 (skipped) where no GPU is usable; CI still compiles it with nvcc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "../../examples/seed_fit.hpp"
#include "tapeless/cuda.hpp"
#include "../support/activations.hpp"
#include "../support/gelu64.hpp"
#include "../support/gpu_main.hpp"

namespace {

template <class A, class B>
double relative_difference(const A& a, const B& b) {
  double diff = 0, norm = 0;
  for (std::size_t k = 0; k < b.size(); ++k) {
    diff += (double(a[k]) - b[k]) * (double(a[k]) - b[k]);
    norm += double(b[k]) * b[k];
  }
  return std::sqrt(diff / norm);
}

template <class Activation, class Loss>
void check_against_cpu(Activation act, const Loss& loss, bool probability_targets, std::size_t batch) {
  const auto model = tl::chain(tl::dense<3, 8>(act), tl::dense<8, 5>(act), tl::dense<5, 3>());
  tl::rng gen(batch * 7 + 1);
  auto params = tl::init(model, gen);
  for (float& v : tl::flat(params)) v += 0.05f * gen.uniform(-1, 1);
  tl::matrix x(3, batch), y(3, batch);
  for (float& v : x.values()) v = gen.uniform(-1.5f, 1.5f);
  for (std::size_t s = 0; s < batch; ++s) {
    float total = 0;
    for (int o = 0; o < 3; ++o) total += (y(o, s) = probability_targets ? gen.uniform(0.05f, 1) : gen.uniform(-1, 1));
    if (probability_targets) for (int o = 0; o < 3; ++o) y(o, s) /= total;
  }
  const auto cpu = tl::value_and_grad(loss, model, params, x, y);
  const auto gpu = tl::value_and_grad(loss, model, params, tl::to_device(x), tl::to_device(y));
  EXPECT_LE(std::abs(gpu.loss - cpu.loss) / std::abs(cpu.loss), 1e-5) << Activation::name;
  EXPECT_LE(relative_difference(gpu.gradient.flat(), cpu.gradient.flat()), 1e-5) << Activation::name;
}

template <class Activation>
void check_activation(Activation act) {
  for (std::size_t batch : {1u, 37u, 300u, 5000u}) check_against_cpu(act, tl::mse, false, batch);
}

#define TL_ACTIVATION_TEST(Name, activation) \
  TEST(GpuMatchesCpu, Name) { check_activation(activation); }
TL_FOR_EACH_ACTIVATION(TL_ACTIVATION_TEST)
#undef TL_ACTIVATION_TEST
TEST(GpuMatchesCpu, Losses) {
  check_against_cpu(tl::tanh, tl::mae, false, 300);
  check_against_cpu(tl::tanh, tl::huber, false, 300);
  check_against_cpu(tl::tanh, tl::binary_cross_entropy_with_logits, true, 300);
  check_against_cpu(tl::tanh, tl::softmax_cross_entropy, true, 300);
}

TEST(SeedFit, GpuOneLaunchEndsWithinOneInTenThousandOfCpu) {
  const auto data = seed_fit::make_data();
  tl::train_state cpu(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{seed_fit::learning_rate});
  tl::fit(cpu, tl::mse, data.x, data.y, seed_fit::epochs, {.progress = false});
  auto gpu = tl::to_device(tl::train_state(seed_fit::make_model(), seed_fit::initial_parameters(),
                                           tl::adam{seed_fit::learning_rate}), tl::default_device());
  const auto x = tl::to_device(data.x), y = tl::to_device(data.y);
  const auto run = tl::fit(gpu, tl::mse, x, y, seed_fit::epochs);
  ASSERT_EQ(run.loss_history.size(), seed_fit::epochs);
  EXPECT_EQ(gpu.step, long(seed_fit::epochs));
  const float cpu_loss = tl::value_and_grad(tl::mse, cpu.model, cpu.params, data.x, data.y).loss;
  const float gpu_loss = tl::value_and_grad(tl::mse, gpu.model, gpu.host_params(), data.x, data.y).loss;
  std::printf("seed fit final loss: cpu %.7f, gpu %.7f\n", cpu_loss, gpu_loss);
  EXPECT_LE(std::abs(gpu_loss - cpu_loss) / cpu_loss, 1e-4);
  EXPECT_LE(relative_difference(gpu.host_params().flat(), cpu.params.flat()), 1e-4);
}

TEST(SeedFit, OneLaunchEqualsPerStepGraphPath) {
  const auto data = seed_fit::make_data();
  const auto x = tl::to_device(data.x), y = tl::to_device(data.y);
  tl::cuda_train_state a(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  tl::cuda_train_state b = a;
  tl::cuda_fit_options per_step;
  per_step.one_launch = false;
  // Two fits of 60 epochs each: the second replays the captured graph from step 60.
  for (int round = 0; round < 2; ++round) {
    const auto one = tl::fit(a, tl::mse, x, y, 60);
    const auto many = tl::fit(b, tl::mse, x, y, 60, per_step);
    ASSERT_EQ(one.loss_history.size(), many.loss_history.size());
    for (std::size_t e = 0; e < 60; ++e)
      EXPECT_NEAR(one.loss_history[e], many.loss_history[e], 1e-5 * many.loss_history[e]) << round << "," << e;
  }
  EXPECT_LE(relative_difference(a.host_params().flat(), b.host_params().flat()), 1e-5);
  EXPECT_EQ(a.step, 120);
  EXPECT_EQ(b.step, 120);
}

TEST(SeedFit, ThreadCountsOfTheOneLaunchLoopAgree) {
  const auto data = seed_fit::make_data();
  const auto x = tl::to_device(data.x), y = tl::to_device(data.y);
  const tl::cuda_train_state initial(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  auto reference = initial;
  tl::fit(reference, tl::mse, x, y, 50);
  for (int threads : {32, 64, 96, 256}) {
    auto s = initial;
    tl::cuda_fit_options options;
    options.threads = threads;
    tl::fit(s, tl::mse, x, y, 50, options);
    EXPECT_LE(relative_difference(s.host_params().flat(), reference.host_params().flat()), 1e-5) << threads;
  }
}

TEST(LargeBatch, PerStepGraphPathMatchesCpu) {
  // 20000 samples: past the one-block limit, so fit() runs the captured per-step graph.
  const auto data = seed_fit::make_data(5, 20000);
  tl::train_state cpu(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  auto gpu = tl::to_device(cpu, tl::default_device());
  const auto cpu_run = tl::fit(cpu, tl::mse, data.x, data.y, 30, {.progress = false});
  const auto gpu_run = tl::fit(gpu, tl::mse, tl::to_device(data.x), tl::to_device(data.y), 30);
  ASSERT_EQ(gpu_run.loss_history.size(), 30u);
  for (std::size_t e = 0; e < 30; ++e) EXPECT_NEAR(gpu_run.loss_history[e], cpu_run.loss_history[e], 1e-4 * cpu_run.loss_history[e]);
  EXPECT_LE(relative_difference(gpu.host_params().flat(), cpu.params.flat()), 1e-4);
}

// A fit longer than one captured graph (detail::graph_steps = 128 steps) replays it and
// launches the rest as they are: 300 epochs = 2 replays + 44 steps, then 200 more (the
// cached graph again + 72). The same kernels as 500 train_steps, in the same order.
TEST(LargeBatch, FitsLongerThanOneGraphEqualTrainSteps) {
  const auto data = seed_fit::make_data(6, 20000);  // past the one-block limit: per-step path
  const auto x = tl::to_device(data.x), y = tl::to_device(data.y);
  tl::cuda_train_state fitted(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  tl::cuda_train_state stepped = fitted;
  std::vector<double> history;
  for (const std::size_t epochs : {300u, 200u}) {
    const auto run = tl::fit(fitted, tl::mse, x, y, epochs);
    ASSERT_EQ(run.loss_history.size(), epochs);
    history.insert(history.end(), run.loss_history.begin(), run.loss_history.end());
  }
  EXPECT_EQ(fitted.step, 500);
  for (std::size_t e = 0; e < 500; ++e) {
    const float loss = tl::train_step(stepped, tl::mse, x, y).get();
    EXPECT_NEAR(history[e], loss, 1e-6 * loss) << e;
  }
  EXPECT_LE(relative_difference(fitted.host_params().flat(), stepped.host_params().flat()), 1e-6);
  EXPECT_EQ(tl::fit(fitted, tl::mse, x, y, 0).loss_history.size(), 0u);
  EXPECT_EQ(fitted.step, 500);
  EXPECT_THROW((void)tl::fit(fitted, tl::mse, x, y, std::size_t(-1)), std::invalid_argument);
  EXPECT_EQ(fitted.step, 500);
}

// Every built-in optimizer through both fit paths (one launch at 128 samples, the
// per-step graphs at 20000): AdamW's decay and SGD's momentum as the CPU applies them.
template <class Optimizer>
void fits_like_cpu(const Optimizer& optimizer, std::size_t batch) {
  const auto data = seed_fit::make_data(7, batch);
  tl::train_state cpu(seed_fit::make_model(), seed_fit::initial_parameters(), optimizer);
  auto gpu = tl::to_device(cpu, tl::default_device());
  const auto cpu_run = tl::fit(cpu, tl::mse, data.x, data.y, 40, {.progress = false});
  const auto gpu_run = tl::fit(gpu, tl::mse, tl::to_device(data.x), tl::to_device(data.y), 40);
  for (std::size_t e = 0; e < 40; ++e) EXPECT_NEAR(gpu_run.loss_history[e], cpu_run.loss_history[e], 1e-4 * cpu_run.loss_history[e]);
  EXPECT_LE(relative_difference(gpu.host_params().flat(), cpu.params.flat()), 1e-4);
  std::vector<float> state(gpu.optimizer_state.size());
  gpu.optimizer_state.copy_to(state.data());
  EXPECT_LE(relative_difference(state, cpu.optimizer_state), 1e-3);
  EXPECT_EQ(gpu.step, 40);
}
TEST(Optimizers, AdamWAndSgdMomentumMatchCpuOnBothFitPaths) {
  for (const std::size_t batch : {128u, 20000u}) {
    fits_like_cpu(tl::adamw{.lr = 0.01, .weight_decay = 0.1}, batch);
    fits_like_cpu(tl::sgd{.lr = 0.01, .momentum = 0.9}, batch);
  }
}

TEST(TrainStep, LossStaysOnDeviceAndMatchesCpu) {
  const auto data = seed_fit::make_data();
  tl::cuda_train_state s(seed_fit::make_model(), seed_fit::initial_parameters(), tl::sgd{0.05f});
  const auto expected = tl::value_and_grad(tl::mse, s.model, seed_fit::initial_parameters(), data.x, data.y);
  const tl::device_scalar loss = tl::train_step(s, tl::mse, tl::to_device(data.x), tl::to_device(data.y));
  EXPECT_NEAR(loss.get(), expected.loss, 1e-5 * expected.loss);
  const auto p = s.host_params();
  const auto p0 = seed_fit::initial_parameters();
  for (std::size_t k = 0; k < p.size; ++k)
    EXPECT_NEAR(p.flat()[k], p0.flat()[k] - 0.05f * expected.gradient.flat()[k], 1e-6);
}

TEST(Apply, MatchesCpuAndMovesWithPipe) {
  const auto data = seed_fit::make_data(2, 1000);
  const auto params = seed_fit::initial_parameters();
  tl::cuda_train_state s(seed_fit::make_model(), params, tl::adam{0.01f});
  const tl::matrix gpu = tl::apply(s, data.x | tl::cuda_device()) | tl::cpu_device();
  const tl::matrix cpu = tl::apply(seed_fit::make_model(), params, data.x);
  ASSERT_EQ(gpu.batch(), 1000u);
  for (std::size_t k = 0; k < 1000; ++k) EXPECT_NEAR(gpu(0, k), cpu(0, k), 1e-5f * std::max(1.0f, std::abs(cpu(0, k))));
  // Host parameters with a device batch: the same kernel, the same outputs.
  const tl::matrix from_host = tl::apply(seed_fit::make_model(), params, data.x | tl::cuda_device()) | tl::cpu_device();
  EXPECT_EQ(from_host, gpu);
}

// The loss alone on the device: the fused apply kernel (seed model) and the layered
// path (a 128-wide chain), against the CPU's evaluate_loss and the device gradient pass.
TEST(EvaluateLoss, MatchesCpuOnFusedAndLayeredApply) {
  const auto data = seed_fit::make_data(3, 4097);
  const auto params = seed_fit::initial_parameters();
  const tl::cuda_train_state s(seed_fit::make_model(), params, tl::adam{0.01f});
  const auto dx = tl::to_device(data.x), dy = tl::to_device(data.y);
  const float cpu = tl::evaluate_loss(tl::mse, seed_fit::make_model(), params, data.x, data.y);
  EXPECT_NEAR(tl::evaluate_loss(tl::mse, s, dx, dy), cpu, 1e-5f * cpu);
  EXPECT_NEAR(tl::evaluate_loss(tl::mse, seed_fit::make_model(), params, dx, dy), cpu, 1e-5f * cpu);
  const auto wide = tl::chain(tl::dense<1, 128>(tl::tanh), tl::dense<128, 128>(tl::tanh), tl::dense<128, 3>());
  tl::rng gen(4);
  const auto wide_params = tl::init(wide, gen);
  tl::matrix targets(3, data.x.batch());
  for (float& v : targets.values()) v = gen.uniform(0.1f, 1.0f);
  const auto dt = tl::to_device(targets);
  const float expected = tl::evaluate_loss(tl::softmax_cross_entropy, wide, wide_params, data.x, targets);
  const tl::device_buffer<float> on_device(wide_params.data(), wide_params.size);
  for (const auto regime : {tl::gpu_regime::automatic, tl::gpu_regime::layered})
    EXPECT_NEAR(tl::evaluate_loss(tl::softmax_cross_entropy, wide, on_device, dx, dt, regime), expected, 1e-5f * expected);
  EXPECT_NEAR(tl::value_and_grad(tl::softmax_cross_entropy, wide, wide_params, dx, dt).loss, expected, 1e-5f * expected);
  EXPECT_THROW((void)tl::evaluate_loss(tl::mse, s, dx, tl::to_device(tl::matrix(1, 4096))), tl::shape_error);
}

// Mini-batches cut on the device equal the host's, and a shuffled mini-batch loop of
// train_steps follows the CPU's.
TEST(DeviceMatrix, SamplesMatchTheHostsAndTrainLikeTheCpu) {
  const auto data = seed_fit::make_data(9, 300);
  const auto dx = tl::to_device(data.x), dy = tl::to_device(data.y);
  EXPECT_EQ(tl::to_host(dx.samples(17, 40)), data.x.samples(17, 40));
  std::vector<std::size_t> order(300);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = (i * 7919) % 300;  // a permutation (7919 is prime)
  EXPECT_EQ(tl::to_host(dx.samples(order)), data.x.samples(order));
  EXPECT_EQ(dx.samples(300, 0).batch(), 0u);
  EXPECT_THROW((void)dx.samples(290, 11), tl::shape_error);
  const std::vector<std::size_t> bad{0, 300};
  EXPECT_THROW((void)dx.samples(bad), tl::shape_error);
  tl::train_state cpu(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  auto gpu = tl::to_device(cpu, tl::default_device());
  for (std::size_t first = 0; first < order.size(); first += 64) {
    const auto batch = std::span<const std::size_t>(order).subspan(first, std::min<std::size_t>(64, order.size() - first));
    const float expected = tl::train_step(cpu, tl::mse, data.x.samples(batch), data.y.samples(batch));
    EXPECT_NEAR(tl::train_step(gpu, tl::mse, dx.samples(batch), dy.samples(batch)).get(), expected, 1e-5f * expected);
  }
  EXPECT_LE(relative_difference(gpu.host_params().flat(), cpu.params.flat()), 1e-5);
}

// A mini-batch loop's cut: an epoch's order uploaded once, each step's samples into
// matrices reused across steps. Equal to the host's cuts, no reallocation once sized,
// errors that leave `out` as it was, and a loop of train_steps that follows the CPU's.
TEST(DeviceMatrix, SamplesIntoReusesMemoryAndTrainsLikeTheCpu) {
  const auto data = seed_fit::make_data(11, 301);
  const auto dx = tl::to_device(data.x), dy = tl::to_device(data.y);
  tl::rng gen(2);
  const std::vector<std::size_t> order = gen.permutation(301);
  const tl::device_indices device_order(order);
  EXPECT_EQ(device_order.size(), 301u);
  EXPECT_EQ(device_order.largest(), 300u);
  EXPECT_TRUE(device_order.all_below(301));
  EXPECT_FALSE(device_order.all_below(300));
  tl::device_matrix xb, yb;
  dx.samples_into(xb, device_order, 64, 64);
  const auto subset = std::span<const std::size_t>(order).subspan(64, 64);
  EXPECT_EQ(tl::to_host(xb), data.x.samples(subset));
  const float* storage = xb.data();
  dx.samples_into(xb, device_order, 128, 64);  // the same size again: the same memory
  EXPECT_EQ(xb.data(), storage);
  EXPECT_EQ(tl::to_host(xb), data.x.samples(std::span<const std::size_t>(order).subspan(128, 64)));
  dx.samples_into(xb, device_order, 300, 1);  // smaller: the last sample alone
  EXPECT_EQ(xb.batch(), 1u);
  EXPECT_EQ(tl::to_host(xb), data.x.samples(std::span<const std::size_t>(order).subspan(300, 1)));
  dx.samples_into(xb, device_order, 301, 0);
  EXPECT_EQ(xb.batch(), 0u);
  // Errors: the range, an index beyond the matrix, the matrix itself as `out`.
  dx.samples_into(xb, device_order, 0, 31);
  const auto before = tl::to_host(xb);
  EXPECT_THROW(dx.samples_into(xb, device_order, 290, 12), tl::shape_error);
  EXPECT_THROW(dx.samples_into(xb, device_order, 302, 0), tl::shape_error);
  const auto small = tl::to_device(data.x.samples(0, 200));
  EXPECT_THROW(small.samples_into(xb, device_order, 0, 10), tl::shape_error);  // order holds sample 300
  const std::vector<std::size_t> with_sentinel{0, std::size_t(-1)};  // largest + 1 would wrap to 0
  EXPECT_THROW(dx.samples_into(xb, tl::device_indices(with_sentinel), 0, 1), tl::shape_error);
  auto self = dx;
  EXPECT_THROW(self.samples_into(self, device_order, 0, 10), std::invalid_argument);
  EXPECT_EQ(tl::to_host(xb), before);
  EXPECT_EQ(tl::to_host(self), data.x);
  // Training on the cuts, steps of 64 and a last one of 45, as on the CPU.
  tl::train_state cpu(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  auto gpu = tl::to_device(cpu, tl::default_device());
  for (std::size_t first = 0; first < order.size(); first += 64) {
    const std::size_t count = std::min<std::size_t>(64, order.size() - first);
    const auto batch = std::span<const std::size_t>(order).subspan(first, count);
    const float expected = tl::train_step(cpu, tl::mse, data.x.samples(batch), data.y.samples(batch));
    dx.samples_into(xb, device_order, first, count);
    dy.samples_into(yb, device_order, first, count);
    EXPECT_NEAR(tl::train_step(gpu, tl::mse, xb, yb).get(), expected, 1e-5f * expected);
  }
  EXPECT_LE(relative_difference(gpu.host_params().flat(), cpu.params.flat()), 1e-5);
}

// A cut larger than the gather kernel's grid (4096 blocks of 256 threads: 1048576
// values), so each thread gathers several values; and a matrix of no features, whose
// cut is empty whatever the count (a launch of 0 blocks would be an error).
TEST(DeviceMatrix, LargeCutsAndFeaturelessMatricesGather) {
  constexpr std::size_t features = 40, samples = 60000, taken = 50000;  // 2 million values
  tl::matrix x(features, samples);
  for (std::size_t s = 0; s < samples; ++s)
    for (std::size_t f = 0; f < features; ++f) x(f, s) = float(s) + float(f) / 64.0f;  // exact in float
  const auto dx = tl::to_device(x);
  tl::rng gen(5);
  std::vector<std::size_t> order = gen.permutation(samples);
  order.resize(taken);
  tl::device_matrix cut;
  dx.samples_into(cut, tl::device_indices(order), 0, taken);
  ASSERT_EQ(cut.features(), features);
  ASSERT_EQ(cut.batch(), taken);
  EXPECT_EQ(tl::to_host(cut), x.samples(order));
  const auto none = tl::to_device(tl::matrix(0, 5));
  tl::device_matrix empty;
  none.samples_into(empty, tl::device_indices(std::vector<std::size_t>{4, 0, 2}), 0, 3);
  EXPECT_EQ(empty.features(), 0u);
  EXPECT_EQ(empty.batch(), 3u);
  EXPECT_EQ(none.samples(std::vector<std::size_t>{1, 3}).batch(), 2u);
}

TEST(Errors, WrongSizeBatchThrows) {
  const auto data = seed_fit::make_data();
  tl::cuda_train_state s(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  const auto x = tl::to_device(data.x);
  const auto short_y = tl::to_device(tl::matrix(1, data.x.batch() - 1));
  EXPECT_THROW(tl::train_step(s, tl::mse, x, short_y), tl::shape_error);
  EXPECT_THROW(tl::fit(s, tl::mse, x, short_y, 3), tl::shape_error);
  EXPECT_THROW(tl::value_and_grad(tl::mse, s.model, seed_fit::initial_parameters(), tl::to_device(tl::matrix(2, 4)),
                                  tl::to_device(tl::matrix(1, 4))),
               tl::shape_error);
}

TEST(Errors, NonFiniteLossThrowsAndKeepsParameters) {
  auto data = seed_fit::make_data();
  data.y(0, 3) = std::numeric_limits<float>::quiet_NaN();
  for (bool one_launch : {true, false}) {
    tl::cuda_train_state s(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
    tl::cuda_fit_options options;
    options.one_launch = one_launch;
    try {
      tl::fit(s, tl::mse, tl::to_device(data.x), tl::to_device(data.y), 5, options);
      ADD_FAILURE() << "no exception";
    } catch (const tl::numeric_error& e) {
      EXPECT_NE(std::string(e.what()).find("the loss is not finite at step 1 (y holds NaN at feature 0 of sample 3)"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(s.host_params(), seed_fit::initial_parameters()) << "one_launch " << one_launch;
  }
}

// An Inf input: a finite loss, a NaN gradient; no path may apply the step.
TEST(Errors, NonFiniteGradientThrowsAndKeepsParameters) {
  const auto model = tl::chain(tl::dense<1, 8>(tl::tanh), tl::dense<8, 1>());
  tl::rng gen(3);
  const auto params = tl::init(model, gen);
  auto data = seed_fit::make_data();
  data.x(0, 7) = std::numeric_limits<float>::infinity();
  const auto x = tl::to_device(data.x), y = tl::to_device(data.y);
  for (bool one_launch : {true, false}) {
    tl::cuda_train_state s(model, params, tl::adam{0.01f});
    tl::cuda_fit_options options;
    options.one_launch = one_launch;
    try {
      tl::fit(s, tl::mse, x, y, 5, options);
      ADD_FAILURE() << "no exception";
    } catch (const tl::numeric_error& e) {
      // and names the sample, as the CPU's message does
      EXPECT_NE(std::string(e.what()).find("the gradient is not finite at step 1 (x holds an infinity at feature 0 of "
                                           "sample 7)"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(s.host_params(), params) << "one_launch " << one_launch;
    EXPECT_EQ(s.step, 0);
  }
  tl::cuda_train_state s(model, params, tl::adam{0.01f});
  tl::train_step(s, tl::mse, x, y);  // no host synchronization: reported by check_finite
  EXPECT_THROW(tl::check_finite(s), tl::numeric_error);
  EXPECT_EQ(s.host_params(), params);
  // The tiled path (4353 parameters) too.
  const auto wide = tl::chain(tl::dense<1, 64>(tl::tanh), tl::dense<64, 64>(tl::tanh), tl::dense<64, 1>());
  const auto wide_params = tl::init(wide, gen);
  tl::cuda_train_state w(wide, wide_params, tl::adam{0.01f});
  EXPECT_THROW(tl::fit(w, tl::mse, x, y, 3), tl::numeric_error);
  EXPECT_EQ(w.host_params(), wide_params);
}

TEST(Devices, MissingDeviceIsAClearError) {
  try {
    tl::cuda_device(99);
    FAIL() << "no exception";
  } catch (const tl::cuda_error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda_device(99)"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(tl::default_device().is_cuda());
  EXPECT_EQ(tl::cuda_unavailable_reason(), "");
}

// progress = true reports the finished run's losses on stderr, on both GPU paths (one
// launch, and the per-step graph); designated initializers reach every option.
TEST(Fit, ProgressIsReportedAfterTheRun) {
  const auto data = seed_fit::make_data();
  for (const bool one_launch : {true, false}) {
    tl::cuda_train_state s(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
    testing::internal::CaptureStderr();
    const auto run = tl::fit(s, tl::mse, tl::to_device(data.x), tl::to_device(data.y), 30,
                             {.progress = true, .log_every = 10, .one_launch = one_launch});
    const std::string lines = testing::internal::GetCapturedStderr();
    char expected[64];
    std::snprintf(expected, sizeof expected, "epoch 10/30  loss %.6g\n", run.loss_history[9]);
    EXPECT_EQ(lines.rfind(expected, 0), 0u) << lines;
    EXPECT_NE(lines.find("epoch 30/30  loss "), std::string::npos) << lines;
    EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 3) << lines;
    testing::internal::CaptureStderr();
    tl::fit(s, tl::mse, tl::to_device(data.x), tl::to_device(data.y), 5);  // silent by default
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  }
}

}  // namespace


namespace {
__global__ void tanh_kernel(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = tl::math::tanh(x[i]);
}

TEST(DeviceMath, TanhAbsoluteErrorBelow4e7) {
  std::vector<float> xs;
  for (float x = -30.0f; x <= 30.0f; x += 0.000731f) xs.push_back(x);
  tl::device_buffer<float> dx(xs.data(), xs.size()), dy(xs.size());
  tanh_kernel<<<int((xs.size() + 255) / 256), 256>>>(dx.data(),
                                                     dy.data(), int(xs.size()));
  TL_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ys(xs.size());
  dy.copy_to(ys.data());
  double worst = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) worst = std::max(worst, std::abs(ys[i] - std::tanh(double(xs[i]))));
  EXPECT_LT(worst, 4e-7);
}

__global__ void gelu_kernel(const float* x, float* y, float* slope, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = tl::gelu_fn{}.value_and_derivative(x[i], slope[i]);  // a temporary: tl::gelu is host-only
}

// The device GELU (sigmoid form, hardware exp and reciprocal) against float64.
TEST(DeviceMath, GeluAndSlopeMatchFloat64) {
  std::vector<float> xs;
  for (float x = -20.0f; x <= 20.0f; x += 0.000917f) xs.push_back(x);
  const int n = int(xs.size());
  tl::device_buffer<float> dx(xs.data(), xs.size()), dy(n), ds(n);
  gelu_kernel<<<(n + 255) / 256, 256>>>(dx.data(), dy.data(),
                                        ds.data(), n);
  TL_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ys(n), ss(n);
  dy.copy_to(ys.data());
  ds.copy_to(ss.data());
  // The value relative to max(|gelu|, 1e-3) (tiny values count absolutely); the slope,
  // which crosses zero near x = -0.75 and stays below 1.2, absolutely.
  double value = 0, slope = 0;
  for (int i = 0; i < n; ++i) {
    const double g = tl_test::gelu64(xs[i]);
    value = std::max(value, std::abs(ys[i] - g) / std::max(std::abs(g), 1e-3));
    slope = std::max(slope, std::abs(ss[i] - tl_test::gelu64_slope(xs[i])));
  }
  EXPECT_LT(value, 4e-6);
  EXPECT_LT(slope, 2e-6);
  std::printf("device gelu vs float64: value %.2e (relative), slope %.2e (absolute)\n", value, slope);
}
}  // namespace
