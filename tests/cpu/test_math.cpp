// The vectorizable float exp and tanh used on the host, against double libm.
#include <gtest/gtest.h>

#include <cmath>

#include "tapeless/core/math.hpp"

TEST(FastMath, ExpRelativeErrorBelowThreeUlp) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.00731f) {
    const double exact = std::exp(double(x));
    worst = std::max(worst, std::abs(tl::math::exp(x) - exact) / exact);
  }
  EXPECT_LT(worst, 3 * 5.96e-8);
}

TEST(FastMath, DoubleExpWithinThreeUlp) {
  double worst = 0;
  for (double x = -707.0; x <= 708.0; x += 0.0131) {
    const long double exact = std::exp(static_cast<long double>(x));
    worst = std::max(worst, double(std::abs((tl::math::detail::host_exp(x) - exact) / exact)));
  }
  EXPECT_LT(worst, 3 * 1.11e-16);  // 3 ulp at the bottom of a binade
  EXPECT_EQ(tl::math::detail::host_exp(0.0), 1.0);
  EXPECT_EQ(tl::math::detail::host_exp(-1000.0), 0.0);
  EXPECT_TRUE(std::isinf(tl::math::detail::host_exp(1000.0)));
}

TEST(FastMath, TanhAbsoluteErrorBelow3e7) {
  double worst = 0;
  for (float x = -12.0f; x <= 12.0f; x += 0.000913f) worst = std::max(worst, std::abs(tl::math::tanh(x) - std::tanh(double(x))));
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(tl::math::tanh(0.0f), 0.0f);
  EXPECT_EQ(tl::math::tanh(-30.0f), -1.0f);
}
