// The layer-at-a-time GPU path's errors: non-finite inputs and gradients, a regime a
// model cannot take, and a request for more device memory than there is; each a clear
// exception that leaves the state as it was. (The same binary as test_layered.cu.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../support/layered_models.hpp"
#include "../support/model_check.hpp"
#include "tapeless/cuda.hpp"

namespace {

using tl_test::random_batch;
using tl_test::cast;
using tl_test::relative_difference;

// fit throws tl::numeric_error whose message holds `says`, and leaves the state as it was.
template <class State>
void expect_fit_refuses(State& gpu, const tl::basic_matrix<float>& x, const tl::basic_matrix<float>& y,
                        const char* says) {
  const auto before = gpu.host_params();
  const long step = gpu.step;
  try {
    tl::fit(gpu, tl::mse, tl::to_device(x), tl::to_device(y), 3);
    ADD_FAILURE() << "expected tl::numeric_error";
  } catch (const tl::numeric_error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
  EXPECT_EQ(gpu.step, step);
  EXPECT_EQ(relative_difference(gpu.host_params().flat(), before.flat()), 0.0);
}

TEST(Layered, NonFiniteInputThrowsAndKeepsParameters) {
  const auto model = tl_test::issue_model();
  tl::rng gen(18);
  auto x = cast<float>(random_batch(gen, 2, 6000, -1, 1));
  const auto y = cast<float>(random_batch(gen, 1, 6000, 0, 1));
  x(1, 5000) = std::numeric_limits<float>::infinity();
  auto gpu = tl::to_device(tl::train_state(model, tl::init(model, gen), tl::adam{1e-3f}), tl::default_device());
  expect_fit_refuses(gpu, x, y, "not finite at step 1 (x holds an infinity at feature 1 of sample 5000)");
}

// An Inf input into tanh units: they saturate, so the loss stays finite, but the first
// layer's weight gradient is 0 * Inf = NaN. cuBLASLt's sums have no epilogue of ours,
// so the path's own check (flag_non_finite_kernel) must catch it.
TEST(Layered, NonFiniteGradientWithFiniteLossThrows) {
  const auto model = tl::chain(tl::dense<2, 128>(tl::tanh), tl::dense<128, 128>(tl::tanh), tl::dense<128, 1>());
  tl::rng gen(22);
  auto x = cast<float>(random_batch(gen, 2, 5000, -1, 1));
  const auto y = cast<float>(random_batch(gen, 1, 5000, 0, 1));
  x(0, 77) = std::numeric_limits<float>::infinity();
  auto gpu = tl::to_device(tl::train_state(model, tl::init(model, gen), tl::adam{1e-3f}), tl::default_device());
  gpu.regime = tl::gpu_regime::layered;
  expect_fit_refuses(gpu, x, y, "gradient is not finite at step 1 (x holds an infinity at feature 0 of sample 77)");
}

TEST(Layered, RegimeMisuseAndMemoryAreClearErrors) {
  const auto model = tl_test::issue_model();
  tl::rng gen(19);
  auto state = tl::to_device(tl::train_state(model, tl::init(model, gen), tl::adam{}), tl::default_device());
  state.regime = tl::gpu_regime::fused;
  const auto x = tl::to_device(cast<float>(random_batch(gen, 2, 100, -1, 1)));
  const auto y = tl::to_device(cast<float>(random_batch(gen, 1, 100, 0, 1)));
  EXPECT_THROW(tl::train_step(state, tl::mse, x, y), tl::shape_error);
  const auto norm = tl::chain(tl::dense<2, 8>(tl::tanh), tl::layer_norm<8>(), tl::dense<8, 1>());
  const auto p = tl::init(norm, gen);
  EXPECT_THROW(tl::value_and_grad(tl::mse, norm, p, x, y, tl::matmul_precision::fp32, tl::gpu_regime::layered),
               tl::shape_error);
  // A model too small for the layered path, forced onto it, at a batch the one-launch fit
  // would otherwise take: the same error as at any batch, and the parameters untouched.
  const auto seed = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  auto small = tl::to_device(tl::train_state(seed, tl::init(seed, gen), tl::adam{}), tl::default_device());
  const std::vector<float> before = small.params.to_host();
  const auto xs = tl::to_device(cast<float>(random_batch(gen, 1, 128, -1, 1)));
  const auto ys = tl::to_device(cast<float>(random_batch(gen, 1, 128, 0, 1)));
  small.regime = tl::gpu_regime::layered;
  EXPECT_THROW(tl::fit(small, tl::mse, xs, ys, 10), tl::shape_error);
  small.regime = tl::gpu_regime::automatic;
  small.precision = tl::matmul_precision::bf16;
  EXPECT_THROW(tl::fit(small, tl::mse, xs, ys, 10), tl::shape_error);
  EXPECT_EQ(small.params.to_host(), before);
  try {
    tl::detail::require_device_memory("fit", std::size_t(1) << 50, "a test's request");
    ADD_FAILURE() << "expected tl::device_memory_error";
  } catch (const tl::device_memory_error& e) {
    EXPECT_NE(std::string(e.what()).find("GiB of device memory"), std::string::npos) << e.what();
    EXPECT_GT(e.needed, e.available);
  }
}

}  // namespace
