// The expression core's structure: sharing, run-time constants, Jacobians, Hessians.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../support/expect_ad.hpp"

namespace {

using P1 = std::array<double, 1>;

// y_{k+1} = sin(y_k) * cos(y_k): each level reuses y_k twice, so the expression tree
// has 2^Depth paths but only 3 new node types per level.
template <int Depth, class Y>
auto nested(const Y& y) {
  if constexpr (Depth == 0) return y;
  else return nested<Depth - 1>(tl::sin(y) * tl::cos(y));
}

TEST(Sharing, ScheduleGrowsLinearlyAndValuesAreRight) {
  constexpr int depth = 48;  // 2^48 tree paths: only sharing makes this finish
  const auto f = nested<depth>(tl::var<0>);
  static_assert(tl::graph::schedule_size<decltype(f)> == 3 * depth + 1);
  double y = 0.9, dy = 1.0;
  for (int k = 0; k < depth; ++k) {
    dy *= std::cos(y) * std::cos(y) - std::sin(y) * std::sin(y);
    y = std::sin(y) * std::cos(y);
  }
  const auto [value, gradient] = tl::value_and_grad(f, P1{0.9});
  EXPECT_NEAR(value, y, 1e-14);
  EXPECT_NEAR(gradient[0], dy, 1e-12 * std::max(1.0, std::abs(dy)));
}

// The same recurrence with a factor 0.9: as a run-time constant it makes each level
// unshareable, fine for a few levels (the compile-fail test shows 20 refused); as
// tl::lit<0.9> it stays shared and 20 levels compile and run like the plain one.
template <int Depth, class Y>
auto damped(const Y& y) {
  if constexpr (Depth == 0) return y;
  else return damped<Depth - 1>(tl::sin(y) * tl::cos(y) * 0.9);
}
template <int Depth, class Y>
auto damped_literal(const Y& y) {
  if constexpr (Depth == 0) return y;
  else return damped_literal<Depth - 1>(tl::sin(y) * tl::cos(y) * tl::lit<0.9>);
}
template <int Depth>
std::pair<double, double> damped_reference(double y) {
  double dy = 1.0;
  for (int k = 0; k < Depth; ++k) {
    dy *= 0.9 * (std::cos(y) * std::cos(y) - std::sin(y) * std::sin(y));
    y = 0.9 * std::sin(y) * std::cos(y);
  }
  return {y, dy};
}

TEST(RuntimeConstants, ReusedAFewLevelsDeepStillWork) {
  const auto [value, gradient] = tl::value_and_grad([](auto x) { return damped<4>(x); }, P1{0.9});
  const auto [y, dy] = damped_reference<4>(0.9);
  EXPECT_NEAR(value, y, 1e-14);
  EXPECT_NEAR(gradient[0], dy, 1e-13);
}

TEST(Literals, TwentyLevelsOfASharedConstantCompileAndRun) {
  const auto f = damped_literal<20>(tl::var<0>);
  static_assert(tl::is_shareable_v<decltype(f)>);
  const auto [value, gradient] = tl::value_and_grad(f, P1{0.9});
  const auto [y, dy] = damped_reference<20>(0.9);
  EXPECT_NEAR(value, y, 1e-14);
  EXPECT_NEAR(gradient[0], dy, 1e-13);
}

TEST(Sharing, SubexpressionUsedTwice) {
  tl_test::expect_ad([](auto x, auto y) { auto t = x * y; return tl::sin(t) + t * t; },
                     [](const std::array<double, 2>& p) { double t = p[0] * p[1]; return std::sin(t) + t * t; },
                     std::array{0.7, -1.3});
}

// The schedule finds a type by a hash of its structure and operation; types of the same
// shape (sin(x), cos(x), exp(x); x + y, x * y) must stay apart.
TEST(Sharing, TypesWithTheSameStructureStayDistinct) {
  const auto x = tl::var<0>;
  const auto y = tl::var<1>;
  const auto f = tl::sin(x) * tl::cos(x) + tl::exp(x) + (x + y) * (x * y);
  using sin_t = decltype(tl::sin(tl::var<0>));
  using cos_t = decltype(tl::cos(tl::var<0>));
  static_assert(tl::graph::identity_of<sin_t>::hash != tl::graph::identity_of<cos_t>::hash);
  static_assert(tl::graph::schedule_size<decltype(f)> == 11);  // x, y, sin, cos, *, exp, +, x+y, x*y, *, +
  tl_test::expect_ad([](auto x, auto y) { return tl::sin(x) * tl::cos(x) + tl::exp(x) + (x + y) * (x * y); },
                     [](const std::array<double, 2>& p) {
                       return std::sin(p[0]) * std::cos(p[0]) + std::exp(p[0]) + (p[0] + p[1]) * (p[0] * p[1]);
                     },
                     std::array{0.7, -1.3});
}

// Two types whose hashes collide are told apart by their keys (checked at run time:
// g++ with -fsanitize=undefined refuses to compare distinct addresses at compile time).
TEST(Sharing, NodeTableSeparatesEqualHashes) {
  tl::graph::node_table<4> table{};
  const char a = 0, b = 0, c = 0;
  table.add(&a, 7);
  table.add(&b, 7);
  EXPECT_EQ(table.find(&a, 7), 0u);
  EXPECT_EQ(table.find(&b, 7), 1u);
  EXPECT_EQ(table.find(&c, 7), tl::graph::not_listed);
  EXPECT_EQ(table.find(&a, 8), tl::graph::not_listed);
}

// Literals of distinct types whose values are one double: a class type, an enum.
struct half_of {
  int n, d;
  constexpr operator double() const { return double(n) / d; }
};
enum class huge : unsigned long long { p = 1ull << 60, q = (1ull << 60) + 1 };

// Equal hashes of distinct types must be as rare as chance: g++ under
// -fsanitize=undefined stops the build at one (it refuses to compare the two keys at
// compile time). Each level of nested<> combines two hashes of the level below, which
// a weak combine step (FNV-1a by words) made collide from 35 levels on.
TEST(Sharing, NodeHashesOfASharedChainAreDistinct) {
  const auto& table = *tl::graph::schedule_table<decltype(nested<200>(tl::var<0>))>;
  ASSERT_EQ(table.size, 3u * 200 + 1);
  std::vector<std::uint64_t> hashes(table.hashes, table.hashes + table.size);
  std::sort(hashes.begin(), hashes.end());
  EXPECT_EQ(std::adjacent_find(hashes.begin(), hashes.end()), hashes.end());
  // Literals: the value's type and all its bits.
  using tl::graph::identity_of;
  EXPECT_NE(identity_of<tl::literal<1>>::hash, identity_of<tl::literal<1.0>>::hash);
  EXPECT_NE(identity_of<tl::literal<0.1>>::hash, identity_of<tl::literal<0.1 + 1e-16>>::hash);
  EXPECT_NE(identity_of<tl::literal<0.0>>::hash, identity_of<tl::literal<-0.0>>::hash);
  EXPECT_NE(identity_of<tl::literal<1.0L>>::hash, identity_of<tl::literal<1.0L + 1e-18L>>::hash);  // one double
  EXPECT_NE((identity_of<tl::literal<half_of{1, 2}>>::hash), (identity_of<tl::literal<half_of{2, 4}>>::hash));
  EXPECT_NE(identity_of<tl::literal<huge::p>>::hash, identity_of<tl::literal<huge::q>>::hash);
}

TEST(RuntimeConstants, SameTypeDifferentValuesStayDistinct) {
  // (x + 1) and (x + 2) have the same C++ type; they must not be merged.
  const auto f = [](auto x) { return (x + 1.0) * (x + 2.0); };
  const auto [value, gradient] = tl::value_and_grad(f, P1{0.5});
  EXPECT_DOUBLE_EQ(value, 1.5 * 2.5);
  EXPECT_DOUBLE_EQ(gradient[0], 2 * 0.5 + 3);
}

TEST(RuntimeConstants, ParametrizedFunctionsStayDistinct) {
  const auto f = [](auto x) { return tl::leaky_relu_fn(0.1)(x) + tl::leaky_relu_fn(0.3)(x); };
  EXPECT_DOUBLE_EQ(tl::grad(f, P1{-2.0})[0], 0.4);
}

TEST(Literals, CompileTimeConstantsAreShareable) {
  const auto t = tl::var<0> * tl::lit<3>;
  static_assert(tl::is_shareable_v<decltype(t)>);
  const auto f = t * t + tl::lit<0.5>;
  const auto [value, gradient] = tl::value_and_grad(f, P1{2.0});
  EXPECT_DOUBLE_EQ(value, 36.5);
  EXPECT_DOUBLE_EQ(gradient[0], 2 * 9 * 2.0);
}

TEST(Gradient, UnusedVariablesGetZero) {
  const auto g = tl::grad([](auto x, auto, auto z) { return x * z; }, std::array{2.0, 5.0, 3.0});
  EXPECT_EQ(g, (std::array{3.0, 0.0, 2.0}));
}

TEST(Gradient, WorksInFloat) {
  const auto [value, gradient] = tl::value_and_grad([](auto x) { return tl::gelu(x); }, std::array{0.5f});
  EXPECT_NEAR(value, 0.3457140, 1e-6);
  EXPECT_NEAR(gradient[0], 0.8673699, 1e-6);
}

TEST(Jacobian, MatchesAnalytic) {
  const auto J = tl::jacobian([](auto x, auto y) { return std::tuple{x * y, tl::exp(x) + y, tl::sin(y)}; },
                              std::array{0.3, 1.2});
  const std::array<std::array<double, 2>, 3> expected{{{1.2, 0.3}, {std::exp(0.3), 1.0}, {0.0, std::cos(1.2)}}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) EXPECT_NEAR(J[i][j], expected[i][j], 1e-14) << i << "," << j;
  // The same outputs as an expression array (tl::make_array; it did not compile).
  const auto A = tl::jacobian([](auto x, auto y) { return tl::make_array(x * y, tl::exp(x) + y, tl::sin(y)); },
                              std::array{0.3, 1.2});
  EXPECT_EQ(A, J);
}

TEST(Hessian, MatchesAnalytic) {
  // f = x^2 y + sin(x y): H = [[2y - y^2 s, 2x + c - x y s], [.., -x^2 s]]
  const double x = 0.4, y = -0.9, s = std::sin(x * y), c = std::cos(x * y);
  const auto H = tl::hessian([](auto a, auto b) { return a * a * b + tl::sin(a * b); }, std::array{x, y});
  EXPECT_NEAR(H[0][0], 2 * y - y * y * s, 1e-14);
  EXPECT_NEAR(H[0][1], 2 * x + c - x * y * s, 1e-14);
  EXPECT_NEAR(H[1][0], 2 * x + c - x * y * s, 1e-14);
  EXPECT_NEAR(H[1][1], -x * x * s, 1e-14);
}

}  // namespace
