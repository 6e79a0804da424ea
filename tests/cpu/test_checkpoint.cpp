// Checkpoints: PyTorch's names and shapes, exact resumption, and every bad file
// refused with one exception that names the file, leaving the state as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "../../examples/seed_fit.hpp"
#include "tapeless/io.hpp"

namespace {

namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tapeless_checkpoint_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

auto mixed_model() {
  return tl::chain(tl::dense<2, 8>(tl::gelu), tl::skip(tl::dense<8, 8>(tl::tanh), tl::dense<8, 8>()),
                   tl::layer_norm<8>(), tl::dense<8, 1>());
}

TEST(Checkpoint, NamesAndShapesArePyTorchs) {
  const auto model = mixed_model();
  tl::rng gen(1);
  const auto params = tl::init(model, gen);
  const auto path = temp_path("names.safetensors");
  tl::save(path, params);
  const auto file = tl::load_safetensors(path);
  const std::vector<std::string> expected = {"0.weight",   "0.bias",   "2.0.weight", "2.0.bias", "2.2.weight",
                                             "2.2.bias",   "3.weight", "3.bias",     "4.weight", "4.bias"};
  ASSERT_EQ(file.names().size(), expected.size());
  for (const auto& name : expected) EXPECT_TRUE(file.contains(name)) << name;
  EXPECT_EQ(file.at("0.weight").shape, (std::vector<std::size_t>{8, 2}));
  EXPECT_EQ(file.at("4.bias").shape, (std::vector<std::size_t>{1}));
  EXPECT_EQ(file.at("3.weight").type, tl::dtype::f32);
  // Values: 0.weight is W[out][in], the first 16 parameters.
  std::vector<float> w(16);
  file.copy_to<float>("0.weight", std::span<float>(w), {8, 2});
  for (std::size_t k = 0; k < 16; ++k) EXPECT_EQ(w[k], params.flat()[k]);
  auto loaded = tl::parameters<std::remove_cvref_t<decltype(model)>>{};
  tl::load(path, loaded);
  EXPECT_EQ(loaded, params);
}

// A PyTorch model saved in half precision (`model.bfloat16()` or `.half()`) loads into
// float and double parameters exactly: the same names, the values widened.
TEST(Checkpoint, HalfPrecisionCheckpointsLoadExactly) {
  const auto model = mixed_model();
  using M = std::remove_cvref_t<decltype(model)>;
  tl::rng gen(5);
  const auto params = tl::init(model, gen);
  const auto path = temp_path("full.safetensors");
  tl::save(path, params);
  const auto file = tl::load_safetensors(path);
  for (const tl::dtype half : {tl::dtype::bf16, tl::dtype::f16}) {
    // Each tensor cut to the half format: bf16, the top 16 bits; f16, the mantissa cut to
    // 10 bits (values below f16's normal range written as zero; every value is below 2).
    std::vector<std::vector<std::uint16_t>> bits;
    std::vector<tl::tensor_view> views;
    bits.reserve(file.names().size());
    for (const std::string& name : file.names()) {
      const auto values = file.values<float>(name, file.at(name).shape);
      std::vector<std::uint16_t> b(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        std::uint32_t u;
        std::memcpy(&u, &values[i], 4);
        if (half == tl::dtype::bf16) {
          b[i] = std::uint16_t(u >> 16);
        } else {
          const std::uint32_t exponent = (u >> 23) & 0xff;
          b[i] = std::uint16_t(((u >> 16) & 0x8000u) |
                               (exponent < 113 ? 0u : ((exponent - 112) << 10) | ((u >> 13) & 0x3ffu)));
        }
      }
      bits.push_back(std::move(b));
      views.push_back({name, half, file.at(name).shape, std::as_bytes(std::span(bits.back()))});
    }
    const auto half_path = temp_path("half.safetensors");
    tl::save_safetensors(half_path, views);
    tl::parameters<M> loaded;
    tl::load(half_path, loaded);
    tl::parameters<M, double> loaded64;
    tl::load(half_path, loaded64);
    std::size_t k = 0, changed = 0;
    for (std::size_t t = 0; t < bits.size(); ++t)
      for (const std::uint16_t b : bits[t]) {
        const float expected = half == tl::dtype::bf16 ? tl::detail::bfloat16_bits_to_float(b)
                                                       : tl::detail::half_bits_to_float(b);
        EXPECT_EQ(loaded.flat()[k], expected) << k;
        EXPECT_EQ(loaded64.flat()[k], double(expected)) << k;
        changed += expected != params.flat()[k];
        ++k;
      }
    EXPECT_EQ(k, M::parameter_count);
    EXPECT_GT(changed, 0u);  // the file really held rounded values
  }
}

template <class T>
void resumes_exactly() {
  const auto model = mixed_model();
  tl::rng gen(2);
  const auto params = tl::init<T>(model, gen);
  tl::basic_matrix<T> x(2, 200), y(1, 200);
  for (auto& v : x.values()) v = T(gen.uniform(-2, 2));
  for (std::size_t s = 0; s < 200; ++s) y(0, s) = T(std::sin(3 * double(x(0, s))) * double(x(1, s)));
  tl::train_state whole(model, params, tl::adam{0.01});
  const auto run = tl::fit(whole, tl::mse, x, y, 300, {.progress = false});
  tl::train_state first(model, params, tl::adam{0.01});
  const auto half = tl::fit(first, tl::mse, x, y, 150, {.progress = false});
  const auto path = temp_path("resume.safetensors");
  tl::save(path, first);
  tl::train_state second(model, tl::init<T>(model, gen), tl::adam{0.01});  // other parameters
  tl::load(path, second);
  EXPECT_EQ(second.step, 150);
  const auto rest = tl::fit(second, tl::mse, x, y, 150, {.progress = false});
  std::vector<double> resumed = half.loss_history;
  resumed.insert(resumed.end(), rest.loss_history.begin(), rest.loss_history.end());
  EXPECT_EQ(resumed, run.loss_history);  // bitwise
  EXPECT_EQ(second.params, whole.params);
  EXPECT_EQ(second.optimizer_state, whole.optimizer_state);
}
TEST(Checkpoint, ResumedRunEqualsUninterruptedFloat) { resumes_exactly<float>(); }
TEST(Checkpoint, ResumedRunEqualsUninterruptedDouble) { resumes_exactly<double>(); }

// ---- bad files: one exception naming the file, nothing changed ------------------
template <class State, class Exception = std::exception>
void expect_refused(const fs::path& path, State& state, const std::string& problem) {
  const State before = state;
  try {
    tl::load(path, state);
    ADD_FAILURE() << "loaded " << path;
  } catch (const tl::io_error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
  } catch (const tl::shape_error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
  }
  EXPECT_EQ(state.params, before.params);
  EXPECT_EQ(state.optimizer_state, before.optimizer_state);
  EXPECT_EQ(state.step, before.step);
}

struct BadCheckpoints : ::testing::Test {
  decltype(mixed_model()) model = mixed_model();
  tl::rng gen{3};
  tl::train_state<decltype(mixed_model()), tl::adam> state{model, tl::init(model, gen), tl::adam{0.01}};
  fs::path good = temp_path("good.safetensors");
  void SetUp() override {
    state.step = 7;
    state.optimizer_state[5] = 0.25f;
    tl::save(good, state);
  }
  std::vector<char> bytes() const {
    std::ifstream in(good, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  fs::path write(const std::string& name, const std::vector<char>& data) const {
    const auto path = temp_path(name);
    std::ofstream(path, std::ios::binary).write(data.data(), std::streamsize(data.size()));
    return path;
  }
};

TEST_F(BadCheckpoints, TruncatedShortAndCorrupt) {
  auto data = bytes();
  expect_refused(write("short.safetensors", {data.begin(), data.begin() + 5}), state, "");
  expect_refused(write("truncated.safetensors", {data.begin(), data.end() - 9}), state, "");
  data[12] = '#';  // inside the JSON header
  expect_refused(write("corrupt.safetensors", data), state, "");
  auto huge = bytes();
  for (int i = 0; i < 8; ++i) huge[i] = i == 5 ? char(1) : char(0);  // claims 2^40 bytes of header
  expect_refused(write("huge.safetensors", huge), state, "");
}

TEST_F(BadCheckpoints, WrongDtypeShapeOrModel) {
  tl::train_state wide(model, tl::init<double>(model, gen), tl::adam{0.01});
  const auto f64 = temp_path("f64.safetensors");
  tl::save(f64, wide);
  expect_refused(f64, state, "stored as F64, expected F32");
  // The other way, float into double, widens exactly (as load_npy<double> of '<f4').
  tl::load(good, wide);
  EXPECT_EQ(wide.step, 7);
  for (std::size_t k = 0; k < state.params.size; ++k) EXPECT_EQ(wide.params.flat()[k], double(state.params.flat()[k]));
  EXPECT_EQ(wide.optimizer_state[5], 0.25);
  const auto other = tl::chain(tl::dense<2, 9>(tl::gelu), tl::dense<9, 1>());
  const auto other_path = temp_path("other.safetensors");
  tl::save(other_path, tl::train_state(other, tl::init(other, gen), tl::adam{0.01}));
  expect_refused(other_path, state, "another model");
  // Same names and shapes, another activation.
  const auto tanh_model = tl::chain(tl::dense<2, 8>(tl::tanh), tl::skip(tl::dense<8, 8>(tl::tanh), tl::dense<8, 8>()),
                                    tl::layer_norm<8>(), tl::dense<8, 1>());
  const auto tanh_path = temp_path("tanh.safetensors");
  tl::save(tanh_path, tl::train_state(tanh_model, tl::init(tanh_model, gen), tl::adam{0.01}));
  expect_refused(tanh_path, state, "another model");
  // An SGD state into an Adam state.
  const auto sgd_path = temp_path("sgd.safetensors");
  tl::save(sgd_path, tl::train_state(model, tl::init(model, gen), tl::sgd{0.1}));
  expect_refused(sgd_path, state, "the checkpoint holds the state of sgd, expected adam");
  // Parameters alone into a training state: no optimizer state.
  const auto params_path = temp_path("params.safetensors");
  tl::save(params_path, state.params);
  expect_refused(params_path, state, "holds no optimizer state");
}

TEST_F(BadCheckpoints, NonFiniteValuesRejectedUnlessAllowed) {
  auto nan_state = state;
  nan_state.params.flat()[3] = std::numeric_limits<float>::quiet_NaN();
  const auto path = temp_path("nan.safetensors");
  tl::save(path, nan_state);
  expect_refused(path, state, "NaN or infinity");
  expect_refused(path, state, ".allow_non_finite = true} accepts them");
  // In the optimizer's state: the same refusal, the same hint.
  auto nan_slot = nan_state;
  nan_slot.params.flat()[3] = 0.5f;
  nan_slot.optimizer_state[2] = std::numeric_limits<float>::infinity();
  const auto slot_path = temp_path("nan_slot.safetensors");
  tl::save(slot_path, nan_slot);
  expect_refused(slot_path, state, ".allow_non_finite = true} accepts them");
  tl::load(path, state, {.allow_non_finite = true});
  EXPECT_TRUE(std::isnan(state.params.flat()[3]));
}

TEST_F(BadCheckpoints, FailedSaveKeepsThePreviousFile) {
  const auto before = bytes();
  // A directory where the file should go: the temporary file cannot be renamed onto it.
  const auto dir = temp_path("a_directory.safetensors");
  fs::create_directories(dir);
  EXPECT_THROW(tl::save(dir, state), tl::io_error);
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_THROW(tl::save(temp_path("missing_dir") / "x" / "y.safetensors", state), tl::io_error);
  EXPECT_EQ(bytes(), before);
}

TEST(Checkpoint, ParametersLoadFromATrainingStateFile) {
  const auto model = mixed_model();
  tl::rng gen(4);
  tl::train_state state(model, tl::init(model, gen), tl::adamw{0.01});
  const auto path = temp_path("state.safetensors");
  tl::save(path, state);
  tl::parameters<std::remove_cvref_t<decltype(model)>> params;
  tl::load(path, params);  // the optimizer's tensors are not parameters: skipped
  EXPECT_EQ(params, state.params);
}

// The step is what save() writes, decimal digits: anything else is refused and the
// state left as it was ("" loaded as step 0, " 5" and "+5" as 5).
TEST(Checkpoint, StepMetadataMustBeDigits) {
  const auto model = mixed_model();
  tl::rng gen(5);
  tl::train_state state(model, tl::init(model, gen), tl::adam{0.01});
  state.step = 3;
  const auto good = temp_path("step_good.safetensors");
  tl::save(good, state);
  const auto file = tl::load_safetensors(good);
  std::vector<std::vector<float>> values;
  std::vector<tl::tensor_view> views;
  for (const auto& n : file.names()) values.push_back(file.values<float>(n, file.at(n).shape));
  std::size_t k = 0;
  for (const auto& n : file.names()) views.emplace_back(n, std::span<const float>(values[k++]), file.at(n).shape);
  const auto with_step = [&](const std::string& step) {
    auto metadata = file.metadata();
    metadata["tapeless.step"] = step;
    const auto path = temp_path("step.safetensors");
    tl::save_safetensors(path, views, metadata);
    return path;
  };
  for (const std::string bad : {"", " 5", "+5", "5 ", "-1", "0x10", "99999999999999999999"}) {
    auto loaded = state;
    loaded.step = 11;
    EXPECT_THROW(tl::load(with_step(bad), loaded), tl::io_error) << '"' << bad << '"';
    EXPECT_EQ(loaded.step, 11) << '"' << bad << '"';
  }
  auto loaded = state;
  tl::load(with_step("7"), loaded);
  EXPECT_EQ(loaded.step, 7);
}

}  // namespace
