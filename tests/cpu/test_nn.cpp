// The NN layer: the 1-16-1 model against a float64 reference written plainly here;
// every activation and loss through the fused batch loop against float64 central
// differences; shapes, init and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <limits>
#include <random>
#include <vector>

#include "../support/expect_ad.hpp"
#include "../support/expect_failure.hpp"
#include "../support/gelu64.hpp"
#include "../support/activations.hpp"
#include "../../examples/seed_fit.hpp"

namespace {

using tl_test::gelu64;
using tl_test::gelu64_slope;

// The seed model in plain double: p = [W1(16), b1(16), W2(16), b2]; MSE; returns loss, fills grad.
double seed_loss_and_grad(const std::vector<double>& p, const std::vector<double>& x, const std::vector<double>& y,
                          std::vector<double>& grad) {
  grad.assign(49, 0.0);
  double loss = 0;
  const double n = double(x.size());
  for (std::size_t s = 0; s < x.size(); ++s) {
    double z[16], a[16], out = p[48];
    for (int j = 0; j < 16; ++j) {
      z[j] = p[j] * x[s] + p[16 + j];
      a[j] = gelu64(z[j]);
      out += p[32 + j] * a[j];
    }
    const double r = out - y[s];
    loss += r * r / n;
    const double dout = 2 * r / n;
    grad[48] += dout;
    for (int j = 0; j < 16; ++j) {
      grad[32 + j] += dout * a[j];
      const double dz = dout * p[32 + j] * gelu64_slope(z[j]);
      grad[j] += dz * x[s];
      grad[16 + j] += dz;
    }
  }
  return loss;
}

std::vector<double> widen(std::span<const float> v) { return {v.begin(), v.end()}; }

TEST(SeedModel, LossAndGradientMatchFloat64Reference) {
  const auto data = seed_fit::make_data(7);
  tl::rng gen(3);
  auto params = tl::init(seed_fit::make_model(), gen);
  for (float& b : tl::flat(params)) b += 0.1f * gen.uniform(-1, 1);  // non-zero biases too
  const auto result = tl::value_and_grad(tl::mse, seed_fit::make_model(), params, data.x, data.y);
  std::vector<double> grad;
  const double loss = seed_loss_and_grad(widen(tl::flat(params)), widen(data.x.values()), widen(data.y.values()), grad);
  EXPECT_NEAR(result.loss, loss, 1e-6 * loss);
  double norm = 0, diff = 0;
  for (int k = 0; k < 49; ++k) {
    norm += grad[k] * grad[k];
    diff += (result.gradient.flat()[k] - grad[k]) * (result.gradient.flat()[k] - grad[k]);
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-5);
}

TEST(SeedModel, ApplyMatchesReferenceForward) {
  const auto data = seed_fit::make_data();
  const auto params = seed_fit::initial_parameters();
  const auto yhat = tl::apply(seed_fit::make_model(), params, data.x);
  ASSERT_EQ(yhat.features(), 1u);
  ASSERT_EQ(yhat.batch(), data.x.batch());
  const auto p = tl::flat(params);
  for (std::size_t s = 0; s < data.x.batch(); ++s) {
    double out = p[48];
    for (int j = 0; j < 16; ++j) out += p[32 + j] * gelu64(p[j] * data.x(0, s) + p[16 + j]);
    EXPECT_NEAR(yhat(0, s), out, 1e-5 * std::max(1.0, std::abs(out)));
  }
}

// Loss of a model in double, through the same per-sample code with one lane: the
// finite-difference reference for every activation and loss.
template <class Model, class Loss>
double loss64(const Model& model, const Loss& loss, const std::vector<double>& p, const tl::matrix& x,
              const tl::matrix& y) {
  tl::detail::group_buffers<Model, 1, double> scratch;
  double total = 0;
  for (std::size_t s = 0; s < x.batch(); ++s) {
    double xs[Model::inputs], ys[Model::outputs], dout[Model::outputs], l;
    for (std::size_t i = 0; i < Model::inputs; ++i) xs[i] = x(i, s);
    for (std::size_t o = 0; o < Model::outputs; ++o) ys[o] = y(o, s);
    const double* out = tl::detail::forward_group(model, p.data(), xs, scratch);
    loss.template group<Model::outputs, 1>(out, ys, dout, &l);
    total += l;
  }
  return total / Loss::denominator(Model::outputs, x.batch());
}

template <class Activation, class Loss>
void check_model_gradient(Activation act, const Loss& loss, bool probability_targets) {
  const auto model = tl::chain(tl::dense<3, 5>(act), tl::dense<5, 4>(act), tl::dense<4, 3>());
  using Model = decltype(model);
  tl::rng gen(11);
  auto params = tl::init(model, gen);
  for (float& v : tl::flat(params)) v += 0.05f * gen.uniform(-1, 1);
  constexpr std::size_t batch = 37;  // not a multiple of the 16 lanes
  tl::matrix x(3, batch), y(3, batch);
  for (float& v : x.values()) v = gen.uniform(-1.5f, 1.5f);
  for (std::size_t s = 0; s < batch; ++s) {
    float total = 0;
    for (int o = 0; o < 3; ++o) total += (y(o, s) = probability_targets ? gen.uniform(0.05f, 1.0f) : gen.uniform(-1, 1));
    if (probability_targets && Loss::denominator(3, 1) == 1.0)
      for (int o = 0; o < 3; ++o) y(o, s) /= total;  // a distribution for softmax cross-entropy
  }
  const auto result = tl::value_and_grad(loss, model, params, x, y);
  std::vector<double> p = widen(tl::flat(params));
  EXPECT_NEAR(result.loss, loss64(model, loss, p, x, y), 2e-6 * std::max(1.0, double(result.loss)));
  EXPECT_NEAR(tl::evaluate_loss(loss, model, params, x, y), result.loss, 1e-6 * std::max(1.0, double(result.loss)));
  double norm = 0, diff = 0;
  for (std::size_t k = 0; k < Model::parameter_count; ++k) {
    const double keep = p[k], h = 1e-6;
    p[k] = keep + h;
    const double up = loss64(model, loss, p, x, y);
    p[k] = keep - h;
    const double down = loss64(model, loss, p, x, y);
    p[k] = keep;
    const double expected = (up - down) / (2 * h);
    norm += expected * expected;
    diff += (result.gradient.flat()[k] - expected) * (result.gradient.flat()[k] - expected);
  }
  EXPECT_LT(std::sqrt(diff / norm), 2e-5) << "activation " << Activation::name;
}

template <class Activation>
void check_activation(Activation act) {
  check_model_gradient(act, tl::mse, false);
}

#define TL_ACTIVATION_TEST(Name, activation) \
  TEST(ModelGradient, Name) { check_activation(activation); }
TL_FOR_EACH_ACTIVATION(TL_ACTIVATION_TEST)
#undef TL_ACTIVATION_TEST

TEST(LossGradient, Mae) { check_model_gradient(tl::tanh, tl::mae, false); }
TEST(LossGradient, Huber) {
  check_model_gradient(tl::tanh, tl::huber, false);
  check_model_gradient(tl::tanh, tl::huber_loss(0.1), false);
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()})
    EXPECT_THROW((void)tl::huber_loss(bad), std::invalid_argument) << bad;
}
TEST(LossGradient, BinaryCrossEntropyWithLogits) { check_model_gradient(tl::tanh, tl::binary_cross_entropy_with_logits, true); }
TEST(LossGradient, SoftmaxCrossEntropy) { check_model_gradient(tl::tanh, tl::softmax_cross_entropy, true); }

// Large logits keep float's precision in the loss (sum_y (largest + log sum_exp) - y . yhat
// cancelled: 2.5 for 2.578890 at 3e6), and its gradient stays exact.
TEST(LossValue, SoftmaxCrossEntropyAtLargeLogitsInFloat) {
  const double expected = std::log(1 + std::exp(-2.5)) + 2.5;  // -log softmax(yhat)_1
  for (float big : {50.0f, 1e4f, 3e6f}) {
    const float yhat[2] = {big, big - 2.5f}, y[2] = {0, 1};
    float d[2], loss;
    tl::softmax_cross_entropy.group<2, 1>(yhat, y, d, &loss);
    EXPECT_NEAR(loss, expected, 1e-6 * expected) << "logits " << big;
    EXPECT_NEAR(d[0], 1 / (1 + std::exp(-2.5)), 1e-6) << "logits " << big;
    EXPECT_NEAR(d[1], 1 / (1 + std::exp(2.5)) - 1, 1e-6) << "logits " << big;
  }
}

// Mini-batch orders: permutations, uniform over the orders, the same on every platform
// (tests/init/bitwise.sh compares them across compilers and flags; the first one of
// seed 1 is written here); tl::rng also serves std::shuffle.
TEST(Rng, PermutationsAreUniformAndReproducible) {
  tl::rng gen(1);
  EXPECT_EQ(gen.permutation(10), (std::vector<std::size_t>{0, 3, 5, 1, 2, 9, 8, 4, 6, 7}));
  EXPECT_TRUE(gen.permutation(0).empty());
  EXPECT_EQ(gen.permutation(1), std::vector<std::size_t>{0});
  std::map<std::vector<std::size_t>, int> counts;
  for (int i = 0; i < 60000; ++i) ++counts[gen.permutation(3)];
  ASSERT_EQ(counts.size(), 6u);
  for (const auto& [order, count] : counts) EXPECT_NEAR(count, 10000, 400);  // 4.4 standard deviations
  const std::uint64_t big = std::uint64_t(1) << 40;
  for (int i = 0; i < 1000; ++i) ASSERT_LT(gen.below(big), big);
  EXPECT_EQ(tl::rng(1).below(big), 0x44b33b6327u);  // high word drawn first, on every compiler
  // Rejection matters where n does not divide the draws' range: without it these
  // fractions would be 1/2, not 1/3 (30000 draws: 1/3 within 0.015 is 5.5 sigma).
  const std::uint64_t third32 = std::uint64_t(3) << 30, third64 = std::uint64_t(3) << 62;
  int low32 = 0, low64 = 0;
  for (int i = 0; i < 30000; ++i) {
    low32 += gen.below(third32) % 3 == 0;
    low64 += gen.below(third64) < (std::uint64_t(1) << 62);
  }
  EXPECT_NEAR(low32 / 30000.0, 1.0 / 3, 0.015);
  EXPECT_NEAR(low64 / 30000.0, 1.0 / 3, 0.015);
  std::vector<std::size_t> shuffled = gen.permutation(50), sorted(50);
  std::shuffle(shuffled.begin(), shuffled.end(), gen);
  std::iota(sorted.begin(), sorted.end(), std::size_t{0});
  std::sort(shuffled.begin(), shuffled.end());
  EXPECT_EQ(shuffled, sorted);
}

TEST(Init, GlorotUniformWeightsZeroBiasReproducible) {
  const auto model = tl::chain(tl::dense<30, 50>(tl::relu), tl::dense<50, 2>());
  tl::rng a(5), b(5), c(6);
  const auto pa = tl::init(model, a), pb = tl::init(model, b), pc = tl::init(model, c);
  EXPECT_EQ(pa, pb);
  EXPECT_NE(pa, pc);
  const auto p = tl::flat(pa);
  const float limit = std::sqrt(6.0f / 80.0f);
  double sum_sq = 0;
  for (std::size_t k = 0; k < 1500; ++k) {
    ASSERT_LE(std::abs(p[k]), limit);
    sum_sq += p[k] * p[k];
  }
  EXPECT_NEAR(sum_sq / 1500, limit * limit / 3, 0.1 * limit * limit / 3);  // variance of U(-a, a)
  for (std::size_t k = 1500; k < 1550; ++k) EXPECT_EQ(p[k], 0.0f);
  using Model = std::remove_cvref_t<decltype(model)>;
  EXPECT_EQ(Model::parameter_offset<1> + Model::layer_type<1>::bias_offset, 1550u + 100u);
}

TEST(Errors, SizeMismatchesNameBothSizes) {
  const auto model = seed_fit::make_model();
  const auto params = seed_fit::initial_parameters();
  const tl::matrix x2(2, 8), y1(1, 8), y1_short(1, 7), x1(1, 8);
  try {
    (void)tl::apply(model, params, x2);
    FAIL() << "no exception";
  } catch (const tl::shape_error& e) {
    EXPECT_NE(std::string(e.what()).find("must be 1, got 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)tl::value_and_grad(tl::mse, model, params, x1, y1_short), tl::shape_error);
  try {
    (void)tl::matrix(3, 4, std::vector<float>(11));
    FAIL() << "no exception";
  } catch (const tl::shape_error& e) {
    EXPECT_NE(std::string(e.what()).find("12 values expected, the data has 11"), std::string::npos) << e.what();
  }
  // features x batch past size_t: 2 x 2^63 wrapped to 0 values, a matrix that passed
  // every batch check and then read memory it did not have.
  const std::size_t huge = std::size_t(1) << 63;
  try {
    (void)tl::matrix(2, huge);
    FAIL() << "no exception";
  } catch (const tl::shape_error& e) {
    EXPECT_NE(std::string(e.what()).find("do not fit in a size_t"), std::string::npos) << e.what();
  }
  // 2^62 values fit a size_t but no vector: a memory_error (a std::bad_alloc) naming the
  // shape, not std::length_error from inside std::vector.
  tl_test::expect_failure<tl::memory_error>([] { (void)tl::matrix(std::size_t(1) << 31, std::size_t(1) << 31); },
                                            {"features (2147483648) x batch (2147483648)"});
  EXPECT_THROW((void)tl::matrix(std::size_t(1) << 31, std::size_t(1) << 31), std::bad_alloc);
  EXPECT_THROW((void)tl::matrix(2, huge, std::vector<float>{}), tl::shape_error);
  EXPECT_THROW((void)tl::basic_matrix<double>(huge, 4, std::span<const double>{}), tl::shape_error);
  EXPECT_THROW((void)tl::parameters<seed_fit::model_type>(std::vector<float>(48)), tl::shape_error);
}

// The loss alone (a validation loss) on the blocked pass and through expression losses,
// against the loss a gradient pass reports; a mismatched batch is refused as there.
TEST(EvaluateLoss, EqualsTheLossOfValueAndGrad) {
  const auto model = tl::chain(tl::dense<4, 40>(tl::silu), tl::dense<40, 40>(tl::tanh), tl::dense<40, 3>());
  static_assert(tl::cpu_pass_of<decltype(model)> == tl::cpu_pass::blocked);
  tl::rng gen(5);
  const auto params = tl::init(model, gen);
  tl::matrix x(4, 1001), y(3, 1001);
  for (float& v : x.values()) v = gen.uniform(-2, 2);
  for (float& v : y.values()) v = gen.uniform(0.1f, 1);
  const auto check = [&](const auto& loss) {
    const float expected = tl::value_and_grad(loss, model, params, x, y).loss;
    EXPECT_NEAR(tl::evaluate_loss(loss, model, params, x, y), expected, 1e-6 * std::max(1.0f, expected));
  };
  check(tl::mse);
  check(tl::huber_loss(0.3));
  check(tl::elementwise_loss([](auto yhat, auto target) { return tl::abs(yhat - target) * (1.0 + target); }));
  check(tl::sample_loss<3>([](const auto& yhat, const auto& target) {
    return tl::logsumexp(yhat) * tl::sum(target) - tl::dot(target, yhat);
  }));
  tl_test::expect_failure<tl::shape_error>([&] { (void)tl::evaluate_loss(tl::mse, model, params, x, tl::matrix(3, 1000)); },
                                           {"evaluate_loss"});
  const tl::train_state state(model, params, tl::adam{});
  EXPECT_EQ(tl::evaluate_loss(tl::mse, state, x, y), tl::evaluate_loss(tl::mse, model, params, x, y));
  const auto gradient = tl::value_and_grad(tl::mse, model, params, x, y).gradient;
  auto indexed = gradient;
  for (std::size_t k = 0; k < gradient.size; k += 97) {
    EXPECT_EQ(gradient[k], gradient.data()[k]);
    indexed[k] = -1.0f;  // p[i] writes value i of the flat order
    EXPECT_EQ(tl::flat(indexed)[k], -1.0f);
  }
}

// A million outputs: the per-sample scratch is on the heap (a stack array of 8.8 MB
// overflowed the default stack, where value_and_grad already worked).
TEST(EvaluateLoss, ManyOutputsNeedNoStack) {
  const auto model = tl::chain(tl::dense<1, 1100000>());
  tl::rng gen(6);
  const auto params = tl::init<double>(model, gen);
  tl::basic_matrix<double> x(1, 2), y(1100000, 2);
  x(0, 0) = 0.5;
  x(0, 1) = -1.0;
  for (double& v : y.values()) v = gen.uniform(0.0, 1.0);
  for (const double loss : {tl::evaluate_loss(tl::softmax_cross_entropy, model, params, x, y),
                            tl::evaluate_loss(tl::mse, model, params, x, y)})
    EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(tl::evaluate_loss(tl::mse, model, params, x, y), tl::value_and_grad(tl::mse, model, params, x, y).loss, 1e-12);
}

// Mini-batches: consecutive samples, or gathered by index; every sample's features move together.
TEST(Matrix, SamplesCopiesRangesAndIndexedSamples) {
  tl::basic_matrix<double> x(3, 5);
  for (std::size_t s = 0; s < 5; ++s)
    for (std::size_t f = 0; f < 3; ++f) x(f, s) = double(10 * s + f);
  const auto middle = x.samples(1, 3);
  ASSERT_EQ(middle.features(), 3u);
  ASSERT_EQ(middle.batch(), 3u);
  for (std::size_t s = 0; s < 3; ++s)
    for (std::size_t f = 0; f < 3; ++f) EXPECT_EQ(middle(f, s), x(f, s + 1));
  EXPECT_EQ(x.samples(5, 0).batch(), 0u);
  const std::vector<std::size_t> order{4, 0, 4};
  const auto picked = x.samples(order);
  ASSERT_EQ(picked.batch(), 3u);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t f = 0; f < 3; ++f) EXPECT_EQ(picked(f, i), x(f, order[i]));
  tl_test::expect_failure<tl::shape_error>([&] { (void)x.samples(3, 3); }, {"samples [3, 3 + 3) run past the batch of 5"});
  tl_test::expect_failure<tl::shape_error>([&] { (void)x.samples(6, 0); }, {"past the batch of 5"});
  const std::vector<std::size_t> bad{1, 5};
  tl_test::expect_failure<tl::shape_error>([&] { (void)x.samples(bad); }, {"index 1 is sample 5, past the batch of 5"});
}

}  // namespace
