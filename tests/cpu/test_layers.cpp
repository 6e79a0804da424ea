// Layers through the protocol (layer_norm, skip), activations written as lambdas and
// losses written as lambdas: forward values against plain float64 code, gradients
// against float64 central differences (1e-8), and lambdas that spell out a built-in
// against the built-in (1e-6, float).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "../support/model_check.hpp"
#include "../support/scale_layer.hpp"
#include "tapeless/nn/names.hpp"

namespace {

using tl_test::expect_model_gradient;
using tl_test::random_batch;
using tl_test::random_parameters;
using tl_test::relative_difference;

TEST(LayerNorm, ForwardMatchesPlainFloat64) {
  const auto model = tl::chain(tl::layer_norm<5>());
  tl::rng gen(1);
  const auto p = random_parameters(model, gen);
  const auto x = random_batch(gen, 5, 19, -2, 3);
  const auto y = tl::apply(model, p, x);
  for (std::size_t s = 0; s < 19; ++s) {
    double mean = 0, var = 0;
    for (int i = 0; i < 5; ++i) mean += x(i, s) / 5;
    for (int i = 0; i < 5; ++i) var += (x(i, s) - mean) * (x(i, s) - mean) / 5;
    for (int i = 0; i < 5; ++i) {
      const double expected = (x(i, s) - mean) / std::sqrt(var + 1e-5) * p.flat()[i] + p.flat()[5 + i];
      EXPECT_NEAR(y(i, s), expected, 1e-13);
    }
  }
  // PyTorch's initialisation: weight 1, bias 0.
  tl::rng g2(3);
  const auto fresh = tl::init(model, g2);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(fresh.flat()[i], 1.0f);
    EXPECT_EQ(fresh.flat()[5 + i], 0.0f);
  }
}

TEST(LayerNorm, GradientMatchesFiniteDifferences) {
  const auto model = tl::chain(tl::dense<3, 6>(tl::tanh), tl::layer_norm<6>(), tl::dense<6, 2>());
  tl::rng gen(2);
  expect_model_gradient(model, tl::mse, random_parameters(model, gen), random_batch(gen, 3, 37, -1.5, 1.5),
                        random_batch(gen, 2, 37, -1, 1));
}

// torch.nn.LayerNorm's rule: eps finite and >= 0 (0 is allowed).
TEST(LayerNorm, NegativeOrNonFiniteEpsIsRefused) {
  EXPECT_THROW((void)tl::layer_norm<4>(-1e-5), std::invalid_argument);
  EXPECT_THROW((void)tl::layer_norm<4>(std::nan("")), std::invalid_argument);
  EXPECT_THROW((void)tl::layer_norm<4>(std::numeric_limits<double>::infinity()), std::invalid_argument);
  EXPECT_EQ(tl::layer_norm<4>(0.0).eps, 0.0);
  static_assert(tl::layer_norm<4>(1e-3).eps == 1e-3);  // still a constant expression
}

TEST(Skip, ForwardIsInputPlusInnerChain) {
  const auto inner = tl::chain(tl::dense<4, 7>(tl::gelu), tl::dense<7, 4>());
  const auto model = tl::chain(tl::skip(tl::dense<4, 7>(tl::gelu), tl::dense<7, 4>()));
  tl::rng gen(4);
  const auto p = random_parameters(model, gen);
  const tl::parameters<std::remove_cvref_t<decltype(inner)>, double> same(std::vector<double>(p.flat().begin(), p.flat().end()));
  const auto x = random_batch(gen, 4, 21, -1, 1);
  const auto y = tl::apply(model, p, x), f = tl::apply(inner, same, x);
  for (std::size_t k = 0; k < y.size(); ++k) EXPECT_NEAR(y.values()[k], x.values()[k] + f.values()[k], 1e-14);
}

TEST(Skip, GradientMatchesFiniteDifferences) {
  const auto model = tl::chain(tl::dense<2, 5>(tl::silu), tl::skip(tl::dense<5, 8>(tl::tanh), tl::dense<8, 5>()),
                               tl::skip(tl::layer_norm<5>()), tl::dense<5, 1>());
  tl::rng gen(5);
  expect_model_gradient(model, tl::mse, random_parameters(model, gen), random_batch(gen, 2, 33, -1, 1),
                        random_batch(gen, 1, 33, -1, 1));
}

// The design document's example of a new layer kind: one header, and it trains.
TEST(NewLayer, DesignDocumentExampleWorksThroughTheProtocol) {
  const auto model = tl::chain(tl::dense<2, 8>(tl::tanh), scale_layer<8>{}, tl::dense<8, 1>());
  tl::rng gen(12);
  expect_model_gradient(model, tl::mse, random_parameters(model, gen), random_batch(gen, 2, 33, -1, 1),
                        random_batch(gen, 1, 33, -1, 1));
  const auto names = tl::parameter_names(model);
  ASSERT_EQ(names.size(), 5u);
  EXPECT_EQ(names[2].name, "2.weight");  // after Linear and Tanh
  EXPECT_NE(tl::summary(model).find("scale"), std::string::npos);
}

// ---- activations written as lambdas -------------------------------------------
constexpr auto gelu_lambda = [](auto x) {
  return 0.5 * x * (1.0 + tl::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
};
constexpr auto silu_lambda = [](auto x) { return x * tl::sigmoid(x); };

TEST(LambdaActivation, GradientMatchesFiniteDifferences) {
  const double beta = 1.702;  // a run-time constant captured by the lambda
  const auto model = tl::chain(tl::dense<3, 6>([beta](auto x) { return x * tl::sigmoid(beta * x); }),
                               tl::dense<6, 4>([](auto x) { return tl::where(x > 0.0, x, tl::expm1(x)); }),
                               tl::dense<4, 2>([](auto x) { return tl::log1p(x * x) + tl::atan(x); }));
  tl::rng gen(6);
  expect_model_gradient(model, tl::mse, random_parameters(model, gen), random_batch(gen, 3, 29, -2, 2),
                        random_batch(gen, 2, 29, -1, 1));
}

template <class Builtin, class Lambda>
void expect_lambda_equals_builtin(Builtin builtin, Lambda lambda) {
  const auto a = tl::chain(tl::dense<2, 8>(builtin), tl::dense<8, 8>(builtin), tl::dense<8, 1>());
  const auto b = tl::chain(tl::dense<2, 8>(lambda), tl::dense<8, 8>(lambda), tl::dense<8, 1>());
  tl::rng gen(7);
  const auto p = tl::init(a, gen);
  const tl::parameters<std::remove_cvref_t<decltype(b)>> same(std::vector<float>(p.flat().begin(), p.flat().end()));
  tl::matrix x(2, 100), y(1, 100);
  for (float& v : x.values()) v = gen.uniform(-3, 3);
  for (float& v : y.values()) v = gen.uniform(-1, 1);
  const auto ra = tl::value_and_grad(tl::mse, a, p, x, y);
  const auto rb = tl::value_and_grad(tl::mse, b, same, x, y);
  EXPECT_LE(std::abs(rb.loss - ra.loss) / ra.loss, 1e-6);
  EXPECT_LE(relative_difference(rb.gradient.flat(), ra.gradient.flat()), 1e-6);
}

// y = sin(y) * cos(y) * 0.9, Levels times: a graph of 4 Levels nodes and 2^Levels
// paths. As a dense layer's activation this built in time exponential in Levels (a
// 28-level one: 100 s), though value_and_grad of the same function took 2 s at 48.
template <int Levels, class E>
auto shared_levels(E y) {
  if constexpr (Levels == 0) return y;
  else return shared_levels<Levels - 1>(tl::sin(y) * tl::cos(y) * tl::lit<0.9>);
}

// where's untaken side with a NaN derivative makes the gradient NaN in a layer and in a
// loss as it does in tl::grad (the forward sweep once dropped it: finite gradients).
TEST(LambdaActivation, WhereWithANaNDerivativeOnTheUntakenSideIsNaNAsInGrad) {
  const auto guarded = [](auto v) { return tl::where(v > 0.0, tl::sqrt(v), 0.0 * v); };
  EXPECT_TRUE(std::isnan(tl::grad(guarded, std::array{-1.0})[0]));
  const auto model = tl::chain(tl::dense<1, 1>(guarded));
  tl::parameters<std::remove_cvref_t<decltype(model)>, double> p;
  p.flat()[0] = 1.0;  // weight: z = x
  p.flat()[1] = 0.0;
  const tl::basic_matrix<double> x(1, 2, std::vector<double>{-1.0, 4.0}), y(1, 2, std::vector<double>{0.5, 1.5});
  const auto layer = tl::value_and_grad(tl::mse, model, p, x, y);
  EXPECT_TRUE(std::isnan(layer.gradient.flat()[0]));
  const auto loss = tl::elementwise_loss([](auto yhat, auto t) {
    const auto r = yhat - t;
    return tl::where(r > 0.0, tl::sqrt(r), 0.0 * r);
  });
  const auto linear = tl::chain(tl::dense<1, 1>());
  tl::parameters<std::remove_cvref_t<decltype(linear)>, double> q;
  q.flat()[0] = 1.0;
  q.flat()[1] = 0.0;
  const auto through_loss = tl::value_and_grad(loss, linear, q, x, y);
  EXPECT_TRUE(std::isnan(through_loss.gradient.flat()[0]));
}

TEST(LambdaActivation, DeeplySharedExpressionBuildsAndMatchesItsScalarDerivative) {
  const auto deep = [](auto x) { return shared_levels<40>(x); };
  const auto model = tl::chain(tl::dense<1, 3>(deep), tl::dense<3, 1>());
  tl::rng gen(12);
  const auto p = random_parameters(model, gen);
  const auto x = random_batch(gen, 1, 17, -2, 2), y = random_batch(gen, 1, 17, -1, 1);
  expect_model_gradient(model, tl::mse, p, x, y);
  // The first layer's outputs against the scalar function's own value.
  const auto first = tl::chain(tl::dense<1, 3>(deep));
  const tl::parameters<std::remove_cvref_t<decltype(first)>, double> head(
      std::vector<double>(p.flat().begin(), p.flat().begin() + 6));
  const auto out = tl::apply(first, head, x);
  for (std::size_t s = 0; s < 17; ++s)
    for (std::size_t o = 0; o < 3; ++o) {
      const double z = head.flat()[o] * x(0, s) + head.flat()[3 + o];
      EXPECT_NEAR(out(o, s), tl::value_and_grad(deep, std::array<double, 1>{z}).value, 1e-14);
    }
}

TEST(LambdaActivation, GeluSpelledOutEqualsBuiltin) { expect_lambda_equals_builtin(tl::gelu, gelu_lambda); }
TEST(LambdaActivation, SiluSpelledOutEqualsBuiltin) { expect_lambda_equals_builtin(tl::silu, silu_lambda); }

// ---- losses written as lambdas -------------------------------------------------
TEST(ExpressionLoss, ElementwiseGradientsMatchFiniteDifferences) {
  const auto model = tl::chain(tl::dense<3, 5>(tl::tanh), tl::dense<5, 2>());
  tl::rng gen(8);
  const auto p = random_parameters(model, gen);
  const auto x = random_batch(gen, 3, 41, -1.5, 1.5), y = random_batch(gen, 2, 41, -1, 1);
  const auto log_cosh = tl::elementwise_loss([](auto yhat, auto y) { return tl::log(tl::cosh(yhat - y)); });
  const double tau = 0.3;  // pinball (quantile) loss
  const auto pinball = tl::elementwise_loss(
      [tau](auto yhat, auto y) { return tl::where(y > yhat, tau * (y - yhat), (1.0 - tau) * (yhat - y)); });
  const auto weighted = tl::elementwise_loss([](auto yhat, auto y) { return 2.5 * (yhat - y) * (yhat - y) + 0.1 * yhat; });
  expect_model_gradient(model, log_cosh, p, x, y);
  expect_model_gradient(model, pinball, p, x, y);
  expect_model_gradient(model, weighted, p, x, y);
  // The mean over elements, like mse: log-cosh's value by hand.
  const auto yhat = tl::apply(model, p, x);
  double expected = 0;
  for (std::size_t k = 0; k < y.size(); ++k) expected += std::log(std::cosh(yhat.values()[k] - y.values()[k]));
  EXPECT_NEAR(tl::value_and_grad(log_cosh, model, p, x, y).loss, expected / double(y.size()), 1e-14);
}

TEST(ExpressionLoss, SampleLossGradientMatchesFiniteDifferences) {
  const auto model = tl::chain(tl::dense<3, 6>(tl::tanh), tl::dense<6, 3>());
  tl::rng gen(9);
  // A loss over a sample's 3 outputs: squared distance plus a penalty on their spread.
  const auto loss = tl::sample_loss<3>([](const auto& yhat, const auto& y) {
    return tl::sum((yhat - y) * (yhat - y)) + 0.5 * (tl::max(yhat) - tl::min(yhat));
  });
  expect_model_gradient(model, loss, random_parameters(model, gen), random_batch(gen, 3, 23, -1, 1),
                        random_batch(gen, 3, 23, -1, 1));
}

template <std::size_t Outputs = 4, class Builtin, class Lambda>
void expect_loss_equals_builtin(const Builtin& builtin, const Lambda& lambda, bool distributions) {
  const auto model = tl::chain(tl::dense<2, 8>(tl::tanh), tl::dense<8, Outputs>());
  tl::rng gen(10);
  const auto p = tl::init(model, gen);
  tl::matrix x(2, 77), y(Outputs, 77);
  for (float& v : x.values()) v = gen.uniform(-2, 2);
  for (std::size_t s = 0; s < 77; ++s) {
    float total = 0;
    for (std::size_t o = 0; o < Outputs; ++o) total += (y(o, s) = gen.uniform(0.05f, 1));
    if (distributions) for (std::size_t o = 0; o < Outputs; ++o) y(o, s) /= total;
  }
  const auto a = tl::value_and_grad(builtin, model, p, x, y);
  const auto b = tl::value_and_grad(lambda, model, p, x, y);
  EXPECT_LE(std::abs(b.loss - a.loss) / a.loss, 1e-6);
  EXPECT_LE(relative_difference(b.gradient.flat(), a.gradient.flat()), 1e-6);
}

TEST(ExpressionLoss, MseSpelledOutEqualsBuiltin) {
  expect_loss_equals_builtin(tl::mse, tl::elementwise_loss([](auto yhat, auto y) { return (yhat - y) * (yhat - y); }),
                             false);
}
TEST(ExpressionLoss, SoftmaxCrossEntropySpelledOutEqualsBuiltin) {
  expect_loss_equals_builtin(
      tl::softmax_cross_entropy,
      tl::sample_loss<4>([](const auto& yhat, const auto& y) { return tl::logsumexp(yhat) * tl::sum(y) - tl::dot(y, yhat); }),
      true);
}
// Many outputs: a graph of a few hundred nodes (it built in 22 s at 32 outputs before
// the schedule's lookups stopped being quadratic, and not at all at 64).
TEST(ExpressionLoss, SoftmaxCrossEntropySpelledOutOver32OutputsEqualsBuiltin) {
  expect_loss_equals_builtin<32>(
      tl::softmax_cross_entropy,
      tl::sample_loss<32>([](const auto& yhat, const auto& y) { return tl::logsumexp(yhat) * tl::sum(y) - tl::dot(y, yhat); }),
      true);
}

// ---- float64 -------------------------------------------------------------------
TEST(Float64, MatricesCastBetweenPrecisions) {
  const tl::matrix x(2, 3, std::vector<float>{1, 2, 3, 4, 5, 6.5f});
  const tl::basic_matrix<double> wide = x.cast<double>();
  EXPECT_EQ(wide.features(), 2u);
  EXPECT_EQ(wide(1, 2), 6.5);
  EXPECT_EQ(wide.cast<float>(), x);
}

TEST(Float64, EveryActivationAndLossGradientIsTight) {
  const auto model = tl::chain(tl::dense<3, 5>(tl::gelu), tl::dense<5, 4>(tl::softplus), tl::dense<4, 3>(tl::elu),
                               tl::dense<3, 3>());
  tl::rng gen(11);
  const auto p = random_parameters(model, gen);
  const auto x = random_batch(gen, 3, 37, -1.5, 1.5), y = random_batch(gen, 3, 37, 0.05, 1);
  expect_model_gradient(model, tl::mse, p, x, y);
  expect_model_gradient(model, tl::huber, p, x, y);
  expect_model_gradient(model, tl::binary_cross_entropy_with_logits, p, x, y);
  expect_model_gradient(model, tl::softmax_cross_entropy, p, x, y);
}

}  // namespace
