// The blocked CPU pass on models with other layers than dense ones (cpu/blocked_stages.hpp):
// layer_norm, skip (nested, first, last, holding a layer_norm, another skip or no dense
// layer), users' layers (no parameters, a width change, a backward that overwrites its
// saved values; tests/support/odd_layers.hpp), a lambda activation, such a layer first
// and last, two side by side. Against the lane pass (float 1e-5,
// double 1e-13) over batches of 1, 2, 31 and 3001 samples, float64 central differences,
// apply, threads, and which pass each model gets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <vector>

#include "tapeless/tapeless.hpp"
#include "../support/model_check.hpp"
#include "../support/pass_check.hpp"
#include "../support/odd_layers.hpp"
#include "../support/scale_layer.hpp"

namespace {

using tl::cpu_pass;
using tl_test::expect_blocked_matches_differences;
using tl_test::expect_passes_agree;
using tl_test::random_matrix;
using tl_test::run_pass;

constexpr auto swish = [](auto x) { return x * tl::sigmoid(1.702 * x); };

inline auto normed() {
  return tl::chain(tl::dense<2, 40>(tl::tanh), tl::layer_norm<40>(), tl::dense<40, 33>(tl::gelu), tl::dense<33, 1>());
}
inline auto residual() {
  return tl::chain(tl::dense<3, 48>(tl::silu), tl::skip(tl::dense<48, 48>(swish), tl::dense<48, 48>()),
                   tl::layer_norm<48>(), tl::dense<48, 2>());
}
// A skip holding a layer_norm and a skip of its own; a user's layer last, after the
// last dense layer.
inline auto nested() {
  return tl::chain(tl::dense<4, 32>(tl::gelu),
                   tl::skip(tl::dense<32, 36>(tl::tanh), tl::layer_norm<36>(), tl::skip(tl::dense<36, 36>(tl::sigmoid)),
                            tl::dense<36, 32>()),
                   tl::dense<32, 3>(), scale_layer<3>{});
}
// A skip first: its open stage takes the data, and nothing is handed back from it. (Its
// 3-wide dense layer makes the type choose the lane pass; the tests ask for the blocked.)
inline auto skip_first() {
  return tl::chain(tl::skip(tl::dense<3, 3>(tl::tanh)), tl::dense<3, 40>(tl::tanh), tl::dense<40, 40>(tl::gelu),
                   tl::dense<40, 1>());
}
// layer_norm first (a sample stage that hands nothing back), dense inputs from a
// sample stage's outputs, and a skip whose last layer is not dense.
inline auto norm_first() {
  return tl::chain(tl::layer_norm<5>(), tl::dense<5, 64>(tl::tanh), tl::skip(tl::dense<64, 64>(tl::relu), scale_layer<64>{}),
                   tl::dense<64, 1>());
}

// A skip last; a layer without parameters before a skip of two other layers side by
// side, a width change.
inline auto skip_last() {
  return tl::chain(tl::dense<2, 40>(tl::tanh), tl::dense<40, 40>(tl::gelu), tl::skip(tl::dense<40, 40>(tl::tanh), tl::layer_norm<40>()));
}
inline auto others_only() {
  return tl::chain(tl::dense<3, 48>(tl::tanh), expo_layer<48>{}, tl::skip(tl::layer_norm<48>(), clobber_layer<48>{}),
                   tl::dense<48, 40>(tl::tanh), halve_layer<40>{}, tl::dense<20, 1>());
}

// A layer_norm whose rows carry a whole vector of padding (256 floats: a stride of 272).
inline auto wide_norm() {
  return tl::chain(tl::dense<2, 256>(tl::tanh), tl::layer_norm<256>(), tl::dense<256, 32>(tl::tanh), tl::dense<32, 1>());
}
static_assert(tl::detail::simd::row_stride<float>(256) > 256);
// A layer_norm takes its own row-wise stage (cpu/blocked_layer_norm.hpp), any other layer the generic one.
static_assert(std::is_same_v<tl::detail::blocked_sample_stage<tl::detail::sample_stage<tl::layer_norm_layer<40>, 0>, float>::type,
                             tl::detail::blocked_layer_norm<40, float>>);
static_assert(std::is_same_v<tl::detail::blocked_sample_stage<tl::detail::sample_stage<scale_layer<40>, 0>, float>::type,
                             tl::detail::blocked_sample_layer<tl::detail::sample_stage<scale_layer<40>, 0>, float>>);

static_assert(tl::detail::pass_by_type<decltype(wide_norm())>() == cpu_pass::blocked);
static_assert(tl::detail::pass_by_type<decltype(normed())>() == cpu_pass::blocked);
static_assert(tl::detail::pass_by_type<decltype(skip_last())>() == cpu_pass::blocked);
static_assert(tl::detail::pass_by_type<decltype(others_only())>() == cpu_pass::blocked);
static_assert(tl::detail::pass_by_type<decltype(residual())>() == cpu_pass::blocked);
static_assert(tl::detail::pass_by_type<decltype(nested())>() == cpu_pass::blocked);
static_assert(tl::detail::pass_by_type<decltype(norm_first())>() == cpu_pass::blocked);
// Narrow hidden dense layers keep the lane pass, as dense chains do.
static_assert(tl::detail::pass_by_type<decltype(tl::chain(tl::dense<2, 8>(tl::gelu), tl::skip(tl::dense<8, 8>()),
                                                          tl::layer_norm<8>(), tl::dense<8, 1>()))>() == cpu_pass::lanes);
static_assert(tl::detail::stage_count<tl::detail::stages_of<decltype(nested())>> == 11);
static_assert(tl::detail::pass_by_type<decltype(skip_first())>() == cpu_pass::lanes);

template <class T>
void all_models_agree(std::size_t batch, double tolerance) {
  expect_passes_agree<T>(normed(), batch, tolerance);
  expect_passes_agree<T>(residual(), batch, tolerance);
  expect_passes_agree<T>(nested(), batch, tolerance);
  expect_passes_agree<T>(norm_first(), batch, tolerance);
  expect_passes_agree<T>(skip_first(), batch, tolerance);
  expect_passes_agree<T>(skip_last(), batch, tolerance);
  expect_passes_agree<T>(others_only(), batch, tolerance);
  expect_passes_agree<T>(wide_norm(), batch, tolerance);
}

TEST(BlockedLayers, MatchLanePassFloat) {
  for (std::size_t batch : {1u, 2u, 31u, 3001u}) all_models_agree<float>(batch, 1e-5);
}
TEST(BlockedLayers, MatchLanePassDouble) {
  for (std::size_t batch : {1u, 2u, 31u, 3001u}) all_models_agree<double>(batch, 1e-13);
}
TEST(BlockedLayers, OtherLosses) {
  expect_passes_agree<double>(residual(), 31, 1e-13, tl::huber);
  expect_passes_agree<double>(nested(), 31, 1e-13, tl::softmax_cross_entropy);
}

TEST(BlockedLayers, Float64GradientMatchesCentralDifferences) {
  expect_blocked_matches_differences(normed(), 9);
  expect_blocked_matches_differences(residual(), 9);
  expect_blocked_matches_differences(nested(), 9);
  expect_blocked_matches_differences(norm_first(), 9);
  expect_blocked_matches_differences(skip_first(), 9);
  expect_blocked_matches_differences(skip_last(), 9);
  expect_blocked_matches_differences(others_only(), 9);
  expect_blocked_matches_differences(wide_norm(), 9);
}

// The same thread count gives the same bits every time; any count agrees with one
// thread to float rounding.
TEST(BlockedLayers, ThreadsDeterministicAndCloseToOneThread) {
  const auto model = residual();
  tl::rng gen(3);
  const auto p = tl::init(model, gen);
  const auto x = random_matrix<float>(gen, 3, 9001), y = random_matrix<float>(gen, 2, 9001);
  const auto one = run_pass<cpu_pass::blocked>(model, tl::mse, p, x, y, 1);
  for (std::size_t threads : {2u, 3u}) {
    const auto a = run_pass<cpu_pass::blocked>(model, tl::mse, p, x, y, threads);
    const auto b = run_pass<cpu_pass::blocked>(model, tl::mse, p, x, y, threads);
    EXPECT_EQ(a.gradient, b.gradient);
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_LE(tl_test::relative_difference(a.gradient, one.gradient), 1e-6);
  }
}

// apply takes the blocked forward too: the same outputs as the lane pass's forward.
template <class Model>
void apply_matches_lanes(const Model& model) {
  tl::rng gen(4);
  const auto p = tl::init<double>(model, gen);
  const auto x = random_matrix<double>(gen, Model::inputs, 700);
  const auto y = tl::apply(model, p, x);
  std::vector<double> expected(Model::outputs * 700);
  tl::detail::group_buffers<Model, 1, double> buffers;
  for (std::size_t s = 0; s < 700; ++s) {
    double xs[Model::inputs];
    for (std::size_t i = 0; i < Model::inputs; ++i) xs[i] = x(i, s);
    const double* out = tl::detail::forward_group(model, p.data(), xs, buffers);
    for (std::size_t o = 0; o < Model::outputs; ++o) EXPECT_NEAR(y(o, s), out[o], 1e-12 * (1 + std::abs(out[o])));
  }
}
TEST(BlockedLayers, ApplyMatchesOneSampleForward) {
  apply_matches_lanes(residual());
  apply_matches_lanes(nested());
  apply_matches_lanes(norm_first());
  apply_matches_lanes(skip_last());
  apply_matches_lanes(others_only());
}

// A NaN in one batch leaves nothing behind: the next batch, through the same thread's
// buffers, gives the lane pass's result (the padding columns of the delta buffers are
// never written with the NaN).
TEST(BlockedLayers, NonFiniteBatchLeavesNothingBehind) {
  const auto model = others_only();
  tl::rng gen(13);
  const auto p = tl::init(model, gen);
  auto x = random_matrix<float>(gen, 3, 40);
  const auto y = random_matrix<float>(gen, 1, 40);
  x(1, 7) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(run_pass<cpu_pass::blocked>(model, tl::mse, p, x, y).loss));
  x(1, 7) = 0.25f;
  const auto lanes = run_pass<cpu_pass::lanes>(model, tl::mse, p, x, y);
  const auto blocked = run_pass<cpu_pass::blocked>(model, tl::mse, p, x, y);
  EXPECT_NEAR(blocked.loss, lanes.loss, 1e-5 * lanes.loss);
  EXPECT_LE(tl_test::relative_difference(blocked.gradient, lanes.gradient), 1e-5);
}

// train_step on such a model (the blocked pass, by its type) lowers the loss.
TEST(BlockedLayers, TrainsByType) {
  const auto model = residual();
  tl::rng gen(6);
  tl::train_state s(model, tl::init(model, gen), tl::adam{0.01f});
  const auto x = random_matrix<float>(gen, 3, 2000);
  tl::matrix y(2, 2000);
  for (std::size_t i = 0; i < 2000; ++i) {
    y(0, i) = std::sin(3 * x(0, i)) * x(1, i);
    y(1, i) = x(2, i) * x(2, i);
  }
  const float first = tl::train_step(s, tl::mse, x, y);
  float last = first;
  for (int step = 0; step < 100; ++step) last = tl::train_step(s, tl::mse, x, y);
  EXPECT_LT(last, 0.3f * first);
}

}  // namespace
