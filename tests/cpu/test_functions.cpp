// Every differentiable function: value, gradient and Hessian-vector product against
// float64 references at random non-zero points.
#include <cmath>
#include <limits>

#include "../support/expect_ad.hpp"

namespace {

using tl_test::expect_ad;
using tl_test::random_point;
using P1 = std::array<double, 1>;
using P2 = std::array<double, 2>;

constexpr int points_per_function = 25;

template <class F, class Reference>
void check_unary(const F& f, const Reference& reference, double low, double high, std::uint64_t seed,
                 double tolerance = 1e-6) {
  std::mt19937_64 gen(seed);
  for (int n = 0; n < points_per_function; ++n) {
    expect_ad([&](auto x) { return f(x); }, [&](const P1& p) { return reference(p[0]); }, random_point<1>(gen, low, high),
              tolerance);
  }
}

// The functions added for losses and activations, held to 1e-8 (float64).
constexpr double tight = 1e-8;

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

TEST(Functions, Exp) { check_unary(tl::exp, [](double x) { return std::exp(x); }, -3, 3, 1); }
TEST(Functions, Log) { check_unary(tl::log, [](double x) { return std::log(x); }, 0.1, 5, 2); }
TEST(Functions, Sqrt) { check_unary(tl::sqrt, [](double x) { return std::sqrt(x); }, 0.1, 5, 3); }
TEST(Functions, Sin) { check_unary(tl::sin, [](double x) { return std::sin(x); }, -4, 4, 4); }
TEST(Functions, Cos) { check_unary(tl::cos, [](double x) { return std::cos(x); }, -4, 4, 5); }
TEST(Functions, Tanh) { check_unary(tl::tanh, [](double x) { return std::tanh(x); }, -3, 3, 6); }
TEST(Functions, Sigmoid) { check_unary(tl::sigmoid, sigmoid_ref, -6, 6, 7); }
TEST(Functions, Softplus) { check_unary(tl::softplus, [](double x) { return std::log(1 + std::exp(x)); }, -6, 6, 8); }
TEST(Functions, Relu) { check_unary(tl::relu, [](double x) { return x > 0 ? x : 0.0; }, -3, 3, 9); }
TEST(Functions, LeakyRelu) {
  check_unary(tl::leaky_relu, [](double x) { return x > 0 ? x : 0.01 * x; }, -3, 3, 10);
  check_unary(tl::leaky_relu_fn(0.2), [](double x) { return x > 0 ? x : 0.2 * x; }, -3, 3, 11);
}
// Settings that are not finite are refused where the activation is made (a NaN alpha
// made every step's loss NaN with no cause named), as huber_loss's delta is.
TEST(Functions, ParametrizedActivationsRefuseNonFiniteSettings) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (const double bad : {nan, inf, -inf}) {
    EXPECT_THROW((void)tl::elu_fn(bad), std::invalid_argument) << bad;
    EXPECT_THROW((void)tl::leaky_relu_fn(bad), std::invalid_argument) << bad;
  }
  EXPECT_NO_THROW((void)tl::elu_fn(-1.0));  // as PyTorch takes it
  EXPECT_NO_THROW((void)tl::leaky_relu_fn(-0.5));
}
TEST(Functions, Elu) {
  check_unary(tl::elu, [](double x) { return x > 0 ? x : std::exp(x) - 1; }, -3, 3, 12);
  check_unary(tl::elu_fn(0.5), [](double x) { return x > 0 ? x : 0.5 * (std::exp(x) - 1); }, -3, 3, 13);
}
// ELU's value comes from expm1 and its slope from exp: near 0 and far below it, both
// keep their relative accuracy in float and double (from e^x - 1, the value lost its
// digits near 0 and the slope was 0 from x = -17 in float).
TEST(Functions, EluKeepsRelativeAccuracyNearZeroAndFarBelow) {
  const auto check = [](auto x, double tolerance) {
    using T = decltype(x);
    T slope{};
    const T value = tl::elu_fn(0.5).value_and_derivative(x, slope);
    const double exact_value = 0.5 * std::expm1(double(x)), exact_slope = 0.5 * std::exp(double(x));
    EXPECT_LE(std::abs(value - exact_value), tolerance * std::abs(exact_value)) << x;
    EXPECT_LE(std::abs(slope - exact_slope), tolerance * exact_slope) << x;
  };
  for (const double x : {-1e-30, -1e-10, -1e-4, -0.3, -2.0, -20.0, -40.0, -700.0}) check(x, 1e-15);
  for (const float x : {-1e-30f, -1e-10f, -1e-4f, -0.3f, -2.0f, -20.0f, -40.0f, -80.0f}) check(x, 4e-7);
}
TEST(Functions, GeluTanhApproximation) {
  check_unary(tl::gelu, [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }, -4, 4, 14);
}
TEST(Functions, GeluErf) { check_unary(tl::gelu_erf, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -4, 4, 15); }
TEST(Functions, Silu) { check_unary(tl::silu, [](double x) { return x * sigmoid_ref(x); }, -5, 5, 16); }
TEST(Functions, Abs) { check_unary(tl::abs, [](double x) { return std::abs(x); }, -3, 3, 17); }
TEST(Functions, Square) { check_unary(tl::square, [](double x) { return x * x; }, -3, 3, 18); }
TEST(Functions, Negate) { check_unary([](auto x) { return -x; }, [](double x) { return -x; }, -3, 3, 19); }
TEST(Functions, Cosh) { check_unary(tl::cosh, [](double x) { return std::cosh(x); }, -3, 3, 40, tight); }
TEST(Functions, Sinh) { check_unary(tl::sinh, [](double x) { return std::sinh(x); }, -3, 3, 41, tight); }
TEST(Functions, Tan) { check_unary(tl::tan, [](double x) { return std::tan(x); }, -1.2, 1.2, 42, tight); }
TEST(Functions, Atan) { check_unary(tl::atan, [](double x) { return std::atan(x); }, -4, 4, 43, tight); }
TEST(Functions, Asinh) { check_unary(tl::asinh, [](double x) { return std::asinh(x); }, -4, 4, 44, tight); }
TEST(Functions, Log1p) { check_unary(tl::log1p, [](double x) { return std::log1p(x); }, -0.9, 4, 45, tight); }
TEST(Functions, Expm1) { check_unary(tl::expm1, [](double x) { return std::expm1(x); }, -3, 3, 46, tight); }
TEST(Functions, Erf) { check_unary(tl::erf, [](double x) { return std::erf(x); }, -2.5, 2.5, 47, tight); }

TEST(Functions, MinMaxAndWhere) {
  std::mt19937_64 gen(48);
  for (int n = 0; n < points_per_function; ++n) {
    auto p = random_point<2>(gen, -3, 3);
    if (std::abs(p[0] - p[1]) < 0.05) p[1] += 0.2;  // away from the kink
    expect_ad([](auto x, auto y) { return tl::max(x, y) * x; }, [](const P2& q) { return std::max(q[0], q[1]) * q[0]; },
              p, tight);
    expect_ad([](auto x, auto y) { return tl::min(x * y, 0.5); }, [](const P2& q) { return std::min(q[0] * q[1], 0.5); },
              p, tight);
    expect_ad([](auto x, auto y) { return tl::where(x > y, tl::sin(x) * y, y * y + 1.0); },
              [](const P2& q) { return q[0] > q[1] ? std::sin(q[0]) * q[1] : q[1] * q[1] + 1; }, p, tight);
    expect_ad([](auto x, auto y) { return tl::where(x * y <= tl::lit<0.25>, x, 2.0 * y); },
              [](const P2& q) { return q[0] * q[1] <= 0.25 ? q[0] : 2 * q[1]; }, p, tight);
  }
  // On numbers they compute; at a tie, max and min split the derivative evenly.
  EXPECT_EQ(tl::max(2.0, 3.0), 3.0);
  EXPECT_EQ(tl::where(1.0 < 2.0, 4.0, 5.0), 4.0);
  const auto tie = tl::grad([](auto x, auto y) { return tl::max(x, y); }, P2{1.5, 1.5});
  EXPECT_EQ(tie[0], 0.5);
  EXPECT_EQ(tie[1], 0.5);
  // Second derivatives at the tie follow the same halves, so the Hessian is symmetric
  // (JAX's [[1, 0.5], [0.5, 0]]; taking a's tangent once gave [[1.5, 0.5], [0, 0]]).
  for (const auto& H : {tl::hessian([](auto a, auto b) { return tl::max(a, b) * a; }, P2{1.0, 1.0}),
                        tl::hessian([](auto a, auto b) { return tl::min(a, b) * a; }, P2{1.0, 1.0})}) {
    EXPECT_EQ(H[0][0], 1.0);
    EXPECT_EQ(H[0][1], 0.5);
    EXPECT_EQ(H[1][0], 0.5);
    EXPECT_EQ(H[1][1], 0.0);
  }
  // A NaN on either side is the result (max(3, NaN) was 3), reductions included.
  const double nan = std::nan("");
  // Neither side gets a derivative then (not a tie: JAX's (0, 0); it gave both half).
  for (const P2& q : {P2{nan, 3.0}, P2{3.0, nan}, P2{nan, nan}}) {
    const auto of_max = tl::value_and_grad([](auto x, auto y) { return tl::max(x, y); }, q);
    const auto of_min = tl::value_and_grad([](auto x, auto y) { return tl::min(x, y); }, q);
    EXPECT_TRUE(std::isnan(of_max.value));
    EXPECT_TRUE(std::isnan(of_min.value));
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(of_max.gradient[i], 0.0) << i;
      EXPECT_EQ(of_min.gradient[i], 0.0) << i;
    }
  }
  // Away from ties and NaN, one side takes it all, either order.
  for (const P2& q : {P2{1.0, 2.0}, P2{2.0, 1.0}}) {
    const auto g = tl::grad([](auto x, auto y) { return tl::max(x, y) + 3.0 * tl::min(x, y); }, q);
    EXPECT_EQ(g[0], q[0] > q[1] ? 1.0 : 3.0);
    EXPECT_EQ(g[1], q[1] > q[0] ? 1.0 : 3.0);
  }
  const auto reduced = tl::value_and_grad(
      [](auto x, auto y) { return tl::max(tl::make_array(x, y, 3.0 * x)) + tl::min(tl::make_array(x, y)); },
      P2{1.0, nan});
  EXPECT_TRUE(std::isnan(reduced.value));
  // relu too (it gave 0 with derivative 0, and a NaN weight in a relu layer trained on
  // unreported); at 0 and below it is 0.
  EXPECT_TRUE(std::isnan(tl::value_and_grad([](auto x) { return tl::relu(x); }, std::array{nan}).value));
  EXPECT_TRUE(std::isnan(tl::relu(std::nanf(""))));
  EXPECT_EQ(tl::relu(-2.0), 0.0);
  EXPECT_EQ(tl::relu(0.0f), 0.0f);
}

TEST(ExpressionArrays, LogsumexpOfInfinitiesIsInfiniteAsInJax) {
  // inf - inf made both NaN before the largest element was replaced by 0 when infinite.
  const auto f = [](auto a, auto b, auto c) { return tl::logsumexp(tl::make_array(a, b, c)); };
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(tl::evaluate(f, std::array<double, 3>{-inf, -inf, -inf}), -inf);
  EXPECT_EQ(tl::evaluate(f, std::array<double, 3>{1.0, inf, -inf}), inf);
  EXPECT_TRUE(std::isnan(tl::evaluate(f, std::array<double, 3>{1.0, std::nan(""), 2.0})));
  // One -inf element: a finite value, and no derivative for it.
  const auto [value, gradient] = tl::value_and_grad(f, std::array<double, 3>{1.0, 2.0, -inf});
  EXPECT_NEAR(value, std::log(std::exp(1.0) + std::exp(2.0)), 1e-15);
  EXPECT_NEAR(gradient[0], 1.0 / (1.0 + std::exp(1.0)), 1e-15);
  EXPECT_EQ(gradient[2], 0.0);
}

TEST(ExpressionArrays, ReductionsAndSoftmax) {
  // mean's 1/N is a literal, so a mean of shareable elements is shared (not copied per use).
  static_assert(tl::is_shareable_v<decltype(tl::mean(tl::variables<0, 3>()))>);
  using P3 = std::array<double, 3>;
  std::mt19937_64 gen(49);
  for (int n = 0; n < points_per_function; ++n) {
    const auto p = random_point<3>(gen, -3, 3);
    const auto lse = [](const P3& q) { return std::log(std::exp(q[0]) + std::exp(q[1]) + std::exp(q[2])); };
    expect_ad([](auto a, auto b, auto c) { return tl::logsumexp(tl::expression_array<decltype(a), decltype(b), decltype(c)>{{a, b, c}}); },
              lse, p, tight);
    expect_ad([](auto a, auto b, auto c) {
                const tl::expression_array<decltype(a), decltype(b), decltype(c)> v{{a, b, c}};
                return tl::sum(tl::exp(v) * v) + tl::max(v) - tl::min(v) + tl::mean(v) + tl::dot(v, v);
              },
              [](const P3& q) {
                double s = 0, d = 0;
                for (double x : q) { s += std::exp(x) * x; d += x * x; }
                return s + std::max({q[0], q[1], q[2]}) - std::min({q[0], q[1], q[2]}) + (q[0] + q[1] + q[2]) / 3 + d;
              },
              p, tight);
    expect_ad([](auto a, auto b, auto c) {
                const tl::expression_array<decltype(a), decltype(b), decltype(c)> v{{a, b, c}};
                return tl::log_softmax(v)[tl::idx<1>];
              },
              [&](const P3& q) { return q[1] - lse(q); }, p, tight);
  }
}

TEST(Functions, PowOfTwoExpressions) {
  std::mt19937_64 gen(50);
  for (int n = 0; n < points_per_function; ++n) {
    auto p = random_point<2>(gen, 0.2, 3);
    expect_ad([](auto x, auto y) { return tl::pow(x, y); }, [](const P2& q) { return std::pow(q[0], q[1]); }, p, tight);
  }
}

TEST(Functions, PowConstant) {
  check_unary([](auto x) { return tl::pow(x, 2.5); }, [](double x) { return std::pow(x, 2.5); }, 0.1, 3, 20);
  check_unary([](auto x) { return tl::pow(x, -1.5); }, [](double x) { return std::pow(x, -1.5); }, 0.2, 3, 21);
}

// At 0, the derivatives JAX and PyTorch give (each was NaN: 0 * 0^-1, 0^y log 0):
// x^0 has none; x^1 has second derivative 0; x^y at (0, 2) has gradient (0, 0) and
// Hessian [[2, 0], [0, 0]].
TEST(Functions, PowAtZero) {
  using P1 = std::array<double, 1>;
  EXPECT_EQ(tl::grad([](auto x) { return tl::pow(x, 0.0); }, P1{0.0})[0], 0.0);
  EXPECT_EQ(tl::grad([](auto x) { return tl::pow(x, 1.0); }, P1{0.0})[0], 1.0);
  EXPECT_EQ(tl::hvp([](auto x) { return tl::pow(x, 1.0); }, P1{0.0}, P1{1.0})[0], 0.0);
  const auto f = [](auto x, auto y) { return tl::pow(x, y); };
  const auto g = tl::grad(f, P2{0.0, 2.0});
  EXPECT_EQ(g[0], 0.0);
  EXPECT_EQ(g[1], 0.0);
  const auto hx = tl::hvp(f, P2{0.0, 2.0}, P2{1.0, 0.0}), hy = tl::hvp(f, P2{0.0, 2.0}, P2{0.0, 1.0});
  EXPECT_EQ(hx[0], 2.0);
  EXPECT_EQ(hx[1], 0.0);
  EXPECT_EQ(hy[0], 0.0);
  EXPECT_EQ(hy[1], 0.0);
  // An exponent of 0 away from x = 0 keeps its mixed second derivative, 1 / x.
  const auto h = tl::hessian(f, P2{2.0, 0.0});
  EXPECT_NEAR(h[0][1], 0.5, 1e-15);
  EXPECT_NEAR(h[1][0], 0.5, 1e-15);
}

// In float on the host, softplus's log1p is a series and gelu_erf's erf a rational
// form (both vectorize); value and derivative against the double functions.
TEST(Functions, FloatSoftplusAndGeluErfMatchDouble) {
  double worst_softplus = 0, worst_gelu = 0;
  for (float x = -30.0f; x <= 30.0f; x += 0.00123f) {
    float df, dg;
    double dd, de;
    const float sf = tl::softplus.value_and_derivative(x, df), gf = tl::gelu_erf.value_and_derivative(x, dg);
    const double sd = tl::softplus.value_and_derivative(double(x), dd), gd = tl::gelu_erf.value_and_derivative(double(x), de);
    const double scale = std::max(1.0, std::abs(sd));
    worst_softplus = std::max({worst_softplus, std::abs(sf - sd) / scale, std::abs(df - dd)});
    worst_gelu = std::max({worst_gelu, std::abs(gf - gd) / std::max(1.0, std::abs(gd)), std::abs(dg - de)});
  }
  EXPECT_LT(worst_softplus, 3e-7);
  EXPECT_LT(worst_gelu, 1.5e-6);
  EXPECT_EQ(tl::softplus(0.0f), std::log(2.0f));
  EXPECT_GT(tl::softplus(-90.0f), 0.0f);  // e^-90 is a float; log1p of it is itself
}

// Float Hessians of the activations whose rules hold double constants (gelu's sqrt(2/pi),
// elu's and leaky_relu's slopes): they compile (dual<float>(0.5) was ambiguous) and
// equal the double Hessians to float precision.
TEST(Functions, FloatHessiansOfParametrizedActivationsMatchDouble) {
  const auto check = [](const auto& act, float a, float b) {
    const auto f = [act](auto u, auto v) { return act(u) * v + act(u * v); };
    const auto hf = tl::hessian(f, std::array{a, b});
    const auto hd = tl::hessian(f, std::array{double(a), double(b)});
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) EXPECT_NEAR(hf[i][j], hd[i][j], 2e-6 * std::max(1.0, std::abs(hd[i][j]))) << i << j;
    return hd[0][0];
  };
  EXPECT_NE(check(tl::gelu, 0.7f, -1.3f), 0.0);
  EXPECT_NE(check(tl::gelu_erf, -0.4f, 1.1f), 0.0);
  EXPECT_NE(check(tl::elu_fn(0.5), -0.8f, 1.7f), 0.0);
  EXPECT_NE(check(tl::silu, 0.9f, 0.6f), 0.0);
  check(tl::leaky_relu_fn(0.2), -0.8f, 1.7f);  // piecewise linear: its Hessian is 0 but for the product
}

TEST(Functions, ScalarCallsComputeValues) {
  EXPECT_DOUBLE_EQ(tl::relu(-2.0), 0.0);
  EXPECT_NEAR(tl::sigmoid(0.3), sigmoid_ref(0.3), 1e-15);
  EXPECT_NEAR(tl::softplus(-40.0), std::exp(-40.0), 1e-25);  // stable far from 0
  EXPECT_NEAR(tl::sigmoid(-800.0), 0.0, 1e-300);
}

TEST(Arithmetic, BinaryOperators) {
  std::mt19937_64 gen(30);
  for (int n = 0; n < points_per_function; ++n) {
    const auto p = random_point<2>(gen, -3, 3);
    expect_ad([](auto x, auto y) { return x + y; }, [](const P2& q) { return q[0] + q[1]; }, p);
    expect_ad([](auto x, auto y) { return x - y; }, [](const P2& q) { return q[0] - q[1]; }, p);
    expect_ad([](auto x, auto y) { return x * y; }, [](const P2& q) { return q[0] * q[1]; }, p);
    expect_ad([](auto x, auto y) { return x / y; }, [](const P2& q) { return q[0] / q[1]; }, p, 1e-5);
    expect_ad([](auto x, auto y) { return 2.0 * x - y / 3.0 + 1.5; }, [](const P2& q) { return 2 * q[0] - q[1] / 3 + 1.5; }, p);
    expect_ad([](auto x, auto y) { return 4.0 / (x * x + y * y + 1.0); },
              [](const P2& q) { return 4 / (q[0] * q[0] + q[1] * q[1] + 1); }, p);
  }
}

// The activations whose derivative is a function of their value: derivative_from_value
// of the value is the derivative value_and_derivative gives, bit for bit, at ordinary
// and special inputs (±0, ±inf, NaN, the smallest subnormal, saturation), float and
// double. Only activations that say so qualify (value_derivable); one with a static
// derivative_from_value but no flag, and gelu, do not.
template <class F, class T>
void expect_value_derivative_exact(const F& f) {
  static_assert(tl::value_derivable_activation<F>);
  const T inf = std::numeric_limits<T>::infinity();
  for (T x : {T(-20), T(-3.5), T(-1), T(-0.25), T(-0.0), T(0), T(1e-30), T(0.7), T(1), T(4), T(20), inf, -inf,
              std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::quiet_NaN()}) {
    T d;
    const T y = f.value_and_derivative(x, d);
    const T again = F::derivative_from_value(y);
    if (std::isnan(d)) EXPECT_TRUE(std::isnan(again)) << F::name << " at " << x;
    else EXPECT_EQ(again, d) << F::name << " at " << x;
  }
}
struct claims_a_value_derivative {  // a derivative of the value, but no flag: not taken
  static constexpr const char* name = "mine";
  template <class T> T value_and_derivative(T x, T& d) const { d = T(2) * x; return x * x; }
  template <class T> static T derivative_from_value(T y) { return T(2) * y; }
};
TEST(Functions, DerivativeFromValueIsExact) {
  expect_value_derivative_exact<tl::tanh_fn, float>(tl::tanh);
  expect_value_derivative_exact<tl::sigmoid_fn, float>(tl::sigmoid);
  expect_value_derivative_exact<tl::relu_fn, float>(tl::relu);
  expect_value_derivative_exact<tl::identity_fn, float>(tl::identity);
  expect_value_derivative_exact<tl::tanh_fn, double>(tl::tanh);
  expect_value_derivative_exact<tl::sigmoid_fn, double>(tl::sigmoid);
  expect_value_derivative_exact<tl::relu_fn, double>(tl::relu);
  static_assert(!tl::value_derivable_activation<tl::gelu_fn> && !tl::value_derivable_activation<tl::silu_fn>);
  static_assert(tl::builtin_activation<claims_a_value_derivative> &&
                !tl::value_derivable_activation<claims_a_value_derivative>);
}

}  // namespace
