// NIST StRD nonlinear regression (tests/data/nist, README there): every problem from
// both of NIST's starting points, Levenberg-Marquardt with default options, float64.
// Checked: parameters and residual sum of squares to 6+ significant digits against the
// certified values (NIST's log relative error, LRE); the standard errors are reported.
// A table of all runs is printed at the end (the numbers quoted in docs and reports).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>
#include <vector>

#include "../support/nist.hpp"
#include "tapeless/cpu/least_squares.hpp"
#include "tapeless/lsq/accumulate.hpp"
#include "tapeless/nn/expression_model.hpp"

namespace {

namespace nist = tl_test::nist;
constexpr double pi = std::numbers::pi;

struct table_row {
  std::string problem, difficulty, start, reason;
  bool converged = false;
  std::size_t iterations = 0, refinement_steps = 0;
  double lre_parameters = 0, lre_rss = 0, lre_std_errors = 0;
  double fused_lre_parameters = 0, fused_lre_rss = 0;  // through tl::least_squares on an expression model
};
std::vector<table_row>& table() {
  static std::vector<table_row> rows;
  return rows;
}

// Prints the table once every test has run (whatever the filter or order).
struct print_table : ::testing::Environment {
  void TearDown() override {
    if (table().empty()) return;
    std::printf("\n%-9s %-8s %-6s %-5s %5s %6s %9s %8s %9s %9s %9s  %s\n", "problem", "level", "start", "conv", "iter",
                "refine", "LRE(par)", "LRE(RSS)", "LRE(se)", "fused par", "fused RSS", "stop reason");
    for (const auto& r : table()) {
      if (r.reason.rfind("skipped", 0) == 0) {
        std::printf("%-9s %-8s %-6s %s\n", r.problem.c_str(), r.difficulty.c_str(), r.start.c_str(), r.reason.c_str());
        continue;
      }
      std::printf("%-9s %-8s %-6s %-5s %5zu %6zu %9.1f %8.1f %9.1f %9.1f %9.1f  %s\n", r.problem.c_str(),
                  r.difficulty.c_str(), r.start.c_str(), r.converged ? "yes" : "no", r.iterations, r.refinement_steps,
                  r.lre_parameters, r.lre_rss, r.lre_std_errors, r.fused_lre_parameters, r.fused_lre_rss,
                  r.reason.c_str());
    }
    std::printf("LRE: digits agreeing with NIST's certified value (at most 11); par, se: the worst parameter,\n"
                "standard error. iter: trial steps; refine: Gauss-Newton refinement steps after convergence.\n"
                "fused: the same problem as a tl::expression_model fitted by tl::least_squares (the fused pass).\n"
                "BoxBOD*: options.initial_step_bound = 1 (MINPACK's factor; the default is 100).\n");
  }
};
[[maybe_unused]] const auto* const environment = ::testing::AddGlobalTestEnvironment(new print_table);

enum class expect { both_starts, start2_only };

struct settings {
  expect converges = expect::both_starts;
  double min_lre = 6;             // parameters
  double min_rss_lre = 6;         // residual sum of squares
  double min_std_error_lre = 6;   // standard errors
  bool log_response = false;      // Nelson: the model is for log(y)
  tl::lsq::options solver = {};   // defaults unless a test says otherwise
  const char* label = nullptr;    // the table's name for the run, if not the problem's
};

// The scalar lambda f(b1..bP, x1..xI) as an expression model (p, x arrays).
template <std::size_t P, std::size_t I, class F>
auto as_expression_model(const F& f, const std::array<double, P>& start) {
  return tl::expression_model<P, I>(
      [f](const auto& p, const auto& x) {
        return [&]<std::size_t... J, std::size_t... K>(std::index_sequence<J...>, std::index_sequence<K...>) {
          return f(p[tl::idx<J>]..., x[tl::idx<K>]...);
        }(std::make_index_sequence<P>{}, std::make_index_sequence<I>{});
      },
      start);
}

template <std::size_t P, std::size_t I, class F>
void check(const std::string& name, const F& model, settings s = {}) {
  const nist::problem prob = nist::read(name);
  ASSERT_EQ(prob.parameters, P) << name;
  ASSERT_EQ(prob.predictors, I) << name;
  std::vector<double> y = prob.y;
  if (s.log_response) std::transform(y.begin(), y.end(), y.begin(), [](double v) { return std::log(v); });

  for (int start = 1; start <= 2; ++start) {
    SCOPED_TRACE(name + ", start " + std::to_string(start));
    const std::vector<double>& from = start == 1 ? prob.start1 : prob.start2;
    std::array<double, P> p0;
    std::copy(from.begin(), from.end(), p0.begin());
    const auto fit = tl::lsq::fit<P, I>(model, p0, prob.x, y, {}, s.solver);

    table_row row{s.label ? s.label : name, prob.difficulty, std::to_string(start), to_string(fit.reason),
                  fit.converged(), fit.iterations, fit.refinement_steps, 11, 11, 11};
    for (std::size_t j = 0; j < P; ++j) {
      row.lre_parameters = std::min(row.lre_parameters, nist::log_relative_error(fit.parameters[j], prob.certified[j]));
      row.lre_std_errors =
          std::min(row.lre_std_errors, nist::log_relative_error(fit.standard_errors[j], prob.certified_std_dev[j]));
    }
    row.lre_rss = nist::log_relative_error(fit.residual_sum_of_squares, prob.certified_rss);

    const auto fused_model = as_expression_model<P, I>(model, p0);
    using Fused = std::remove_cvref_t<decltype(fused_model)>;
    const std::size_t n = y.size();
    tl::basic_matrix<double> xm(I, n, prob.x), ym(1, n, y);
    tl::rng unused(0);
    auto params = tl::init<double>(fused_model, unused);  // the start values
    const auto fused = tl::least_squares(fused_model, params, xm, ym, s.solver);
    static_assert(Fused::parameter_count == P);
    row.fused_lre_parameters = 11;
    for (std::size_t j = 0; j < P; ++j)
      row.fused_lre_parameters =
          std::min(row.fused_lre_parameters, nist::log_relative_error(fused.parameters[j], prob.certified[j]));
    row.fused_lre_rss = nist::log_relative_error(fused.residual_sum_of_squares, prob.certified_rss);
    table().push_back(row);

    const bool expected = s.converges == expect::both_starts || (s.converges == expect::start2_only && start == 2);
    if (!expected) continue;
    EXPECT_TRUE(fit.converged()) << to_string(fit.reason);
    EXPECT_GE(row.lre_parameters, s.min_lre);
    EXPECT_GE(row.lre_rss, s.min_rss_lre);
    EXPECT_GE(row.lre_std_errors, s.min_std_error_lre);
    EXPECT_TRUE(fused.converged()) << "fused: " << to_string(fused.reason);
    EXPECT_GE(row.fused_lre_parameters, s.min_lre) << "fused";
    EXPECT_GE(row.fused_lre_rss, s.min_rss_lre) << "fused";
  }
}


// ---- lower difficulty ----------------------------------------------------------------
TEST(NistLower, Misra1a) {
  check<2, 1>("Misra1a", [](auto b1, auto b2, auto x) { return b1 * (1.0 - tl::exp(-b2 * x)); });
}
TEST(NistLower, Chwirut2) {
  check<3, 1>("Chwirut2", [](auto b1, auto b2, auto b3, auto x) { return tl::exp(-b1 * x) / (b2 + b3 * x); });
}
TEST(NistLower, Chwirut1) {
  check<3, 1>("Chwirut1", [](auto b1, auto b2, auto b3, auto x) { return tl::exp(-b1 * x) / (b2 + b3 * x); });
}
auto lanczos = [](auto b1, auto b2, auto b3, auto b4, auto b5, auto b6, auto x) {
  return b1 * tl::exp(-b2 * x) + b3 * tl::exp(-b4 * x) + b5 * tl::exp(-b6 * x);
};
TEST(NistLower, Lanczos3) { check<6, 1>("Lanczos3", lanczos); }
auto gauss = [](auto b1, auto b2, auto b3, auto b4, auto b5, auto b6, auto b7, auto b8, auto x) {
  return b1 * tl::exp(-b2 * x) + b3 * tl::exp(-tl::square(x - b4) / tl::square(b5)) +
         b6 * tl::exp(-tl::square(x - b7) / tl::square(b8));
};
TEST(NistLower, Gauss1) { check<8, 1>("Gauss1", gauss); }
TEST(NistLower, Gauss2) { check<8, 1>("Gauss2", gauss); }
// b1 x^b2 with a parameter exponent: exp(b2 log x) (x > 0 in the data).
TEST(NistLower, DanWood) {
  check<2, 1>("DanWood", [](auto b1, auto b2, auto x) { return b1 * tl::exp(b2 * tl::log(x)); });
}
TEST(NistLower, Misra1b) {
  check<2, 1>("Misra1b", [](auto b1, auto b2, auto x) { return b1 * (1.0 - tl::pow(1.0 + b2 * x / 2.0, -2.0)); });
}

// ---- average difficulty --------------------------------------------------------------
TEST(NistAverage, Kirby2) {
  check<5, 1>("Kirby2", [](auto b1, auto b2, auto b3, auto b4, auto b5, auto x) {
    return (b1 + b2 * x + b3 * x * x) / (1.0 + b4 * x + b5 * x * x);
  });
}
auto cubic_over_cubic = [](auto b1, auto b2, auto b3, auto b4, auto b5, auto b6, auto b7, auto x) {
  return (b1 + b2 * x + b3 * x * x + b4 * x * x * x) / (1.0 + b5 * x + b6 * x * x + b7 * x * x * x);
};
TEST(NistAverage, Hahn1) { check<7, 1>("Hahn1", cubic_over_cubic); }
TEST(NistAverage, Nelson) {
  check<3, 2>("Nelson", [](auto b1, auto b2, auto b3, auto x1, auto x2) { return b1 - b2 * x1 * tl::exp(-b3 * x2); },
              {.log_response = true});
}
TEST(NistAverage, MGH17) {
  check<5, 1>("MGH17", [](auto b1, auto b2, auto b3, auto b4, auto b5, auto x) {
    return b1 + b2 * tl::exp(-x * b4) + b3 * tl::exp(-x * b5);
  });
}
// Lanczos1's data were generated from round parameters and printed to 13 digits; its
// certified RSS, 1.4e-25, is the data's own rounding: residuals of ~8e-14 on values up
// to 2.5. Reading y into a double (up to 2.8e-16 off) and evaluating the model in double
// each change a residual by ~1e-3 of itself, so in float64 the RSS has ~3 correct
// digits, and the standard errors (which scale with sqrt(RSS)) as many. The parameters
// are unaffected (10+ digits).
TEST(NistAverage, Lanczos1) { check<6, 1>("Lanczos1", lanczos, {.min_rss_lre = 2, .min_std_error_lre = 2}); }
TEST(NistAverage, Lanczos2) { check<6, 1>("Lanczos2", lanczos); }
TEST(NistAverage, Gauss3) { check<8, 1>("Gauss3", gauss); }
TEST(NistAverage, Misra1c) {
  check<2, 1>("Misra1c", [](auto b1, auto b2, auto x) { return b1 * (1.0 - tl::pow(1.0 + 2.0 * b2 * x, -0.5)); });
}
TEST(NistAverage, Misra1d) {
  check<2, 1>("Misra1d", [](auto b1, auto b2, auto x) { return b1 * b2 * x / (1.0 + b2 * x); });
}
// y = b1 - b2 x - arctan(b3 / (x - b4)) / pi.
// NIST's certified b1 takes arctan in (0, pi) here: every x is below b4, so b3 / (x - b4)
// < 0, and NIST's value is atan2(b3, x - b4) = atan(b3 / (x - b4)) + pi. With atan's
// principal branch the fit gives b1 - 1 (checked with a test-local atan: both starts
// converge, RSS and standard errors to 11 digits, b1 off by exactly 1), hence the "+ 1".
TEST(NistAverage, Roszman1) {
  check<4, 1>("Roszman1", [](auto b1, auto b2, auto b3, auto b4, auto x) {
    return b1 - b2 * x - (tl::atan(b3 / (x - b4)) / pi + 1.0);
  });
}
TEST(NistAverage, ENSO) {
  check<9, 1>("ENSO", [](auto b1, auto b2, auto b3, auto b4, auto b5, auto b6, auto b7, auto b8, auto b9, auto x) {
    const auto annual = 2.0 * pi * x / 12.0;
    return b1 + b2 * tl::cos(annual) + b3 * tl::sin(annual) + b5 * tl::cos(2.0 * pi * x / b4) +
           b6 * tl::sin(2.0 * pi * x / b4) + b8 * tl::cos(2.0 * pi * x / b7) + b9 * tl::sin(2.0 * pi * x / b7);
  });
}

// ---- higher difficulty ---------------------------------------------------------------
TEST(NistHigher, MGH09) {
  check<4, 1>("MGH09", [](auto b1, auto b2, auto b3, auto b4, auto x) {
    return b1 * (x * x + x * b2) / (x * x + x * b3 + b4);
  });
}
TEST(NistHigher, Thurber) { check<7, 1>("Thurber", cubic_over_cubic); }
// From start 1 (b1 = 1, b2 = 1) the first step is the Gauss-Newton one: it fits inside
// the initial region (100 ||D p0||) and lowers the cost, and lands at b2 = 111 where
// exp(-b2 x) underflows against 1 for every x: the model is the constant b1, dr/db2 is
// ~1e-46, and the solver stops at that plateau (b1 = mean(y)), a stationary point to
// double precision but not the minimum (its b2 standard error is ~1e46). With MINPACK's
// smaller initial bound, factor 1, it converges (BoxBOD* in the table).
auto box_bod = [](auto b1, auto b2, auto x) { return b1 * (1.0 - tl::exp(-b2 * x)); };
TEST(NistHigher, BoxBOD) { check<2, 1>("BoxBOD", box_bod, {.converges = expect::start2_only}); }
TEST(NistHigher, BoxBODSmallInitialStepBound) {
  check<2, 1>("BoxBOD", box_bod, {.solver = {.initial_step_bound = 1}, .label = "BoxBOD*"});
}
TEST(NistHigher, Rat42) {
  check<3, 1>("Rat42", [](auto b1, auto b2, auto b3, auto x) { return b1 / (1.0 + tl::exp(b2 - b3 * x)); });
}
TEST(NistHigher, MGH10) {
  check<3, 1>("MGH10", [](auto b1, auto b2, auto b3, auto x) { return b1 * tl::exp(b2 / (x + b3)); });
}
TEST(NistHigher, Eckerle4) {
  check<3, 1>("Eckerle4", [](auto b1, auto b2, auto b3, auto x) {
    return (b1 / b2) * tl::exp(-0.5 * tl::square((x - b3) / b2));
  });
}
// b1 / (1 + exp(b2 - b3 x))^(1/b4) = b1 exp(-log(1 + exp(b2 - b3 x)) / b4).
TEST(NistHigher, Rat43) {
  check<4, 1>("Rat43", [](auto b1, auto b2, auto b3, auto b4, auto x) {
    return b1 * tl::exp(-tl::log(1.0 + tl::exp(b2 - b3 * x)) / b4);
  });
}
// b1 (b2 + x)^(-1/b3) = b1 exp(-log(b2 + x) / b3).
TEST(NistHigher, Bennett5) {
  check<3, 1>("Bennett5", [](auto b1, auto b2, auto b3, auto x) { return b1 * tl::exp(-tl::log(b2 + x) / b3); });
}

}  // namespace
