// The training API and the seed fit end to end, against a float64 run of the same
// algorithm (forward, MSE, backward, Adam) written plainly here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "../../examples/seed_fit.hpp"
#include "tapeless/train/progress.hpp"
#include "../support/expect_failure.hpp"
#include "../support/seed_reference.hpp"

namespace {


double seed_fit_float64(std::vector<double> p, const tl::matrix& xs, const tl::matrix& ys, int epochs) {
  return tl_test::seed_fit_float64(std::move(p), {xs.values().begin(), xs.values().end()},
                                   {ys.values().begin(), ys.values().end()}, epochs)
      .final_loss;
}

TEST(SeedFit, FinalLossWithinTwoPercentOfFloat64AndBelowTarget) {
  const auto data = seed_fit::make_data();
  const auto params = seed_fit::initial_parameters();
  tl::train_state state(seed_fit::make_model(), params, tl::adam{seed_fit::learning_rate});
  const auto run = tl::fit(state, tl::mse, data.x, data.y, seed_fit::epochs, {.progress = false});
  ASSERT_EQ(run.loss_history.size(), seed_fit::epochs);
  EXPECT_EQ(state.step, long(seed_fit::epochs));
  const float final_loss = tl::value_and_grad(tl::mse, state.model, state.params, data.x, data.y).loss;
  const auto flat = tl::flat(params);
  const double reference = seed_fit_float64({flat.begin(), flat.end()}, data.x, data.y, int(seed_fit::epochs));
  EXPECT_LT(std::abs(final_loss - reference) / reference, 0.02) << final_loss << " vs float64 " << reference;
  EXPECT_LT(final_loss, 0.05f);
  EXPECT_LT(run.loss_history.back(), run.loss_history.front() / 10);
}

TEST(TrainStep, ReturnsLossBeforeTheUpdateAndMovesParameters) {
  const auto data = seed_fit::make_data();
  tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::sgd{0.01f});
  const auto before = state.params;
  const auto expected = tl::value_and_grad(tl::mse, state.model, before, data.x, data.y);
  EXPECT_EQ(tl::train_step(state, tl::mse, data.x, data.y), expected.loss);
  for (std::size_t k = 0; k < before.size; ++k)
    EXPECT_FLOAT_EQ(state.params.flat()[k], before.flat()[k] - 0.01f * expected.gradient.flat()[k]);
}

TEST(TrainStep, NonFiniteLossThrowsAndLeavesStateUnchanged) {
  auto data = seed_fit::make_data();
  data.y(0, 5) = std::numeric_limits<float>::quiet_NaN();
  tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  const auto before = state.params;
  try {
    tl::train_step(state, tl::mse, data.x, data.y);
    FAIL() << "no exception";
  } catch (const tl::numeric_error& e) {
    EXPECT_NE(std::string(e.what()).find("NaN at step 1 (y holds NaN at feature 0 of sample 5)"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(state.params, before);
  EXPECT_EQ(state.step, 0);
}

// An Inf in one input: tanh saturates, so the loss stays finite, but the first
// layer's weight gradient is 0 * Inf = NaN. The step must not be applied.
TEST(TrainStep, InfiniteInputGivesNonFiniteGradientAndChangesNothing) {
  const auto model = tl::chain(tl::dense<1, 8>(tl::tanh), tl::dense<8, 1>());
  tl::rng gen(3);
  auto data = seed_fit::make_data();
  data.x(0, 7) = std::numeric_limits<float>::infinity();
  tl::train_state state(model, tl::init(model, gen), tl::adam{0.01f});
  const auto before = state.params;
  const auto moments = state.optimizer_state;
  EXPECT_TRUE(std::isfinite(tl::value_and_grad(tl::mse, model, before, data.x, data.y).loss));
  try {
    tl::train_step(state, tl::mse, data.x, data.y);
    FAIL() << "no exception";
  } catch (const tl::numeric_error& e) {
    EXPECT_NE(std::string(e.what()).find("the gradient is NaN at step 1 (x holds an infinity at feature 0 of sample 7)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(state.params, before);
  EXPECT_EQ(state.optimizer_state, moments);
  EXPECT_EQ(state.step, 0);
}

TEST(TrainStep, EmptyBatchIsAShapeError) {
  tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  const tl::matrix x(1, 0), y(1, 0);
  try {
    tl::train_step(state, tl::mse, x, y);
    FAIL() << "no exception";
  } catch (const tl::shape_error& e) {
    EXPECT_NE(std::string(e.what()).find("the batch is empty"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)tl::apply(seed_fit::make_model(), state.params, x), tl::shape_error);
  EXPECT_EQ(state.step, 0);
}

// When a step fails inside fit, the losses of the steps before it are kept.
TEST(Fit, FailureKeepsTheLossHistory) {
  auto data = seed_fit::make_data();
  tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::sgd{1e6f});  // diverges
  try {
    tl::fit(state, tl::mse, data.x, data.y, 300, {.progress = false});
    FAIL() << "no exception";
  } catch (const tl::numeric_error& e) {
    ASSERT_GT(e.loss_history.size(), 0u);
    EXPECT_EQ(long(e.loss_history.size()), state.step);  // one loss per applied step
    for (double l : e.loss_history) EXPECT_TRUE(std::isfinite(l));
    EXPECT_EQ(std::string(e.what()).rfind("tapeless::fit:", 0), 0u) << e.what();
  }
}

// An update that overflows (here a learning rate finite in double, 1e39, but not in
// float) writes non-finite parameters; the next step fails on finite data, and its
// message says where the NaN or infinity is and what wrote it.
TEST(TrainStep, FailureAfterAnOverflowingUpdateNamesTheParameters) {
  const auto data = seed_fit::make_data();
  tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{1e39});
  EXPECT_TRUE(std::isfinite(tl::train_step(state, tl::mse, data.x, data.y)));
  tl_test::expect_failure<tl::numeric_error>([&] { tl::train_step(state, tl::mse, data.x, data.y); },
                                             {"at step 2 (the parameters hold", "written by an earlier update"});
  EXPECT_EQ(state.step, 1);
  // Before the first step the parameters are the initial ones: no update is blamed.
  auto initial = seed_fit::initial_parameters();
  initial.flat()[3] = std::numeric_limits<float>::quiet_NaN();
  tl::train_state fresh(seed_fit::make_model(), initial, tl::adam{0.01f});
  tl_test::expect_failure<tl::numeric_error>([&] { tl::train_step(fresh, tl::mse, data.x, data.y); },
                                             {"at step 1 (the initial parameters hold NaN at parameter 3)"});
}

// A negative epoch count converted to std::size_t is refused before anything runs.
TEST(Fit, EpochsPastTheLimitAreRefusedAndChangeNothing) {
  const auto data = seed_fit::make_data();
  tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  const auto before = state.params;
  const int minus_one = -1;
  tl_test::expect_failure<std::invalid_argument>(
      [&] { (void)tl::fit(state, tl::mse, data.x, data.y, std::size_t(minus_one), {.progress = false}); },
      {"epochs = 18446744073709551615 is more than 2147483647"});
  EXPECT_EQ(state.params, before);
  EXPECT_EQ(state.step, 0);
  EXPECT_EQ(tl::fit(state, tl::mse, data.x, data.y, 0, {.progress = false}).loss_history.size(), 0u);
  EXPECT_EQ(state.step, 0);
}

// The call forms a user writes, with epochs of every integer type and options or none.
// The wrong-call overloads (train/wrong_calls.hpp) must never capture them:
// a first const-state overload took `fit(state, loss, x, y, 3)`, whose int epochs it
// matched exactly, and turned it into a static_assert.
TEST(Fit, EveryEpochsTypeAndOptionsFormTrains) {
  const auto data = seed_fit::make_data();
  tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  const int epochs = 2;
  const long long_epochs = 2;
  const unsigned unsigned_epochs = 2;
  EXPECT_EQ(tl::fit(state, tl::mse, data.x, data.y, 2).loss_history.size(), 2u);
  EXPECT_EQ(tl::fit(state, tl::mse, data.x, data.y, epochs).loss_history.size(), 2u);
  EXPECT_EQ(tl::fit(state, tl::mse, data.x, data.y, long_epochs, {.progress = false}).loss_history.size(), 2u);
  EXPECT_EQ(tl::fit(state, tl::mse, data.x, data.y, unsigned_epochs, tl::fit_options{}).loss_history.size(), 2u);
  EXPECT_EQ(state.step, 8);
  const auto& read_only = state;
  const float loss = tl::evaluate_loss(tl::mse, read_only, data.x, data.y);
  EXPECT_FLOAT_EQ(tl::train_step(state, tl::mse, data.x, data.y), loss);
  EXPECT_EQ(state.step, 9);
  // apply(state, x): the state's model at its current parameters, bit for bit.
  const auto from_state = tl::apply(read_only, data.x), from_parts = tl::apply(state.model, state.params, data.x);
  ASSERT_EQ(from_state.batch(), data.x.batch());
  for (std::size_t i = 0; i < data.x.batch(); ++i) EXPECT_EQ(from_state(0, i), from_parts(0, i));
}

// The GPU's fit reports a finished run in the lines a live CPU run prints: every
// `every` epochs (a tenth by default), the time on the last line only.
TEST(Progress, FinishedRunReportsEveryKthLossAndTheTimeOnce) {
  const std::vector<double> losses{10, 9, 8, 7, 6, 5, 4};
  testing::internal::CaptureStderr();
  tl::detail::report_finished_run(losses, 3, 0.25);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "epoch 3/7  loss 8\nepoch 6/7  loss 5\nepoch 7/7  loss 4  250ms (all epochs in one run on the GPU)\n");
  testing::internal::CaptureStderr();
  tl::detail::report_finished_run(std::vector<double>(20, 1.5), 0, 1.0);  // every 2
  const std::string lines = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 10);
  EXPECT_NE(lines.find("epoch 18/20  loss 1.5\nepoch 20/20  loss 1.5  1.00s"), std::string::npos) << lines;
  testing::internal::CaptureStderr();
  tl::detail::report_finished_run({}, 0, 1.0);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  // A fit of a few milliseconds shows them, not "0.00s"; from a second on, seconds.
  for (const auto& [seconds, shown] : {std::pair{0.00084, "0.84ms"}, std::pair{0.0125, "12.5ms"},
                                       std::pair{0.9999, "1.00s"}, std::pair{1.0, "1.00s"}, std::pair{73.456, "73.46s"}}) {
    testing::internal::CaptureStderr();
    tl::detail::report_finished_run({2.0}, 0, seconds);
    EXPECT_EQ(testing::internal::GetCapturedStderr(),
              std::string("epoch 1/1  loss 2  ") + shown + " (all epochs in one run on the GPU)\n");
  }
}

TEST(SeedFit, Float64MatchesPlainFloat64Reference) {
  const auto data = seed_fit::make_data();
  tl::basic_matrix<double> x(1, data.x.batch()), y(1, data.y.batch());
  for (std::size_t s = 0; s < x.batch(); ++s) {
    x(0, s) = data.x(0, s);
    y(0, s) = data.y(0, s);
  }
  const auto model = seed_fit::make_model();
  tl::rng gen(42);
  const auto params = tl::init<double>(model, gen);
  tl::train_state state(model, params, tl::adam{0.01});
  const auto run = tl::fit(state, tl::mse, x, y, seed_fit::epochs, {.progress = false});
  const auto reference = tl_test::seed_fit_float64({params.flat().begin(), params.flat().end()},
                                                   {x.values().begin(), x.values().end()},
                                                   {y.values().begin(), y.values().end()}, int(seed_fit::epochs));
  ASSERT_EQ(run.loss_history.size(), reference.loss_history.size());
  for (std::size_t e = 0; e < seed_fit::epochs; ++e)
    EXPECT_NEAR(run.loss_history[e], reference.loss_history[e], 1e-10 * reference.loss_history[e]) << e;
  for (std::size_t k = 0; k < 49; ++k)
    EXPECT_NEAR(state.params.flat()[k], reference.params[k], 1e-10 * std::max(1.0, std::abs(reference.params[k]))) << k;
}

TEST(TrainStep, WrongBatchThrowsShapeError) {
  const auto data = seed_fit::make_data();
  tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  const tl::matrix short_y(1, data.x.batch() - 1);
  EXPECT_THROW(tl::train_step(state, tl::mse, data.x, short_y), tl::shape_error);
  // fit's errors name fit, the call the user made.
  try {
    tl::fit(state, tl::mse, data.x, short_y, 3, {.progress = false});
    ADD_FAILURE() << "no exception";
  } catch (const tl::shape_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("tapeless::fit:", 0), 0u) << e.what();
    // Both batches named, y's first: it is y that does not match.
    const std::string expected = "y has " + std::to_string(data.x.batch() - 1) + " samples and x has " +
                                 std::to_string(data.x.batch());
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  EXPECT_EQ(state.step, 0);
}

TEST(LargeBatch, ChunkedSumsMatchOneSampleAtATime) {
  // 1000 samples: several 256-sample chunks and a partial 16-lane group.
  const auto data = seed_fit::make_data(3, 1000);
  const auto params = seed_fit::initial_parameters();
  const auto model = seed_fit::make_model();
  const auto all = tl::value_and_grad(tl::mse, model, params, data.x, data.y);
  std::vector<double> sum(49, 0.0);
  double loss = 0;
  for (std::size_t s = 0; s < 1000; ++s) {
    const tl::matrix x(1, 1, std::vector<float>{data.x(0, s)}), y(1, 1, std::vector<float>{data.y(0, s)});
    const auto one = tl::value_and_grad(tl::mse, model, params, x, y);
    loss += one.loss / 1000.0;
    for (int k = 0; k < 49; ++k) sum[k] += one.gradient.flat()[k] / 1000.0;
  }
  EXPECT_NEAR(all.loss, loss, 1e-6 * loss);
  for (int k = 0; k < 49; ++k) EXPECT_NEAR(all.gradient.flat()[k], sum[k], 1e-6 + 1e-5 * std::abs(sum[k])) << k;
}

TEST(LargeBatch, ThreadedSumsMatchOneRange) {
  const std::size_t batch = 70000;  // 4 ranges where 4 or more cores exist
  const auto data = seed_fit::make_data(6, batch);
  const auto params = seed_fit::initial_parameters();
  const auto model = seed_fit::make_model();
  if (std::thread::hardware_concurrency() > 1) {
    EXPECT_GT(tl::detail::cpu_threads_for(batch, 49), 1u);
  }
  const auto threaded = tl::value_and_grad(tl::mse, model, params, data.x, data.y);
  std::vector<float> lanes(49 * tl::detail::cpu_lanes);
  std::vector<double> wide(49, 0.0);
  const double loss = tl::detail::accumulate_samples(model, tl::mse, params.data(), data.x.data(), data.y.data(), 0,
                                                     batch, lanes.data(), wide.data()) / double(batch);
  EXPECT_NEAR(threaded.loss, loss, 1e-6 * loss);
  for (int k = 0; k < 49; ++k)
    EXPECT_NEAR(threaded.gradient.flat()[k], wide[k] / double(batch), 1e-7 + 1e-6 * std::abs(wide[k] / double(batch))) << k;
}

// The lane pass's work threshold (cpu/parallel.hpp): the seed fit's 128 samples stay on
// one thread (its whole step is a few microseconds), while 1000 samples of the same
// model take a second thread where there is one (0.69x one thread's time on two cores).
TEST(Threads, SeedSizedStepsStayOnOneThreadAndAThousandSamplesTakeTwo) {
  EXPECT_EQ(tl::detail::cpu_threads_for(128, 49), 1u);
  EXPECT_EQ(tl::detail::cpu_threads_for(600, 49), 1u);
  if (tl::detail::cpu_thread_cap() > 1) {
    EXPECT_GE(tl::detail::cpu_threads_for(1000, 49), 2u);
  }
}

// The split (cpu/parallel.hpp): ranges that tile [0, batch) in order, of whole 64-sample
// units, so that a small batch still reaches every thread (up to one a unit) and no
// thread's share of a large one exceeds another's by more than a unit (10^4 samples in
// whole 256-sample chunks over 16 threads gave 768 samples to some and 512 to others).
TEST(Threads, RangesTileTheBatchEvenlyAndReachEveryThread) {
  using tl::detail::cpu_split_unit;
  for (std::size_t batch : {1u, 15u, 16u, 300u, 1000u, 4095u, 4096u, 10000u, 20001u}) {
    for (std::size_t threads : {1u, 2u, 3u, 7u, 16u}) {
      std::size_t next = 0, with_samples = 0, most = 0, least = batch;
      for (std::size_t t = 0; t < threads; ++t) {
        const auto r = tl::detail::split_range(batch, threads, t);
        EXPECT_EQ(r.first, next) << batch << " samples, " << threads << " threads, range " << t;
        EXPECT_LE(r.first, r.last);
        if (r.last != batch) {
          EXPECT_EQ(r.last % cpu_split_unit, 0u) << batch << " samples, " << threads << " threads";
        }
        with_samples += r.last > r.first;
        most = std::max(most, r.last - r.first);
        least = std::min(least, r.last - r.first);
        next = r.last;
      }
      EXPECT_LE(most - least, cpu_split_unit) << batch << " samples, " << threads << " threads";
      EXPECT_EQ(next, batch);
      EXPECT_EQ(with_samples, std::min(threads, (batch + cpu_split_unit - 1) / cpu_split_unit))
          << batch << " samples, " << threads << " threads";
    }
  }
}

// The batch split over threads: the same thread count gives the same bits every
// time, and any count agrees with one thread to float rounding. 10000 samples on 2
// threads split at 4992, inside a 256-sample chunk: a range's chunks then start off
// the batch's (20001 splits at multiples of 256 on 2 and 3 threads).
TEST(Threads, DeterministicPerCountAndCloseToOneThread) {
  const auto model = tl::chain(tl::dense<1, 32>(tl::tanh), tl::dense<32, 32>(tl::tanh), tl::dense<32, 1>());
  tl::rng gen(8);
  const auto params = tl::init(model, gen);
  constexpr std::size_t P = decltype(params)::size;
  for (const std::size_t batch : {20001u, 10000u}) {
    const auto data = seed_fit::make_data(5, batch);
    std::vector<float> one(P), again(P), many(P);
    const auto run = [&](std::size_t threads, std::vector<float>& grad) {
      return tl::detail::fused_loss_and_gradient(model, tl::mse, params.data(), data.x.data(), data.y.data(),
                                                 data.x.batch(), grad.data(), threads)
          .loss;
    };
    const float l1 = run(1, one);
    for (std::size_t threads : {2u, 3u, 7u}) {
      const float a = run(threads, many), b = run(threads, again);
      EXPECT_EQ(a, b) << threads << " threads, batch " << batch;
      EXPECT_EQ(many, again) << threads << " threads, batch " << batch;
      EXPECT_NEAR(a, l1, 1e-6 * l1) << threads << " threads, batch " << batch;
      double diff = 0, norm = 0;
      for (std::size_t k = 0; k < P; ++k) {
        diff += (many[k] - one[k]) * (many[k] - one[k]);
        norm += one[k] * one[k];
      }
      EXPECT_LT(std::sqrt(diff / norm), 1e-6) << threads << " threads, batch " << batch;
    }
  }
}

}  // namespace
