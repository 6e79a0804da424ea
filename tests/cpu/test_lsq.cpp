// The least-squares solver (tapeless/lsq): closed-form linear regression, Rosenbrock,
// bad input, a singular J^T J, Gauss-Newton, and the reference evaluator. The NIST
// reference problems are in test_nist.cpp.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "tapeless/lsq/accumulate.hpp"
#include "tapeless/lsq/solver.hpp"

namespace {

using tl::lsq::stop_reason;

// y = 1.5 + 0.25 x + deterministic "noise".
struct line_data {
  std::vector<double> x, y;
  line_data() {
    for (int i = 0; i < 20; ++i) {
      x.push_back(0.5 * i);
      y.push_back(1.5 + 0.25 * x.back() + 0.1 * std::sin(3.7 * i));
    }
  }
};

auto line = [](auto a, auto b, auto x) { return a + b * x; };

// Ordinary least squares for a straight line, textbook formulas.
struct line_fit {
  double intercept, slope, rss, se_intercept, se_slope, cov;
  explicit line_fit(const line_data& d) {
    const double n = double(d.x.size());
    double mx = 0, my = 0;
    for (std::size_t i = 0; i < d.x.size(); ++i) mx += d.x[i] / n, my += d.y[i] / n;
    double sxx = 0, sxy = 0;
    for (std::size_t i = 0; i < d.x.size(); ++i) {
      sxx += (d.x[i] - mx) * (d.x[i] - mx);
      sxy += (d.x[i] - mx) * (d.y[i] - my);
    }
    slope = sxy / sxx;
    intercept = my - slope * mx;
    rss = 0;
    for (std::size_t i = 0; i < d.x.size(); ++i) rss += std::pow(d.y[i] - intercept - slope * d.x[i], 2);
    const double s2 = rss / (n - 2);
    se_slope = std::sqrt(s2 / sxx);
    se_intercept = std::sqrt(s2 * (1 / n + mx * mx / sxx));
    cov = -mx * s2 / sxx;
  }
};

void expect_relative(double actual, double expected, double tolerance, const char* what) {
  EXPECT_LE(std::abs(actual - expected), tolerance * std::abs(expected))
      << what << ": " << actual << " vs " << expected;
}

TEST(LeastSquares, LinearProblemMatchesClosedForm) {
  const line_data d;
  const line_fit exact(d);
  for (auto algorithm : {tl::lsq::method::levenberg_marquardt, tl::lsq::method::gauss_newton}) {
    tl::lsq::options opt;
    opt.algorithm = algorithm;
    const auto fit = tl::lsq::fit<2, 1>(line, {10.0, -3.0}, d.x, d.y, {}, opt);
    SCOPED_TRACE(to_string(fit.reason));
    EXPECT_TRUE(fit.converged());
    expect_relative(fit.parameters[0], exact.intercept, 1e-12, "intercept");
    expect_relative(fit.parameters[1], exact.slope, 1e-12, "slope");
    expect_relative(fit.residual_sum_of_squares, exact.rss, 1e-10, "RSS");
    expect_relative(fit.cost, exact.rss / 2, 1e-10, "cost");
    expect_relative(fit.standard_errors[0], exact.se_intercept, 1e-10, "se(intercept)");
    expect_relative(fit.standard_errors[1], exact.se_slope, 1e-10, "se(slope)");
    expect_relative(fit.covariance[1], exact.cov, 1e-10, "cov");
    expect_relative(fit.covariance[2], exact.cov, 1e-10, "cov (symmetric)");
    EXPECT_EQ(fit.residuals, d.x.size());
    EXPECT_EQ(fit.rank, 2u);
    EXPECT_FALSE(fit.rank_deficient);
  }
}

// Weights multiply residuals: weight w on every sample is the unweighted fit, with the
// cost scaled by w^2 and the same standard errors (s^2 scales by w^2, J^T J by w^2).
TEST(LeastSquares, WeightsMultiplyResiduals) {
  const line_data d;
  const line_fit exact(d);
  const std::vector<double> w(d.x.size(), 3.0);
  const auto fit = tl::lsq::fit<2, 1>(line, {0.0, 0.0}, d.x, d.y, w);
  expect_relative(fit.parameters[1], exact.slope, 1e-12, "slope");
  expect_relative(fit.residual_sum_of_squares, 9 * exact.rss, 1e-10, "RSS");
  expect_relative(fit.standard_errors[1], exact.se_slope, 1e-10, "se(slope)");
  // A zero weight removes the sample, also from n.
  std::vector<double> w0(d.x.size(), 1.0);
  w0[3] = 0;
  line_data fewer = d;
  fewer.x.erase(fewer.x.begin() + 3);
  fewer.y.erase(fewer.y.begin() + 3);
  const auto dropped = tl::lsq::fit<2, 1>(line, {0.0, 0.0}, d.x, d.y, w0);
  const line_fit expected(fewer);
  EXPECT_EQ(dropped.residuals, fewer.x.size());
  expect_relative(dropped.standard_errors[1], expected.se_slope, 1e-10, "se(slope), one sample weighted 0");
}

// Rosenbrock as residuals r = (10 (p2 - p1^2), 1 - p1), with a hand-written evaluate:
// the solver needs nothing but the normal equations.
void rosenbrock(const std::array<double, 2>& p, tl::lsq::normal_equations<2>& out, bool need_jacobian) {
  const std::array<double, 2> r{10 * (p[1] - p[0] * p[0]), 1 - p[0]};
  const std::array<std::array<double, 2>, 2> j{{{-20 * p[0], 10}, {-1, 0}}};
  out.cost = 0.5 * (r[0] * r[0] + r[1] * r[1]);
  out.residuals = 2;
  if (!need_jacobian) return;
  for (int a = 0; a < 2; ++a) {
    out.jtr[a] = j[0][a] * r[0] + j[1][a] * r[1];
    for (int b = 0; b < 2; ++b) out.jtj[a * 2 + b] = j[0][a] * j[0][b] + j[1][a] * j[1][b];
  }
}

TEST(LeastSquares, RosenbrockConverges) {
  for (auto algorithm : {tl::lsq::method::levenberg_marquardt, tl::lsq::method::gauss_newton}) {
    tl::lsq::options opt;
    opt.algorithm = algorithm;
    const auto fit = tl::lsq::solve(rosenbrock, std::array{-1.2, 1.0}, opt);
    SCOPED_TRACE(to_string(fit.reason));
    EXPECT_TRUE(fit.converged());
    EXPECT_NEAR(fit.parameters[0], 1.0, 1e-10);
    EXPECT_NEAR(fit.parameters[1], 1.0, 1e-10);
    EXPECT_LT(fit.cost, 1e-20);
    EXPECT_LT(fit.iterations, 100u);
  }
}

// Exponential decay, exact data: the easy problem for Gauss-Newton.
struct decay_data {
  std::vector<double> x, y;
  decay_data() {
    for (int i = 0; i < 30; ++i) {
      x.push_back(0.2 * i);
      y.push_back(2.0 * std::exp(-0.7 * x.back()) + 0.01 * std::cos(5.0 * i));
    }
  }
};
auto decay = [](auto b1, auto b2, auto x) { return b1 * tl::exp(-b2 * x); };

TEST(LeastSquares, GaussNewtonConvergesOnEasyProblem) {
  const decay_data d;
  tl::lsq::options gn;
  gn.algorithm = tl::lsq::method::gauss_newton;
  const auto g = tl::lsq::fit<2, 1>(decay, {1.5, 0.5}, d.x, d.y, {}, gn);
  const auto lm = tl::lsq::fit<2, 1>(decay, {1.5, 0.5}, d.x, d.y);
  EXPECT_TRUE(g.converged()) << to_string(g.reason);
  EXPECT_TRUE(lm.converged()) << to_string(lm.reason);
  for (int j = 0; j < 2; ++j) expect_relative(g.parameters[j], lm.parameters[j], 1e-10, "GN vs LM");
  EXPECT_NEAR(g.parameters[0], 2.0, 0.05);
  EXPECT_NEAR(g.parameters[1], 0.7, 0.05);
  EXPECT_LT(g.iterations, 20u);
}

TEST(LeastSquares, CostOnlyTrialPointsGiveTheSameFit) {
  const decay_data d;
  tl::lsq::options opt;
  opt.refinement_steps = 0;  // the evaluation counts below are lmder's alone
  const auto b = tl::lsq::fit<2, 1>(decay, {1.0, 0.1}, d.x, d.y, {}, opt);
  opt.jacobian_at_trial_points = false;
  const auto a = tl::lsq::fit<2, 1>(decay, {1.0, 0.1}, d.x, d.y, {}, opt);
  EXPECT_TRUE(a.converged());
  for (int j = 0; j < 2; ++j) EXPECT_EQ(a.parameters[j], b.parameters[j]);
  EXPECT_EQ(a.jacobian_evaluations, 1 + a.accepted_steps);
  EXPECT_EQ(a.function_evaluations, 1 + a.iterations + a.accepted_steps);
  EXPECT_EQ(b.jacobian_evaluations, b.function_evaluations);
  EXPECT_EQ(b.function_evaluations, 1 + b.iterations);
}

TEST(LeastSquares, NanAtStartThrows) {
  const decay_data d;
  auto log_model = [](auto b1, auto b2, auto x) { return tl::log(b1 * x) + b2; };
  try {
    tl::lsq::fit<2, 1>(log_model, {-1.0, 0.0}, d.x, d.y);
    FAIL() << "expected tl::numeric_error";
  } catch (const tl::numeric_error& e) {
    EXPECT_NE(std::string(e.what()).find("starting point"), std::string::npos) << e.what();
  }
  EXPECT_THROW((tl::lsq::fit<2, 1>(decay, {std::nan(""), 0.0}, d.x, d.y)), tl::numeric_error);
}

// NaN at trial points: the evaluation returns NaN for the 2nd to 4th calls. Each is a
// failed step (the region shrinks); the fit then carries on to the same answer.
TEST(LeastSquares, NonFiniteTrialPointIsAFailedStep) {
  const decay_data d;
  const auto clean = tl::lsq::fit<2, 1>(decay, {1.0, 0.1}, d.x, d.y);
  int calls = 0;
  auto inner = tl::lsq::make_sample_evaluator<2, 1>(decay, d.x, d.y);
  auto flaky = [&](const std::array<double, 2>& p, tl::lsq::normal_equations<2>& out, bool need_jacobian) {
    inner(p, out, need_jacobian);
    if (++calls >= 2 && calls <= 4) out.cost = std::numeric_limits<double>::quiet_NaN();
  };
  const auto fit = tl::lsq::solve(flaky, std::array{1.0, 0.1});
  EXPECT_TRUE(fit.converged()) << to_string(fit.reason);
  EXPECT_GE(fit.iterations, clean.iterations + 3);
  for (int j = 0; j < 2; ++j) expect_relative(fit.parameters[j], clean.parameters[j], 1e-9, "with NaN trials");
}

// Every trial point NaN: the region collapses and the reason says why.
TEST(LeastSquares, AlwaysNonFiniteTrialsStop) {
  const decay_data d;
  int calls = 0;
  auto inner = tl::lsq::make_sample_evaluator<2, 1>(decay, d.x, d.y);
  auto broken = [&](const std::array<double, 2>& p, tl::lsq::normal_equations<2>& out, bool need_jacobian) {
    inner(p, out, need_jacobian);
    if (++calls >= 2) out.cost = std::numeric_limits<double>::infinity();
  };
  const auto fit = tl::lsq::solve(broken, std::array{1.0, 0.1});
  EXPECT_EQ(fit.reason, stop_reason::non_finite) << to_string(fit.reason);
  EXPECT_FALSE(fit.converged());
  EXPECT_EQ(fit.parameters[0], 1.0);
  EXPECT_EQ(fit.accepted_steps, 0u);
}

// b3 does not enter the model: J^T J is singular from the start. Documented outcome: the
// fit converges for b1, b2 (as if b3 were absent), b3 stays where it started, rank 2,
// and b3's standard error is infinite while the others' are the 2-parameter ones.
TEST(LeastSquares, ParameterNotInModelIsReported) {
  const decay_data d;
  auto unused = [](auto b1, auto b2, auto /*b3*/, auto x) { return b1 * tl::exp(-b2 * x); };
  const auto two = tl::lsq::fit<2, 1>(decay, {1.0, 0.1}, d.x, d.y);
  for (auto algorithm : {tl::lsq::method::levenberg_marquardt, tl::lsq::method::gauss_newton}) {
    tl::lsq::options opt;
    opt.algorithm = algorithm;
    const auto three = tl::lsq::fit<3, 1>(unused, {1.0, 0.1, 42.0}, d.x, d.y, {}, opt);
    EXPECT_TRUE(three.converged()) << to_string(three.reason);
    EXPECT_TRUE(three.rank_deficient);
    EXPECT_EQ(three.rank, 2u);
    EXPECT_EQ(three.parameters[2], 42.0);
    for (int j = 0; j < 2; ++j) expect_relative(three.parameters[j], two.parameters[j], 1e-9, "identified parameter");
    EXPECT_TRUE(std::isinf(three.standard_errors[2]));
    EXPECT_TRUE(std::isnan(three.covariance[0 * 3 + 2]));
    // The identified block: n - P counts b3 (n - 3 instead of n - 2).
    const double dof = (double(d.x.size()) - 2) / (double(d.x.size()) - 3);
    for (int j = 0; j < 2; ++j)
      expect_relative(three.standard_errors[j], two.standard_errors[j] * std::sqrt(dof), 1e-6, "std error");
  }
}

// b1 and b2 enter only as their product: J's columns are proportional everywhere. The
// product is determined (the slope of a line through the origin), neither factor is.
TEST(LeastSquares, ParametersOnlyAsProductAreUndetermined) {
  const line_data d;
  auto product = [](auto b1, auto b2, auto x) { return b1 * b2 * x; };
  const auto fit = tl::lsq::fit<2, 1>(product, {2.0, 0.5}, d.x, d.y);
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < d.x.size(); ++i) sxy += d.x[i] * d.y[i], sxx += d.x[i] * d.x[i];
  EXPECT_TRUE(fit.converged()) << to_string(fit.reason);
  expect_relative(fit.parameters[0] * fit.parameters[1], sxy / sxx, 1e-10, "b1 b2");
  EXPECT_EQ(fit.rank, 1u);
  EXPECT_TRUE(fit.rank_deficient);
  EXPECT_TRUE(std::isinf(fit.standard_errors[0]) && std::isinf(fit.standard_errors[1]));
}

TEST(LeastSquares, GradientToleranceStops) {
  const decay_data d;
  tl::lsq::options opt;
  opt.gtol = 1e-3;
  opt.refinement_steps = 0;
  const auto fit = tl::lsq::fit<2, 1>(decay, {1.0, 0.1}, d.x, d.y, {}, opt);
  EXPECT_EQ(fit.reason, stop_reason::gradient) << to_string(fit.reason);
  EXPECT_TRUE(fit.converged());
}

TEST(LeastSquares, NoParameterInModelIsSingular) {
  const decay_data d;
  auto constant = [](auto, auto, auto x) { return 2.0 * x; };
  const auto fit = tl::lsq::fit<2, 1>(constant, {1.0, 1.0}, d.x, d.y);
  EXPECT_EQ(fit.reason, stop_reason::singular);
  EXPECT_FALSE(fit.converged());
  EXPECT_EQ(fit.rank, 0u);
  EXPECT_TRUE(std::isinf(fit.standard_errors[0]) && std::isinf(fit.standard_errors[1]));
}

TEST(LeastSquares, ReferenceEvaluatorSums) {
  const decay_data d;
  const std::array p{1.9, 0.6};
  const auto ne = tl::lsq::accumulate_normal_equations<2, 1>(decay, p, d.x, d.y);
  double cost = 0;
  std::array<double, 2> g{};
  std::array<double, 4> a{};
  for (std::size_t i = 0; i < d.x.size(); ++i) {
    const double e = std::exp(-p[1] * d.x[i]);
    const double r = p[0] * e - d.y[i];
    const std::array<double, 2> j{e, -p[0] * d.x[i] * e};
    cost += 0.5 * r * r;
    for (int u = 0; u < 2; ++u) {
      g[u] += j[u] * r;
      for (int v = 0; v < 2; ++v) a[u * 2 + v] += j[u] * j[v];
    }
  }
  EXPECT_EQ(ne.residuals, d.x.size());
  expect_relative(ne.cost, cost, 1e-13, "cost");
  for (int u = 0; u < 2; ++u) expect_relative(ne.jtr[u], g[u], 1e-12, "J^T r");
  for (int k = 0; k < 4; ++k) expect_relative(ne.jtj[k], a[k], 1e-13, "J^T J");
  EXPECT_EQ(ne.jtj[1], ne.jtj[2]);
  EXPECT_THROW((tl::lsq::accumulate_normal_equations<2, 1>(decay, p, std::span(d.x).first(3), d.y)), tl::shape_error);
  const std::vector<double> short_weights(2, 1.0);
  EXPECT_THROW((tl::lsq::accumulate_normal_equations<2, 1>(decay, p, d.x, d.y, short_weights)), tl::shape_error);
}

TEST(LeastSquares, StopReasonsHaveDistinctNames) {
  std::set<std::string> names;
  for (auto r : {stop_reason::relative_reduction, stop_reason::step_size, stop_reason::gradient,
                 stop_reason::machine_precision, stop_reason::max_iterations, stop_reason::singular,
                 stop_reason::non_finite}) {
    names.insert(to_string(r));
  }
  EXPECT_EQ(names.size(), 7u);
}

TEST(LeastSquares, MaxIterations) {
  const decay_data d;
  tl::lsq::options opt;
  opt.max_iterations = 2;
  const auto fit = tl::lsq::fit<2, 1>(decay, {1.0, 0.1}, d.x, d.y, {}, opt);
  EXPECT_EQ(fit.reason, stop_reason::max_iterations);
  EXPECT_EQ(fit.iterations, 2u);
  EXPECT_LT(fit.cost, fit.initial_cost);
  opt.max_iterations = 0;  // once reported 1 iteration
  EXPECT_THROW((tl::lsq::fit<2, 1>(decay, {1.0, 0.1}, d.x, d.y, {}, opt)), std::invalid_argument);
}

}  // namespace
