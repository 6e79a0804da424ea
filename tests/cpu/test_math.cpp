// The vectorizable float exp, expm1, tanh and erf used on the host, against double libm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "tapeless/core/lanes.hpp"
#include "tapeless/core/math.hpp"

TEST(FastMath, ExpRelativeErrorBelowThreeUlp) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.00731f) {
    const double exact = std::exp(double(x));
    worst = std::max(worst, std::abs(tl::math::exp(x) - exact) / exact);
  }
  EXPECT_LT(worst, 3 * 5.96e-8);
}

// Past [-87, 88]: the normal results up to FLT_MAX within 3 ulp, the subnormals within
// one subnormal step, then 0 and infinity; NaN stays NaN. (The input was once clamped,
// and exp(100.f) was 1.65e38.)
TEST(FastMath, ExpOverflowsAndUnderflowsAsExpf) {
  double worst = 0;
  for (float x = 87.0f; x <= 88.7228f; x += 0.0001f) {
    const double exact = std::exp(double(x));
    worst = std::max(worst, std::abs(tl::math::exp(x) - exact) / exact);
  }
  for (float x = -87.3f; x >= -87.0f - 0.33f; x -= 0.0001f) {  // the normal range's bottom
    const double exact = std::exp(double(x));
    worst = std::max(worst, std::abs(tl::math::exp(x) - exact) / exact);
  }
  EXPECT_LT(worst, 3 * 5.96e-8);
  const double subnormal_step = std::numeric_limits<float>::denorm_min();
  for (float x = -88.0f; x >= -103.9f; x -= 0.01f)
    EXPECT_LE(std::abs(tl::math::exp(x) - std::exp(double(x))), std::max(subnormal_step, 3e-7 * std::exp(double(x)))) << x;
  EXPECT_TRUE(std::isinf(tl::math::exp(88.73f)));
  EXPECT_TRUE(std::isinf(tl::math::exp(100.0f)));
  EXPECT_TRUE(std::isinf(tl::math::exp(std::numeric_limits<float>::infinity())));
  EXPECT_EQ(tl::math::exp(-104.0f), 0.0f);
  EXPECT_EQ(tl::math::exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(tl::math::exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(tl::math::exp(0.0f), 1.0f);
}

// Float erf (host_erff) against double erf: 4.4e-7 at worst over every float in [-6, 6]
// (measured once; here a dense sample), exact signs and saturation, NaN through.
TEST(FastMath, ErfAbsoluteErrorBelow5e7) {
  double worst = 0;
  for (float x = -6.0f; x <= 6.0f; x += 0.0000917f) {
    const float y = tl::math::erf(x);
    worst = std::max(worst, std::abs(y - std::erf(double(x))));
    ASSERT_LE(std::abs(y), 1.0f) << x;  // 1 + erf(x) >= 0 (the form overshoots near |x| = 3.9)
  }
  EXPECT_LT(worst, 5e-7);
  const float tiny = std::numeric_limits<float>::denorm_min() * 1000;  // x p / q once underflowed here
  EXPECT_NEAR(tl::math::erf(tiny), 1.1283791670955126 * tiny, 2 * std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(tl::math::erf(0.0f), 0.0f);
  EXPECT_EQ(tl::math::erf(-2.5f), -tl::math::erf(2.5f));
  EXPECT_EQ(tl::math::erf(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(tl::math::erf(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(tl::math::erf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_NEAR(tl::math::erf(1e-20f), 1.1283791670955126e-20, 2e-27);  // 2x/sqrt(pi) near 0
}

TEST(FastMath, DoubleExpWithinThreeUlp) {
  double worst = 0;
  for (double x = -708.3; x <= 709.78; x += 0.0131) {  // normal results up to DBL_MAX's
    const long double exact = std::exp(static_cast<long double>(x));
    worst = std::max(worst, double(std::abs((tl::math::detail::host_exp(x) - exact) / exact)));
  }
  EXPECT_LT(worst, 3 * 1.11e-16);  // 3 ulp at the bottom of a binade
  EXPECT_EQ(tl::math::detail::host_exp(0.0), 1.0);
  EXPECT_EQ(tl::math::detail::host_exp(-1000.0), 0.0);
  EXPECT_TRUE(std::isinf(tl::math::detail::host_exp(1000.0)));
  // The top: finite to ln(DBL_MAX), infinite past it (it was infinite from 709 on).
  EXPECT_TRUE(std::isfinite(tl::math::detail::host_exp(709.78)));
  EXPECT_GT(tl::math::detail::host_exp(709.78), 1.7e308);
  EXPECT_TRUE(std::isinf(tl::math::detail::host_exp(709.79)));
  // The bottom: subnormal results within a few of their units, 0 past the last one.
  const double unit = std::numeric_limits<double>::denorm_min();
  for (double x = -745.1; x < -708.4; x += 0.0173) {
    const long double exact = std::exp(static_cast<long double>(x));
    EXPECT_LE(std::abs(tl::math::detail::host_exp(x) - exact), std::max(3 * 1.11e-16 * double(exact), 1.0 * unit)) << x;
  }
  EXPECT_EQ(tl::math::detail::host_exp(-745.2), 0.0);
  EXPECT_TRUE(std::isnan(tl::math::detail::host_exp(std::numeric_limits<double>::quiet_NaN())));
}

// The lanes' double expm1 (elu in double expression models) keeps its relative accuracy
// near 0 and everywhere else, against long double expm1.
TEST(FastMath, DoubleExpm1RelativeErrorEverywhere) {
  double worst = 0, worst_at = 0;
  for (double a = 1e-300; a < 709.7; a *= 1.0031)
    for (const double x : {a, -a}) {
      const long double exact = std::expm1(static_cast<long double>(x));
      const double error = double(std::abs((tl::math::detail::host_expm1(x) - exact) / exact));
      if (error > worst) worst = error, worst_at = x;
    }
  std::printf("double expm1: worst relative error %.3g at %g\n", worst, worst_at);
  EXPECT_LT(worst, 5e-16) << "at " << worst_at;  // measured 4.3e-16 (near 0: the Padé quotient's roundings)
  EXPECT_TRUE(std::signbit(tl::math::detail::host_expm1(-0.0)));
  EXPECT_EQ(tl::math::detail::host_expm1(-41.0), -1.0);
  EXPECT_TRUE(std::isinf(tl::math::detail::host_expm1(710.0)));
  EXPECT_TRUE(std::isnan(tl::math::detail::host_expm1(std::numeric_limits<double>::quiet_NaN())));
}

// Double tanh on the host (tanh and gelu layers in double): relative error against long
// double tanh on a geometric grid from 1e-300 to past where tanh rounds to 1, odd, and
// its edges. (A review's random sweep found 6.7e-16 at worst, near 5.5e-7.)
TEST(FastMath, DoubleTanhRelativeErrorEverywhere) {
  double worst = 0, worst_at = 0;
  for (double a = 1e-300; a < 25; a *= 1.0007)
    for (const double x : {a, -a}) {
      const long double exact = std::tanh(static_cast<long double>(x));
      const double y = tl::math::detail::host_tanh(x);
      const double error = double(std::abs((y - exact) / exact));
      if (error > worst) worst = error, worst_at = x;
      ASSERT_EQ(tl::math::detail::host_tanh(-x), -y) << x;
      ASSERT_LE(std::abs(y), 1.0) << x;
    }
  std::printf("double tanh: worst relative error %.3g at %g\n", worst, worst_at);
  EXPECT_LT(worst, 7e-16) << "at " << worst_at;  // 6.0e-16 on this grid, near |x| = 0.002: e^r - 1's Padé quotient
  EXPECT_TRUE(std::signbit(tl::math::detail::host_tanh(-0.0)));
  EXPECT_EQ(tl::math::detail::host_tanh(19.1), 1.0);
  EXPECT_EQ(tl::math::detail::host_tanh(-std::numeric_limits<double>::infinity()), -1.0);
  EXPECT_TRUE(std::isnan(tl::math::detail::host_tanh(std::numeric_limits<double>::quiet_NaN())));
  // Lanes of doubles take it: a tanh layer's values in double on the CPU.
  tl::lanes<double, 8> v;
  for (std::size_t k = 0; k < 8; ++k) v.v[k] = 0.37 * double(k) - 1.1;
  const auto t = tl::math::tanh(v);
  for (std::size_t k = 0; k < 8; ++k) EXPECT_EQ(t.v[k], tl::math::detail::host_tanh(v.v[k]));
}

// Every float in [-12, 12]: 1.0e-7 with fused multiply-adds (-march=native), 1.3e-7
// without (SSE2 only); the bound holds for both.
TEST(FastMath, TanhAbsoluteErrorBelow1_5e7) {
  double worst = 0;
  for (float x = -12.0f; x <= 12.0f; x += 0.000913f) {
    const float y = tl::math::tanh(x);
    worst = std::max(worst, std::abs(y - std::tanh(double(x))));
    EXPECT_LE(std::abs(y), 1.0f) << x;
    EXPECT_EQ(tl::math::tanh(-x), -y) << x;  // odd, exactly
  }
  EXPECT_LT(worst, 1.5e-7);
}

// Small |x| keep their relative accuracy (no 1 - e^{-2x} cancellation): every float in
// (0, 12] measured 1.8e-7 with fused multiply-adds, 2.3e-7 without.
TEST(FastMath, TanhRelativeErrorNearZero) {
  double worst = 0;
  for (float x = 1e-30f; x < 1.0f; x *= 1.0137f) {
    const double exact = std::tanh(double(x));
    worst = std::max(worst, std::abs(tl::math::tanh(x) - exact) / exact);
  }
  EXPECT_LT(worst, 3e-7);
}

TEST(FastMath, TanhSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(tl::math::tanh(0.0f), 0.0f);
  EXPECT_FALSE(std::signbit(tl::math::tanh(0.0f)));
  EXPECT_EQ(tl::math::tanh(-0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(tl::math::tanh(-0.0f)));
  // Exactly +-1 wherever float tanh rounds to 1 (from 9.011 on), up to infinity.
  for (const float x : {9.02f, 9.1f, 9.5f, 9.6f, 10.0f, 20.0f, 30.0f, 44.0f, 88.0f, 1e6f, 1e30f,
                        std::numeric_limits<float>::max(), inf}) {
    EXPECT_EQ(tl::math::tanh(x), 1.0f) << x;
    EXPECT_EQ(tl::math::tanh(-x), -1.0f) << x;
  }
  int not_one = 0;
  for (float x = 9.02f; x < 12.0f; x += 0.0001f) not_one += tl::math::tanh(x) != 1.0f;
  EXPECT_EQ(not_one, 0);
  EXPECT_TRUE(std::isnan(tl::math::tanh(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(tl::math::tanh(-std::numeric_limits<float>::quiet_NaN())));
  // Denormals and tiny normals: tanh(x) = x in float.
  for (const float x : {std::numeric_limits<float>::denorm_min(), 1e-42f, 1e-40f, 5e-39f,
                        std::numeric_limits<float>::min(), 1e-30f, 1e-10f}) {
    EXPECT_EQ(tl::math::tanh(x), x) << x;
    EXPECT_EQ(tl::math::tanh(-x), -x) << x;
  }
}

// expm1 keeps its relative accuracy everywhere, near 0 above all (where e^x - 1 would
// cancel): positive and negative floats from 1e-30 to past the overflow.
TEST(FastMath, Expm1RelativeErrorEverywhere) {
  double worst = 0, worst_at = 0;
  for (float a = 1e-30f; a < 100.0f; a *= 1.00137f)
    for (const float x : {a, -a}) {
      const double exact = std::expm1(double(x));
      if (std::isinf(float(exact))) continue;  // beyond FLT_MAX: the overflow test below
      const double error = std::abs(tl::math::expm1(x) - exact) / std::abs(exact);
      if (error > worst) worst = error, worst_at = x;
    }
  // Every float in [-30, 30]: 1.23e-7 with fused multiply-adds, 1.20e-7 without (this
  // sample finds 1.12e-7). The one-constant reduction tanh uses would give 1.39e-7 here
  // with fused multiply-adds and 1.1e-6 without: the bound tells them apart.
  EXPECT_LT(worst, 1.3e-7) << "at " << worst_at;
  std::printf("expm1: worst relative error %.3g at %g\n", worst, worst_at);
}

TEST(FastMath, Expm1SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(tl::math::expm1(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(tl::math::expm1(-0.0f)));
  for (const float x : {-17.5f, -30.0f, -31.0f, -104.0f, -1e30f, -inf}) EXPECT_EQ(tl::math::expm1(x), -1.0f) << x;
  for (const float x : {88.73f, 100.0f, 1e30f, inf}) EXPECT_EQ(tl::math::expm1(x), inf) << x;
  EXPECT_TRUE(std::isnan(tl::math::expm1(std::numeric_limits<float>::quiet_NaN())));
  for (const float x : {std::numeric_limits<float>::denorm_min(), 1e-40f, 1e-20f}) {
    EXPECT_EQ(tl::math::expm1(x), x) << x;
    EXPECT_EQ(tl::math::expm1(-x), -x) << x;
  }
}

namespace tl::math::detail {  // the float and double forms under one name, for the test below
inline float host_expm1_any(float x) { return host_expm1f(x); }
inline double host_expm1_any(double x) { return host_expm1(x); }
inline float host_expm1_and_exp_nonpositive_any(float x, float& e) { return host_expm1f_and_expf_nonpositive(x, e); }
inline double host_expm1_and_exp_nonpositive_any(double x, double& e) { return host_expm1_and_exp_nonpositive(x, e); }
}  // namespace tl::math::detail

// ELU's one reduction for e^x - 1 and e^x (x <= 0): the first is expm1's to the bit,
// float and double; the second within 3 ulp of exp down to the normals' end, within a
// subnormal step below, then 0. (A reduction that got 2^n wrong, or an e^x formed as
// (e^x - 1) + 1, fails this: from x = -17 that gives 0 or a few digits in float.)
TEST(FastMath, Expm1AndExpOfNonPositiveFromOneReduction) {
  const auto check = [](auto top, auto bottom, auto normal_end, auto step, double ulp) {
    using T = decltype(top);
    const double subnormal = std::numeric_limits<T>::denorm_min();
    double worst = 0;
    for (T x = top; x >= bottom; x -= step) {
      T e = -1;
      const T m = tl::math::detail::host_expm1_and_exp_nonpositive_any(x, e);
      ASSERT_EQ(m, tl::math::detail::host_expm1_any(x)) << x;
      const long double exact = std::exp(static_cast<long double>(x));
      if (x >= normal_end) worst = std::max(worst, double(std::abs((e - exact) / exact)));
      else ASSERT_LE(std::abs(e - exact), std::max<long double>(subnormal, 3 * ulp * exact)) << x;
    }
    std::printf("e^x beside expm1, %zu-byte: worst relative error %.3g (normal results)\n", sizeof(T), worst);
    EXPECT_LT(worst, 3 * ulp) << "e^x, " << sizeof(T) << "-byte";
  };
  check(0.0f, -104.0f, -87.3f, 0.00317f, 5.96e-8);
  check(0.0, -746.0, -708.3, 0.0213, 1.11e-16);
  for (float a = 1e-30f; a < 1.0f; a *= 1.37f) {  // near 0, where e^x - 1 needs its own digits
    float e;
    EXPECT_EQ(tl::math::detail::host_expm1f_and_expf_nonpositive(-a, e), tl::math::expm1(-a)) << a;
  }
  const float inf = std::numeric_limits<float>::infinity();
  float e = 0;
  EXPECT_TRUE(std::signbit(tl::math::detail::host_expm1f_and_expf_nonpositive(-0.0f, e)));
  EXPECT_EQ(e, 1.0f);
  EXPECT_EQ(tl::math::detail::host_expm1f_and_expf_nonpositive(-inf, e), -1.0f);
  EXPECT_EQ(e, 0.0f);
  EXPECT_EQ(tl::math::detail::host_expm1f_and_expf_nonpositive(-105.0f, e), -1.0f);
  EXPECT_EQ(e, 0.0f);
  EXPECT_TRUE(std::isnan(tl::math::detail::host_expm1f_and_expf_nonpositive(std::numeric_limits<float>::quiet_NaN(), e)));
  EXPECT_TRUE(std::isnan(e));
  double d = 0;
  EXPECT_EQ(tl::math::detail::host_expm1_and_exp_nonpositive(-1000.0, d), -1.0);
  EXPECT_EQ(d, 0.0);
  EXPECT_TRUE(std::signbit(tl::math::detail::host_expm1_and_exp_nonpositive(-0.0, d)));
  EXPECT_EQ(d, 1.0);
}

// The lanes' square root (Adam's step, layer_norm) is correctly rounded in every form
// the host takes (AVX-512 builtins, SSE, std::sqrt): bit for bit std::sqrt's, float and
// double, with 0, -0, infinity, NaN and a negative value among the lanes.
TEST(FastMath, LaneSquareRootsAreStdSqrts) {
  const auto check = [](auto scale) {
    using T = decltype(scale);
    tl::lanes<T, 16> a;
    for (int round = 0; round < 500; ++round) {
      for (std::size_t k = 0; k < 16; ++k) a.v[k] = scale * T(round * 16 + k + 1) / T(7.3);
      if (round == 0) {
        a.v[0] = T(0), a.v[1] = -T(0), a.v[2] = std::numeric_limits<T>::infinity();
        a.v[3] = std::numeric_limits<T>::quiet_NaN(), a.v[4] = T(-2), a.v[5] = std::numeric_limits<T>::denorm_min();
      }
      const auto r = tl::math::sqrt(a);
      for (std::size_t k = 0; k < 16; ++k) {
        const T expected = std::sqrt(a.v[k]);
        if (std::isnan(expected)) EXPECT_TRUE(std::isnan(r.v[k])) << a.v[k];
        else EXPECT_EQ(std::memcmp(&r.v[k], &expected, sizeof(T)), 0) << a.v[k] << ": " << r.v[k] << " against " << expected;
      }
    }
  };
  check(1.0f);
  check(1e-30f);
  check(1.0);
  check(1e300);
}
