// tapeless' files read by independent code, and NumPy's files read by tapeless:
//   tests/python/read_safetensors.py parses safetensors by hand (json + numpy.frombuffer);
//   tests/python/read_npy_check.py uses numpy.load / numpy.lib.format.write_array.
// Values are compared as IEEE bit patterns. Without python3 + numpy the whole program
// exits 77, which meson reports as skipped (the suite gives it .ci/setup's Python, which has
// numpy, so it runs in CI).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "../support/io_files.hpp"
#include "tapeless/io.hpp"
#include "tapeless/tapeless.hpp"

#ifndef TAPELESS_PYTHON_TESTS_DIR
#error "define TAPELESS_PYTHON_TESTS_DIR as the path of tests/python"
#endif

namespace {

std::string python() {
  const char* chosen = std::getenv("TAPELESS_PYTHON");
  return chosen ? chosen : "python3";
}

// Runs a shell command and returns its exit code.
int run(const std::string& command) {
  std::cout << "$ " << command << std::endl;
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string script(const char* name) { return python() + " '" + std::string(TAPELESS_PYTHON_TESTS_DIR) + "/" + name + "'"; }

template <class T>
std::string bits_json(std::span<const T> values) {
  using bits_type = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  std::string out = "[";
  char hex[24];
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::snprintf(hex, sizeof hex, "\"%0*llx\"", int(2 * sizeof(T)), (unsigned long long)std::bit_cast<bits_type>(values[i]));
    out += (i ? "," : "") + std::string(hex);
  }
  return out + "]";
}

std::string shape_json(const std::vector<std::size_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string quoted(const std::string& text) {
  std::string out;
  tl::detail::json::append_string(out, text);
  return out;
}

TEST(Python, ReadsTapelessSafetensorsByHand) {
  tl_test::scratch_directory dir;
  const std::vector<float> w{-0.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(), 0.1f, 1, 2};
  const std::vector<double> b{1e-310, -1e300, 1.0 / 3}, scalar{42}, nothing;
  const std::vector<float> one{3.25f};
  const std::vector<tl::tensor_view> tensors{{"layer.0.w", w, {2, 3}}, {"b", b, {3}},          {"scalar", scalar, {}},
                                             {"ünïcode \"q\"", one, {1, 1}}, {"empty", nothing, {0, 4}}};
  const std::map<std::string, std::string> metadata{{"format", "tapeless"}, {"escapes", "tab\t nl\n \\ \x01 é"}};
  tl::save_safetensors(dir / "model.safetensors", tensors, metadata);

  const auto expect = [&](const std::vector<double>& b_values) {
    std::string json = "{\"metadata\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) json += (first ? "" : ",") + quoted(k) + ":" + quoted(v), first = false;
    json += "},\"tensors\":{";
    first = true;
    for (const auto& t : tensors) {
      json += (first ? "" : ",") + quoted(t.name) + ":{\"dtype\":\"" + std::string(tl::dtype_name(t.type)) +
              "\",\"shape\":" + shape_json(t.shape) + ",\"bits\":";
      json += t.type == tl::dtype::f32 ? bits_json(std::span(reinterpret_cast<const float*>(t.bytes.data()), t.bytes.size() / 4))
                                       : bits_json<double>(t.name == "b" ? std::span<const double>(b_values)
                                                                         : std::span(reinterpret_cast<const double*>(t.bytes.data()), t.bytes.size() / 8));
      json += "}";
      first = false;
    }
    tl_test::write_bytes(dir / "expect.json", json + "}}");
  };
  expect(b);
  const std::string command = script("read_safetensors.py") + " '" + (dir / "model.safetensors").string() + "' --expect '" +
                              (dir / "expect.json").string() + "'";
  EXPECT_EQ(run(command), 0);
  // The checker must notice a difference of one bit (otherwise the line above proves nothing).
  expect({b[0], b[1], std::nextafter(b[2], 1.0)});
  EXPECT_EQ(run(command), 1);
}

TEST(Python, NumpyLoadsTapelessNpy) {
  tl_test::scratch_directory dir;
  tl::matrix m32(3, 2, std::vector<float>{-0.0f, 1e-45f, 3.4e38f, 0.1f, 1, 2});
  tl::basic_matrix<double> m64(2, 3, std::vector<double>{1e-310, -1e300, 1.0 / 3, 4, 5, 6});
  const auto check = [&](const auto& m, tl::npy_layout layout, const std::vector<std::size_t>& shape, const auto& c_order) {
    using T = typename std::decay_t<decltype(m)>::value_type;
    tl::save_npy(dir / "t.npy", m, layout);
    tl_test::write_bytes(dir / "expect.json", std::string("{\"dtype\":\"") + (sizeof(T) == 4 ? "<f4" : "<f8") +
                                                  "\",\"shape\":" + shape_json(shape) + ",\"bits\":" +
                                                  bits_json(std::span<const T>(c_order)) + "}");
    EXPECT_EQ(run(script("read_npy_check.py") + " check '" + (dir / "t.npy").string() + "' '" + (dir / "expect.json").string() + "'"), 0);
  };
  check(m32, tl::npy_layout::samples_by_features, {2, 3}, std::vector<float>(m32.values().begin(), m32.values().end()));
  check(m32, tl::npy_layout::features_by_samples, {3, 2}, std::vector<float>{-0.0f, 0.1f, 1e-45f, 1, 3.4e38f, 2});
  check(m64, tl::npy_layout::samples_by_features, {3, 2}, std::vector<double>(m64.values().begin(), m64.values().end()));
  check(m64, tl::npy_layout::features_by_samples, {2, 3}, std::vector<double>{1e-310, 1.0 / 3, 5, -1e300, 4, 6});
}

TEST(Python, TapelessLoadsNumpyNpy) {
  tl_test::scratch_directory dir;
  ASSERT_EQ(run(script("read_npy_check.py") + " write '" + dir.path().string() + "'"), 0);
  const std::string text = tl_test::read_bytes(dir / "expect.json");
  const auto expected = tl::detail::json::reader(text, dir / "expect.json", "expect.json").parse_document();
  ASSERT_EQ(expected.keys.size(), 11u);
  for (std::size_t i = 0; i < expected.keys.size(); ++i) {
    const auto file = dir / expected.keys[i];
    const auto& entry = expected.items[i];
    SCOPED_TRACE(file.string());
    if (entry.keys[0] == "reject") {
      tl_test::expect_failure<tl::io_error>([&] { (void)tl::load_npy<double>(file, tl::npy_layout::samples_by_features); },
                                            {file.string(), entry.items[0].text});
      continue;
    }
    const bool f32 = entry.items[0].text == "<f4" || entry.items[0].text == "<f2";  // float16: float's bits
    const auto& shape = entry.items[1].items;
    const std::size_t batch = shape[0].integer, features = shape.size() == 2 ? shape[1].integer : 1;
    std::string want;
    for (const auto& bits : entry.items[2].items) want += bits.text;
    const auto wide = tl::load_npy<double>(file, tl::npy_layout::samples_by_features);  // float16/32 widen exactly
    ASSERT_EQ(wide.features(), features);
    ASSERT_EQ(wide.batch(), batch);
    std::string got;
    if (f32) {
      const auto m = tl::load_npy<float>(file, tl::npy_layout::samples_by_features);
      got = bits_json<float>(m.values());
      for (std::size_t k = 0; k < m.size(); ++k) EXPECT_EQ(wide.data()[k], double(m.data()[k]));
    } else {
      got = bits_json<double>(wide.values());
    }
    std::string got_digits;
    for (const char c : got) if (std::isxdigit(static_cast<unsigned char>(c))) got_digits += c;
    EXPECT_EQ(got_digits, want);
  }
}


// A model's checkpoint read from Python: numpy's forward pass from the state_dict names
// equals tapeless' outputs; where torch is installed (the GPU machine),
// nn.Sequential.load_state_dict(strict=True) takes it and computes the same outputs.
template <class T>
void python_reads_checkpoint() {
  const auto model = tl::chain(tl::dense<2, 8>(tl::gelu), tl::skip(tl::dense<8, 8>(tl::tanh), tl::dense<8, 8>()),
                               tl::layer_norm<8>(), tl::dense<8, 3>());
  tl::rng gen(5);
  auto params = tl::init<T>(model, gen);
  for (T& v : tl::flat(params)) v += T(0.1) * T(gen.uniform(-1, 1));
  tl::basic_matrix<T> x(2, 50);
  for (T& v : x.values()) v = T(gen.uniform(-2, 2));
  const auto yhat = tl::apply(model, params, x);
  tl_test::scratch_directory dir;
  tl::train_state state(model, params, tl::adam{0.01});
  tl::save(dir / "model.safetensors", state);  // optimizer tensors included: torch must ignore them
  tl::save_npy(dir / "x.npy", x, tl::npy_layout::samples_by_features);
  tl::save_npy(dir / "yhat.npy", yhat, tl::npy_layout::samples_by_features);
  tl_test::write_bytes(dir / "arch.json",
                       R"([["linear", 2, 8], ["gelu_tanh"], ["skip", [["linear", 8, 8], ["tanh"], ["linear", 8, 8]]],)"
                       R"( ["layer_norm", 8], ["linear", 8, 3]])");
  EXPECT_EQ(run(script("check_checkpoint.py") + " '" + (dir / "model.safetensors").string() + "' '" +
                (dir / "arch.json").string() + "' '" + (dir / "x.npy").string() + "' '" + (dir / "yhat.npy").string() +
                "'"),
            0);
}
TEST(Python, ReadsAModelCheckpointFloat) { python_reads_checkpoint<float>(); }
TEST(Python, ReadsAModelCheckpointDouble) { python_reads_checkpoint<double>(); }

}  // namespace

int main(int argc, char** argv) {
  if (run(python() + " -c 'import numpy' >/dev/null 2>&1") != 0) {
    std::cout << "SKIP: " << python() << " cannot import numpy (pip install numpy, or set TAPELESS_PYTHON); "
              << "the Python interop checks did not run" << std::endl;
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
