// Models whose groups of 16 samples do not fit on a thread's stack (core/scratch.hpp):
// a linear model on 200000 features (12.8 MB of inputs a group in float) against plain
// float64 arithmetic, a 16384-wide layer_norm in double against central differences
// along a random direction, each on one thread and two; least squares at its most
// parameters (its lanes' sums: 2.6 MB); and the scratch stack's order. Before the
// scratch stack, each ended the process with SIGSEGV.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "support/model_check.hpp"
#include "tapeless/cpu/least_squares.hpp"
#include "tapeless/tapeless.hpp"

namespace {

using tl_test::random_batch;
using tl_test::relative_difference;

// Arrays that would not fit take a pointer's room; single samples (device code) and
// small groups keep theirs.
static_assert(sizeof(tl::detail::group_array<float, 200000 * 16, 16>) < 64);
static_assert(sizeof(tl::detail::group_array<float, 4096, 16>) == 4096 * sizeof(float));
static_assert(sizeof(tl::detail::group_array<float, 200000, 1>) == 200000 * sizeof(float));

TEST(ScratchStack, HandsOutAlignedMemoryLastInFirstOut) {
  std::thread([] {  // a thread of its own: a fresh scratch stack
    auto& stack = tl::detail::scratch_stack::of_this_thread();
    tl::detail::scratch_stack::mark a, b, c, d;
    char* small = static_cast<char*>(stack.take(100, a));
    char* large = static_cast<char*>(stack.take(std::size_t(3) << 20, b));  // past the first block
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large) % 64, 0u);
    EXPECT_TRUE(large + (std::size_t(3) << 20) <= small || small + 128 <= large);  // disjoint
    stack.give_back(b);
    EXPECT_EQ(static_cast<char*>(stack.take(std::size_t(3) << 20, c)), large);  // kept, handed out again
    stack.give_back(c);
    stack.give_back(a);
    EXPECT_EQ(static_cast<char*>(stack.take(100, d)), small);
    stack.give_back(d);
  }).join();
}

// An empty block too small for a request is replaced, not skipped: a small request
// then a larger one after it was given back (an apply, then a step's lane sums) keep
// one block, and a request on top of that a second.
TEST(ScratchStack, ReplacesAnEmptyBlockTooSmallInsteadOfSkippingIt) {
  std::thread([] {
    auto& stack = tl::detail::scratch_stack::of_this_thread();
    tl::detail::scratch_stack::mark a, b, c;
    stack.take(std::size_t(3) << 19, a);  // 1.5 MB: the first block
    stack.give_back(a);
    char* sums = static_cast<char*>(stack.take(std::size_t(2) << 20, b));  // 2 MB
    EXPECT_EQ(stack.block_count(), 1u);
    char* inputs = static_cast<char*>(stack.take(std::size_t(3) << 19, c));
    EXPECT_EQ(stack.block_count(), 2u);
    EXPECT_TRUE(inputs + (std::size_t(3) << 19) <= sums || sums + (std::size_t(2) << 20) <= inputs);  // disjoint
    stack.give_back(c);
    stack.give_back(b);
    EXPECT_EQ(static_cast<char*>(stack.take(std::size_t(2) << 20, a)), sums);  // kept
    stack.give_back(a);
    EXPECT_EQ(stack.block_count(), 2u);
  }).join();
}

// yhat = w . x + b on N features: loss and gradient in float64, sample by sample.
template <std::size_t N>
void expect_linear_model_matches_float64(std::size_t batch, std::size_t threads) {
  const auto model = tl::dense<N, 1>();
  tl::rng gen(3);
  const auto p = tl::init(model, gen);
  tl::matrix x(N, batch), y(1, batch);
  for (float& v : x.values()) v = float(gen.uniform(-1, 1));
  for (float& v : y.values()) v = float(gen.uniform(-1, 1));
  const auto flat = p.flat();
  std::vector<double> residual(batch), gradient(N + 1, 0.0);
  double loss = 0;
  for (std::size_t s = 0; s < batch; ++s) {
    double yhat = flat[N];
    for (std::size_t k = 0; k < N; ++k) yhat += double(flat[k]) * double(x(k, s));
    residual[s] = yhat - double(y(0, s));
    loss += residual[s] * residual[s] / double(batch);
    for (std::size_t k = 0; k < N; ++k) gradient[k] += 2 * residual[s] * double(x(k, s)) / double(batch);
    gradient[N] += 2 * residual[s] / double(batch);
  }
  std::vector<float> g(N + 1);
  const auto sums = tl::detail::fused_loss_and_gradient(model, tl::mse, p.data(), x.data(), y.data(), batch, g.data(),
                                                        threads);
  EXPECT_NEAR(sums.loss, loss, 1e-4 * loss) << threads << " threads";
  EXPECT_LT(relative_difference(g, gradient), 1e-4) << threads << " threads";
  const auto outputs = tl::apply(model, p, x);
  for (std::size_t s = 0; s < batch; ++s)
    EXPECT_NEAR(outputs(0, s), residual[s] + double(y(0, s)), 1e-4) << "sample " << s;
}

TEST(WideModels, LinearModelOnTwoHundredThousandFeatures) {
  for (std::size_t threads : {1u, 2u}) expect_linear_model_matches_float64<200000>(130, threads);
}

// d loss / d p along a random direction v, against central differences of the loss.
template <class Model>
void expect_directional_derivative(const Model& model, std::size_t batch, std::size_t threads) {
  tl::rng gen(4);
  auto p = tl_test::random_parameters(model, gen);
  const auto x = random_batch(gen, Model::inputs, batch, -1, 1), y = random_batch(gen, Model::outputs, batch, -1, 1);
  std::vector<double> v(Model::parameter_count), g(Model::parameter_count);
  for (double& d : v) d = gen.uniform(-1, 1);
  const auto loss_at = [&](double t) {
    auto q = p;
    for (std::size_t k = 0; k < v.size(); ++k) q.flat()[k] += t * v[k];
    std::vector<double> unused(Model::parameter_count);
    return tl::detail::fused_loss_and_gradient(model, tl::mse, q.data(), x.data(), y.data(), batch, unused.data(),
                                               threads)
        .loss;
  };
  tl::detail::fused_loss_and_gradient(model, tl::mse, p.data(), x.data(), y.data(), batch, g.data(), threads);
  double along = 0;
  for (std::size_t k = 0; k < v.size(); ++k) along += g[k] * v[k];
  const double h = 1e-5, expected = (loss_at(h) - loss_at(-h)) / (2 * h);
  EXPECT_NEAR(along, expected, 1e-6 * std::max(1.0, std::abs(expected))) << threads << " threads";
}

TEST(WideModels, LayerNormOfSixteenThousandInDouble) {
  const auto model = tl::chain(tl::layer_norm<16384>(), tl::dense<16384, 1>());
  for (std::size_t threads : {1u, 2u}) expect_directional_derivative(model, 40, threads);
}

// 1-66-1 tanh: 199 parameters, at lsq::max_parameters nearly; past it the call does not
// compile (tests/compile_fail/least_squares_too_many_parameters.cpp).
TEST(WideModels, LeastSquaresAtItsMostParameters) {
  const auto model = tl::chain(tl::dense<1, 66>(tl::tanh), tl::dense<66, 1>());
  static_assert(decltype(model)::parameter_count <= tl::lsq::max_parameters);
  tl::rng gen(5);
  auto params = tl::init<double>(model, gen);
  const auto x = random_batch(gen, 1, 600, -2, 2);
  tl::basic_matrix<double> y(1, 600);
  for (std::size_t s = 0; s < 600; ++s) y(0, s) = std::sin(3 * x(0, s));
  const auto fit = tl::least_squares(model, params, x, y, {.max_iterations = 4});
  EXPECT_TRUE(std::isfinite(fit.cost));
  EXPECT_LT(fit.cost, fit.initial_cost);
}

}  // namespace
