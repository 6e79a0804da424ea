// The blocked CPU pass (cpu/blocked_chain.hpp) against the lane pass and against
// float64 central differences, over widths that are and are not multiples of the
// register tile (1, 3, 17, 32, 33, 128, 300, 1024), batches of 1, 2, 31 and 65537
// samples, float and double; a 50-step fit; threads; which pass a model gets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "tapeless/tapeless.hpp"
#include "../support/model_check.hpp"
#include "../support/pass_check.hpp"

namespace {

// A model whose type would choose the blocked pass (768 weights in its one hidden
// layer, past lanes_max_one_hidden_weights), told to take the lane pass: the override
// of docs/design.md.
inline auto forced_lanes_model() { return tl::chain(tl::dense<2, 256>(tl::tanh), tl::dense<256, 1>()); }
static_assert(tl::detail::thin_one_hidden_layer<decltype(forced_lanes_model())>() == false);

}  // namespace

template <>
inline constexpr tl::cpu_pass tl::cpu_pass_for<decltype(forced_lanes_model())> = tl::cpu_pass::lanes;

namespace {

using tl::cpu_pass;
using tl_test::expect_blocked_matches_differences;
using tl_test::expect_passes_agree;
using tl_test::random_matrix;
using tl_test::run_pass;

// Every width class: 1; 3 and 17 (under a vector); 32 (one panel); 33 (a panel and
// a lane); 128; 300 (depth past the 256-step block of the products, a tail of 4
// rows, an edge panel of 12 columns); 1024. Outputs of 1 (dot products), 3, 5, 40.
inline auto width_1() { return tl::chain(tl::dense<1, 1>(tl::tanh), tl::dense<1, 1>()); }
inline auto widths_3_17() { return tl::chain(tl::dense<3, 17>(tl::gelu), tl::dense<17, 3>(tl::tanh), tl::dense<3, 2>()); }
inline auto width_16_deep() {
  return tl::chain(tl::dense<2, 16>(tl::tanh), tl::dense<16, 16>(tl::gelu), tl::dense<16, 16>(tl::tanh), tl::dense<16, 1>());
}
inline auto width_32() { return tl::chain(tl::dense<1, 32>(tl::tanh), tl::dense<32, 32>(tl::tanh), tl::dense<32, 1>()); }
inline auto width_33() { return tl::chain(tl::dense<2, 33>(tl::tanh), tl::dense<33, 33>(tl::gelu), tl::dense<33, 5>()); }
inline auto width_128() {
  return tl::chain(tl::dense<4, 128>(tl::silu), tl::dense<128, 128>(tl::sigmoid), tl::dense<128, 3>());
}
inline auto width_300() { return tl::chain(tl::dense<3, 300>(tl::tanh), tl::dense<300, 300>(tl::gelu), tl::dense<300, 1>()); }
inline auto width_1024() {
  return tl::chain(tl::dense<2, 1024>(tl::tanh), tl::dense<1024, 40>(tl::softplus), tl::dense<40, 1>());
}

TEST(BlockedPass, MatchesLanePassFloat) {
  for (std::size_t batch : {1u, 2u, 31u}) {
    expect_passes_agree<float>(width_1(), batch, 1e-5);
    expect_passes_agree<float>(widths_3_17(), batch, 1e-5);
    expect_passes_agree<float>(width_32(), batch, 1e-5);
    expect_passes_agree<float>(width_16_deep(), batch, 1e-5);
    expect_passes_agree<float>(width_33(), batch, 1e-5);
    expect_passes_agree<float>(width_128(), batch, 1e-5);
    expect_passes_agree<float>(width_300(), batch, 1e-5);
    expect_passes_agree<float>(width_1024(), batch, 1e-5);
  }
  expect_passes_agree<float>(width_16_deep(), 3001, 1e-5);  // several chunks
}

TEST(BlockedPass, MatchesLanePassDouble) {
  for (std::size_t batch : {1u, 2u, 31u}) {
    expect_passes_agree<double>(width_1(), batch, 1e-13);
    expect_passes_agree<double>(widths_3_17(), batch, 1e-13);
    expect_passes_agree<double>(width_33(), batch, 1e-13);
    expect_passes_agree<double>(width_300(), batch, 1e-13);
    expect_passes_agree<double>(width_1024(), batch, 1e-13);
  }
}

TEST(BlockedPass, MatchesLanePassOnLargeOddBatch) {
  // 65537 = 256 chunks and one sample: a last chunk of one real row and 7 padding rows.
  expect_passes_agree<float>(width_32(), 65537, 1e-5);
  expect_passes_agree<float>(width_33(), 65537, 1e-5);
  expect_passes_agree<double>(widths_3_17(), 65537, 1e-12);
}

TEST(BlockedPass, OtherLosses) {
  expect_passes_agree<double>(width_128(), 31, 1e-13, tl::softmax_cross_entropy);
  expect_passes_agree<double>(width_33(), 31, 1e-13, tl::huber);
  expect_passes_agree<float>(width_33(), 300, 1e-5, tl::binary_cross_entropy_with_logits);
}

TEST(BlockedPass, Float64GradientMatchesCentralDifferences) {
  expect_blocked_matches_differences(width_1(), 5);
  expect_blocked_matches_differences(widths_3_17(), 31);
  expect_blocked_matches_differences(width_33(), 31);
  expect_blocked_matches_differences(width_128(), 9);
  expect_blocked_matches_differences(width_300(), 3);
  expect_blocked_matches_differences(width_1024(), 2);
}

// Training through train_step (the blocked pass, chosen by the type) follows the same
// path as the lane pass step by step.
TEST(BlockedPass, FiftyStepFitFollowsLanePass) {
  const auto model = tl::chain(tl::dense<1, 64>(tl::gelu), tl::dense<64, 64>(tl::gelu), tl::dense<64, 1>());
  static_assert(tl::detail::pass_by_type<decltype(model)>() == cpu_pass::blocked);
  tl::rng gen(5);
  const auto start = tl::init(model, gen);
  tl::matrix x(1, 1000), y(1, 1000);
  for (std::size_t s = 0; s < 1000; ++s) {
    x(0, s) = float(-2 + 4 * double(s) / 999);
    y(0, s) = float(std::sin(2 * x(0, s)) + 0.1 * gen.normal());
  }
  tl::train_state blocked(model, start, tl::adam{0.01f});
  tl::train_state lanes(model, start, tl::adam{0.01f});
  std::vector<float> grad(decltype(start)::size);
  for (int step = 0; step < 50; ++step) {
    const float lb = tl::train_step(blocked, tl::mse, x, y);
    const float ll = tl::detail::fused_loss_and_gradient<cpu_pass::lanes>(model, tl::mse, lanes.params.data(), x.data(),
                                                                         y.data(), 1000, grad.data())
                         .loss;
    tl::detail::optimizer_step(lanes.optimizer, step + 1, lanes.params.data(), grad.data(), lanes.optimizer_state.data(),
                               grad.size());
    ASSERT_NEAR(lb, ll, 1e-4 * ll) << "step " << step;
  }
  EXPECT_LT(tl_test::relative_difference(blocked.params.flat(), lanes.params.flat()), 1e-4);
  EXPECT_LT(tl::train_step(blocked, tl::mse, x, y), 0.5f * tl::value_and_grad(tl::mse, model, start, x, y).loss);
}

// The same thread count gives the same bits every time; any count agrees with one
// thread to float rounding: ranges of several chunks, the last one short (20001
// samples), ranges that start inside a 256-sample chunk (10000: 4992 on 2 threads),
// and one short chunk a thread (300 samples).
TEST(BlockedPass, ThreadsDeterministicAndCloseToOneThread) {
  const auto model = width_33();
  for (std::size_t batch : {20001u, 10000u, 300u}) {
    tl::rng gen(8);
    const auto p = tl::init(model, gen);
    const auto x = random_matrix<float>(gen, 2, batch);
    const auto y = random_matrix<float>(gen, 5, batch);
    const auto one = run_pass<cpu_pass::blocked>(model, tl::mse, p, x, y, 1);
    for (std::size_t threads : {2u, 3u, 7u}) {
      const auto a = run_pass<cpu_pass::blocked>(model, tl::mse, p, x, y, threads);
      const auto b = run_pass<cpu_pass::blocked>(model, tl::mse, p, x, y, threads);
      EXPECT_EQ(a.loss, b.loss) << threads << " threads, batch " << batch;
      EXPECT_EQ(a.gradient, b.gradient) << threads << " threads, batch " << batch;
      EXPECT_NEAR(a.loss, one.loss, 1e-6 * one.loss) << threads << " threads, batch " << batch;
      EXPECT_LT(tl_test::relative_difference(a.gradient, one.gradient), 1e-6) << threads << " threads, batch " << batch;
    }
  }
}

// Past 2^17 parameters the weights are packed, the threads' sums joined and the
// optimizer's update applied in parts on the pool: the same values as in one part.
TEST(BlockedPass, LargeModelPackJoinAndUpdateInParts) {
  const auto model = tl::chain(tl::dense<2, 512>(tl::tanh), tl::dense<512, 300>(tl::tanh), tl::dense<300, 1>());
  constexpr std::size_t P = decltype(model)::parameter_count;
  static_assert(P >= 2 * tl::detail::cpu_values_per_thread);
  expect_passes_agree<float>(model, 64, 1e-5);
  tl::rng gen(4);
  const auto x = random_matrix<float>(gen, 2, 64);
  const auto y = random_matrix<float>(gen, 1, 64);
  tl::train_state state(model, tl::init(model, gen), tl::adam{0.01f});
  for (int step = 0; step < 2; ++step) tl::train_step(state, tl::mse, x, y);
  auto params = state.params;
  auto slots = state.optimizer_state;
  const auto g = run_pass<cpu_pass::blocked>(model, tl::mse, params, x, y, 0);
  tl::detail::optimizer_step(state.optimizer, state.step + 1, params.data(), g.gradient.data(), slots.data(), P);
  tl::train_step(state, tl::mse, x, y);
  for (std::size_t k = 0; k < P; ++k) ASSERT_EQ(state.params.flat()[k], params.flat()[k]) << k;
  EXPECT_EQ(state.optimizer_state, slots);
}

// A misspelt TAPELESS_CPU_PASS or TAPELESS_CPU_THREADS is an error the first step
// reports, not a silent default (each runs in a fresh process: the variables are read once).
void step_with_environment(const char* name, const char* value) {
  setenv(name, value, 1);
  const auto model = width_32();
  tl::rng gen(3);
  const auto p = tl::init(model, gen);
  const auto x = random_matrix<float>(gen, 1, 10), y = random_matrix<float>(gen, 1, 10);
  try {
    (void)tl::value_and_grad(tl::mse, model, p, x, y);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(3);
  }
  std::exit(0);
}
TEST(PassChoice, EnvironmentTyposAreErrors) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(step_with_environment("TAPELESS_CPU_PASS", "lane"), testing::ExitedWithCode(3),
              "TAPELESS_CPU_PASS must be lanes or blocked \\(or unset\\), got 'lane'");
  EXPECT_EXIT(step_with_environment("TAPELESS_CPU_THREADS", "two"), testing::ExitedWithCode(3),
              "TAPELESS_CPU_THREADS must be a positive whole number, got 'two'");
  EXPECT_EXIT(step_with_environment("TAPELESS_CPU_THREADS", " 2"), testing::ExitedWithCode(3),
              "TAPELESS_CPU_THREADS must be a positive whole number, got ' 2'");
  // A whole number past any count (past 2^64 here) is capped by the hardware, as any
  // count above it is.
  EXPECT_EXIT(step_with_environment("TAPELESS_CPU_THREADS", "18446744073709551617"), testing::ExitedWithCode(0), "");
  EXPECT_EXIT(step_with_environment("TAPELESS_CPU_THREADS", "2"), testing::ExitedWithCode(0), "");
  EXPECT_EXIT(step_with_environment("TAPELESS_CPU_PASS", "blocked"), testing::ExitedWithCode(0), "");
}

TEST(PassChoice, ByTypeAndOverride) {
  static_assert(tl::detail::pass_by_type<decltype(width_32())>() == cpu_pass::blocked);
  static_assert(tl::detail::pass_by_type<decltype(width_33())>() == cpu_pass::blocked);
  static_assert(tl::detail::pass_by_type<decltype(widths_3_17())>() == cpu_pass::lanes);  // hidden 3 < 16
  // Width 16 takes the blocked pass once there is a hidden-to-hidden product, not before.
  static_assert(tl::detail::pass_by_type<decltype(width_16_deep())>() == cpu_pass::blocked);
  static_assert(tl::detail::pass_by_type<decltype(tl::chain(tl::dense<2, 16>(tl::tanh), tl::dense<16, 1>()))>() ==
                cpu_pass::lanes);
  static_assert(tl::detail::pass_by_type<decltype(tl::chain(tl::dense<2, 8>(tl::tanh), tl::dense<8, 8>(tl::tanh),
                                                            tl::dense<8, 1>()))>() == cpu_pass::lanes);
  static_assert(tl::detail::pass_by_type<decltype(tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>()))>() ==
                cpu_pass::lanes);  // the seed fit
  // One hidden layer of thin products stays on lanes up to 192 weights, however wide.
  static_assert(tl::detail::pass_by_type<decltype(tl::chain(tl::dense<2, 64>(tl::tanh), tl::dense<64, 1>()))>() ==
                cpu_pass::lanes);  // 192 weights
  static_assert(tl::detail::pass_by_type<decltype(tl::chain(tl::dense<1, 96>(tl::tanh), tl::dense<96, 1>()))>() ==
                cpu_pass::lanes);
  static_assert(tl::detail::pass_by_type<decltype(tl::chain(tl::dense<3, 64>(tl::tanh), tl::dense<64, 1>()))>() ==
                cpu_pass::blocked);  // 256 weights
  static_assert(tl::detail::pass_by_type<decltype(tl::chain(tl::dense<2, 65>(tl::tanh), tl::dense<65, 1>()))>() ==
                cpu_pass::blocked);  // 195
  static_assert(tl::detail::pass_by_type<decltype(tl::chain(tl::dense<2, 32>(tl::tanh), tl::layer_norm<32>(),
                                                            tl::dense<32, 1>()))>() == cpu_pass::blocked);  // not only dense
  static_assert(tl::detail::pass_by_type<decltype(tl::chain(tl::dense<2, 64>(tl::tanh), tl::layer_norm<64>(),
                                                            tl::dense<64, 1>()))>() == cpu_pass::blocked);  // other layers too
  static_assert(tl::detail::pass_by_type<decltype(forced_lanes_model())>() == cpu_pass::lanes);
  static_assert(tl::cpu_pass_of<decltype(width_32())> == cpu_pass::blocked);
  static_assert(tl::cpu_pass_of<decltype(forced_lanes_model())> == cpu_pass::lanes);
  // What value_and_grad computes is what the chosen pass computes, to the bit.
  tl::rng gen(2);
  const auto forced = forced_lanes_model();
  const auto pf = tl::init(forced, gen);
  const auto x = random_matrix<float>(gen, 2, 100);
  const auto y = random_matrix<float>(gen, 1, 100);
  const auto via_api = tl::value_and_grad(tl::mse, forced, pf, x, y);
  const auto lanes = run_pass<cpu_pass::lanes>(forced, tl::mse, pf, x, y, 0);
  const auto blocked = run_pass<cpu_pass::blocked>(forced, tl::mse, pf, x, y, 0);
  EXPECT_EQ(std::vector<float>(via_api.gradient.flat().begin(), via_api.gradient.flat().end()), lanes.gradient);
  EXPECT_NE(lanes.gradient, blocked.gradient);  // the two passes round differently: the check above can fail
  const auto wide = width_32();
  const auto pw = tl::init(wide, gen);
  const auto xw = random_matrix<float>(gen, 1, 100);
  const auto yw = random_matrix<float>(gen, 1, 100);
  const auto wide_api = tl::value_and_grad(tl::mse, wide, pw, xw, yw);
  EXPECT_EQ(std::vector<float>(wide_api.gradient.flat().begin(), wide_api.gradient.flat().end()),
            (run_pass<cpu_pass::blocked>(wide, tl::mse, pw, xw, yw, 0).gradient));
}

// tl::apply takes the blocked pass's forward for the models whose steps take it, over
// threads: its outputs equal the lane pass's forward to rounding, at widths that are
// and are not multiples of the register tile and several outputs, and each sample's
// outputs are the same bits whether it comes alone or in a batch split over threads.
template <class T, class Model>
void expect_apply_matches_lanes(const Model& model, std::size_t batch, double tolerance) {
  static_assert(tl::detail::pass_by_type<Model>() == cpu_pass::blocked);
  constexpr std::size_t In = Model::inputs, Out = Model::outputs, K = tl::detail::cpu_lanes;
  tl::rng gen(batch + 3);
  auto p = tl::init<T>(model, gen);
  for (T& v : tl::flat(p)) v += T(0.2 * (gen.uniform() - 0.5));
  const auto x = random_matrix<T>(gen, In, batch);
  const auto y = tl::apply(model, p, x);
  ASSERT_EQ(y.features(), Out);
  ASSERT_EQ(y.batch(), batch);
  tl::detail::group_buffers<Model, K, T> buffers;
  T xg[In * K];
  double worst = 0;
  for (std::size_t g = 0; g < batch; g += K) {
    const std::size_t count = std::min(K, batch - g);
    tl::detail::load_group<In, K>(x.data(), g, count, xg);
    const T* lanes = tl::detail::forward_group(model, p.data(), xg, buffers);
    for (std::size_t k = 0; k < count; ++k)
      for (std::size_t o = 0; o < Out; ++o)
        worst = std::max(worst, std::abs(double(y(o, g + k)) - double(lanes[o * K + k])) /
                                    std::max(1.0, std::abs(double(lanes[o * K + k]))));
  }
  EXPECT_LE(worst, tolerance) << "batch " << batch;
  for (std::size_t s : {std::size_t(0), batch / 2, batch - 1}) {
    tl::basic_matrix<T> one(In, 1);
    for (std::size_t i = 0; i < In; ++i) one(i, 0) = x(i, s);
    const auto alone = tl::apply(model, p, one);
    for (std::size_t o = 0; o < Out; ++o) EXPECT_EQ(alone(o, 0), y(o, s)) << "sample " << s << " of " << batch;
  }
}

TEST(BlockedPass, ApplyMatchesLanePassWholeOrOneByOne) {
  const auto wide = tl::chain(tl::dense<3, 300>(tl::tanh), tl::dense<300, 40>(tl::gelu), tl::dense<40, 3>());
  for (std::size_t batch : {1u, 31u, 4099u}) {
    expect_apply_matches_lanes<float>(wide, batch, 2e-5);
    expect_apply_matches_lanes<double>(wide, batch, 1e-12);
    expect_apply_matches_lanes<float>(width_33(), batch, 2e-5);
  }
}

// apply keeps the weights it packed and uses them again only for the same model type
// and bit-identical parameters: a change in the very last parameter, another model of
// the same type, a training step in between all give what a thread that never packed
// anything gives.
TEST(BlockedPass, ApplyReusesPackedWeightsOnlyForTheSameParameters) {
  const auto model = tl::chain(tl::dense<3, 300>(tl::tanh), tl::dense<300, 40>(tl::gelu), tl::dense<40, 3>());
  constexpr std::size_t P = decltype(model)::parameter_count;
  tl::rng gen(12);
  const auto p = tl::init(model, gen);
  const auto x = random_matrix<float>(gen, 3, 5), y = random_matrix<float>(gen, 3, 5);
  const auto values = [](const tl::matrix& m) { return std::vector<float>(m.values().begin(), m.values().end()); };
  const auto apply = [&](const auto& params) { return values(tl::apply(model, params, x)); };
  const auto fresh = [&](const auto& params) {  // on a new thread: nothing packed there before
    std::vector<float> out;
    std::thread([&] { out = apply(params); }).join();
    return out;
  };
  const auto first = apply(p);
  EXPECT_EQ(apply(p), first);
  EXPECT_EQ(first, fresh(p));
  auto changed = p;
  changed.flat()[P - 1] += 0.5f;  // the last output's bias
  const auto after_change = apply(changed);
  EXPECT_EQ(after_change, fresh(changed));
  EXPECT_NE(after_change[2], first[2]);  // sample 0's third output
  EXPECT_EQ(apply(p), first);
  tl::train_state state(model, p, tl::adam{0.01f});
  tl::train_step(state, tl::mse, x, y);  // packs its own weights in this thread's workspace
  EXPECT_EQ(apply(state.params), fresh(state.params));
  EXPECT_EQ(apply(p), first);
}

// A user's loss that calls tl::apply inside a step (of another model type, and of the
// step's own type with other parameters), on the calling thread and on the pool's: the
// apply packs into a workspace of its own, and the step's gradient is the same bits as
// with plain MSE (the step's packed weights, sums and buffers untouched).
template <class Other>
struct loss_that_applies {
  const Other* other;
  const tl::parameters<Other, float>* params;
  const tl::matrix* x;
  static constexpr double denominator(std::size_t outputs, std::size_t batch) {
    return tl::mse_loss::denominator(outputs, batch);
  }
  template <std::size_t N, std::size_t K, class T>
  void group(const T* yhat, const T* y, T* dout, T* loss) const {
    (void)tl::apply(*other, *params, *x);
    tl::mse_loss{}.template group<N, K>(yhat, y, dout, loss);
  }
};
TEST(BlockedPass, ApplyInsideALossLeavesTheStepAlone) {
  const auto model = tl::chain(tl::dense<2, 64>(tl::tanh), tl::dense<64, 64>(tl::tanh), tl::dense<64, 1>());
  const auto other = tl::chain(tl::dense<2, 64>(tl::tanh), tl::dense<64, 64>(tl::tanh), tl::dense<64, 1>(tl::tanh));
  using Model = std::remove_const_t<decltype(model)>;
  using Other = std::remove_const_t<decltype(other)>;
  constexpr std::size_t P = Model::parameter_count;
  tl::rng gen(13);
  const auto p = tl::init(model, gen);
  auto q = tl::init(model, gen);
  auto r = tl::init(other, gen);
  for (float& v : q.flat()) v *= 3.0f;
  for (float& v : r.flat()) v *= 3.0f;
  const auto x = random_matrix<float>(gen, 2, 2000), y = random_matrix<float>(gen, 1, 2000);
  const auto few = random_matrix<float>(gen, 2, 3);
  for (std::size_t threads : {1u, 2u}) {
    std::vector<float> plain(P), same(P), another(P);
    const auto step = [&](const auto& loss, std::vector<float>& g) {
      return tl::detail::fused_loss_and_gradient<cpu_pass::blocked>(model, loss, p.data(), x.data(), y.data(),
                                                                     x.batch(), g.data(), threads)
          .loss;
    };
    const float l = step(tl::mse, plain);
    EXPECT_EQ(step(loss_that_applies<Model>{&model, &q, &few}, same), l) << threads;
    EXPECT_EQ(same, plain) << threads;
    EXPECT_EQ(step(loss_that_applies<Other>{&other, &r, &few}, another), l) << threads;
    EXPECT_EQ(another, plain) << threads;
  }
}

TEST(BlockedPass, InfiniteInputGivesNonFiniteGradientAndChangesNothing) {
  const auto model = width_32();
  tl::rng gen(3);
  tl::train_state state(model, tl::init(model, gen), tl::adam{0.01f});
  tl::matrix x(1, 300), y(1, 300);
  for (std::size_t s = 0; s < 300; ++s) x(0, s) = float(s) / 300, y(0, s) = 0.5f;
  x(0, 299) = INFINITY;  // in the second chunk
  const auto before = state.params;
  EXPECT_THROW(tl::train_step(state, tl::mse, x, y), tl::numeric_error);
  EXPECT_EQ(state.step, 0);
  for (std::size_t k = 0; k < decltype(before)::size; ++k) ASSERT_EQ(state.params.flat()[k], before.flat()[k]) << k;
}

}  // namespace
