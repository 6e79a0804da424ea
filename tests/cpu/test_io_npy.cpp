// .npy: round trips in both layouts, float32 widening, versions 2.0/3.0, and every
// malformed header or size the loader must reject without changing the caller's matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../support/io_files.hpp"
#include "tapeless/io/npy.hpp"

namespace {

using tl_test::expect_failure;

template <class T>
tl::basic_matrix<T> counting_matrix(std::size_t features, std::size_t batch) {
  tl::basic_matrix<T> m(features, batch);
  for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = T(i) * T(0.25) - T(1) / T(3);
  if (m.size() > 2) m.data()[1] = std::numeric_limits<T>::denorm_min(), m.data()[2] = T(-0.0);
  return m;
}

template <class T>
bool same_bits(const tl::basic_matrix<T>& a, const tl::basic_matrix<T>& b) {
  return a.features() == b.features() && a.batch() == b.batch() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class T>
void round_trip(std::size_t features, std::size_t batch) {
  tl_test::scratch_directory dir;
  for (const auto layout : {tl::npy_layout::samples_by_features, tl::npy_layout::features_by_samples}) {
    SCOPED_TRACE(std::to_string(features) + "x" + std::to_string(batch) + " layout " + std::to_string(int(layout)));
    const auto m = counting_matrix<T>(features, batch);
    tl::save_npy(dir / "m.npy", m, layout);
    EXPECT_TRUE(same_bits(tl::load_npy<T>(dir / "m.npy", layout), m));
    EXPECT_EQ(tl_test::read_bytes(dir / "m.npy").size() % 64, (m.size() * sizeof(T)) % 64);  // 64-byte aligned data
  }
}

TEST(Npy, RoundTripsFloatAndDoubleInBothLayouts) {
  for (const auto& [f, b] : {std::pair{1, 1}, {3, 5}, {7, 2}, {0, 4}, {4, 0}, {1, 9}}) {
    round_trip<float>(f, b);
    round_trip<double>(f, b);
  }
}

// The bytes of a .npy file: magic, version, little-endian header length, header text.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  header.append((64 - (major == 1 ? 10 : 12) - (header.size() + 1) % 64 + 64) % 64, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + char(major) + '\0';
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out += char((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

TEST(Npy, LayoutsMapAxesAsDocumented) {
  tl_test::scratch_directory dir;
  const std::vector<float> values{0, 1, 2, 3, 4, 5};  // shape (2, 3), row-major
  tl_test::write_bytes(dir / "a.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                               tl_test::bytes_of(values)));
  const auto rows = tl::load_npy<float>(dir / "a.npy", tl::npy_layout::samples_by_features);
  EXPECT_EQ(rows, tl::matrix(3, 2, std::vector<float>{0, 1, 2, 3, 4, 5}));  // 2 samples of 3 features
  const auto columns = tl::load_npy<float>(dir / "a.npy", tl::npy_layout::features_by_samples);
  EXPECT_EQ(columns, tl::matrix(2, 3, std::vector<float>{0, 3, 1, 4, 2, 5}));  // 3 samples of 2 features
  // A 1-D array is n samples of one feature in either layout; "shape" may come first, in double quotes.
  tl_test::write_bytes(dir / "v.npy", npy_bytes("{\"shape\": (6,), 'fortran_order': False, 'descr': '<f4'}",
                                               tl_test::bytes_of(values), 3));
  for (const auto layout : {tl::npy_layout::samples_by_features, tl::npy_layout::features_by_samples}) {
    EXPECT_EQ(tl::load_npy<float>(dir / "v.npy", layout), tl::matrix(1, 6, values));
  }
}

TEST(Npy, WidensFloat32ExactlyAndRefusesToNarrowFloat64) {
  tl_test::scratch_directory dir;
  const auto m = counting_matrix<float>(3, 4);
  tl::save_npy(dir / "f4.npy", m, tl::npy_layout::samples_by_features);
  const auto wide = tl::load_npy<double>(dir / "f4.npy", tl::npy_layout::samples_by_features);
  for (std::size_t i = 0; i < m.size(); ++i) EXPECT_EQ(wide.data()[i], double(m.data()[i]));
  tl::save_npy(dir / "f8.npy", wide, tl::npy_layout::samples_by_features);
  expect_failure<tl::io_error>([&] { (void)tl::load_npy<float>(dir / "f8.npy", tl::npy_layout::samples_by_features); },
                               {"f8.npy", "holds float64 ('<f8') data", "load_npy<double>"});
  const std::vector<double> v{1.5, -2.5};
  tl_test::write_bytes(dir / "v2.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
                                                tl_test::bytes_of(v), 2));
  EXPECT_EQ(tl::load_npy<double>(dir / "v2.npy", tl::npy_layout::samples_by_features), tl::basic_matrix<double>(1, 2, v));
}

// float16 ('<f2', numpy's half) widens exactly into float or double, in either layout;
// a NaN or infinity in it is refused like any other.
TEST(Npy, Float16WidensExactly) {
  tl_test::scratch_directory dir;
  const std::vector<std::uint16_t> halves{0x3c00, 0xc100, 0x0001, 0x7bff, 0x8000, 0x3555};  // shape (2, 3)
  const std::vector<float> values{1.0f, -2.5f, 0x1p-24f, 65504.0f, -0.0f, 0.333251953125f};
  tl_test::write_bytes(dir / "h.npy", npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }",
                                               tl_test::bytes_of(halves)));
  EXPECT_EQ(tl::load_npy<float>(dir / "h.npy", tl::npy_layout::samples_by_features), tl::matrix(3, 2, values));
  const auto columns = tl::load_npy<double>(dir / "h.npy", tl::npy_layout::features_by_samples);
  EXPECT_EQ(columns, tl::basic_matrix<double>(2, 3, std::vector<double>{1.0, 65504.0, -2.5, -0.0, 0x1p-24, 0.333251953125}));
  EXPECT_TRUE(std::signbit(columns.data()[3]));
  const std::vector<std::uint16_t> with_nan{0x3c00, 0x7e00};
  tl_test::write_bytes(dir / "n.npy", npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",
                                               tl_test::bytes_of(with_nan)));
  expect_failure<tl::io_error>([&] { (void)tl::load_npy<float>(dir / "n.npy", tl::npy_layout::samples_by_features); },
                               {"n.npy", "holds a NaN or infinity at element 1"});
}

TEST(Npy, RejectsMalformedFilesAndLeavesTheDestinationUnchanged) {
  tl_test::scratch_directory dir;
  const auto file = dir / "bad.npy";
  const std::string six(24, '\0');  // six float32 zeros
  const auto dict = [](const std::string& descr, const std::string& order, const std::string& shape) {
    return "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
  };
  const std::string good = dict("<f4", "False", "(2, 3)");
  std::string no_newline = npy_bytes(good, six);
  no_newline[no_newline.size() - 25] = ' ';
  std::string long_header = npy_bytes(good, six);
  long_header[8] = char(0xff), long_header[9] = char(0xff);
  const std::pair<std::string, std::string> cases[] = {
      {"", "not a .npy file"},
      {"\x93NUMPX" + npy_bytes(good, six).substr(6), "not a .npy file"},
      {std::string("\x93NUMPY\x04\x00\x10\x00", 10) + good, ".npy version 4.0 is not supported"},
      {std::string("\x93NUMPY\x02\x00\x10", 9), "not a .npy file"},
      {long_header, ".npy header length 65535 runs past the end of the file"},
      {npy_bytes(dict("<f4", "True", "(2, 3)"), six), "Fortran order"},
      {npy_bytes(dict(">f4", "False", "(2, 3)"), six), "big-endian data ('>f4')"},
      {npy_bytes(dict("<i4", "False", "(2, 3)"), six), "dtype '<i4' is not supported"},
      {npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }", six), "structured dtypes"},
      {npy_bytes(dict("<f4", "False", "(1, 2, 3)"), six), "the array has 3 dimensions"},
      {npy_bytes(dict("<f4", "False", "()"), std::string(4, '\0')), "the array has 0 dimensions"},
      {npy_bytes(dict("<f4", "False", "(6)"), six), "a 1-D shape is written (n,)"},
      {npy_bytes(dict("<f4", "False", "(2, -3)"), six), "non-negative integers"},
      {npy_bytes(dict("<f4", "False", "(99999999999999999999,)"), six), "a dimension is too large"},
      {npy_bytes("{'descr': '<f4', 'shape': (2, 3), }", six), "needs 'descr', 'fortran_order' and 'shape'"},
      {npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", six), "'descr' appears twice"},
      {npy_bytes(good.substr(0, good.size() - 1) + "'x': 1, }", six), "unknown key 'x'"},
      {npy_bytes("{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }", six), "expected ',' or '}'"},
      {no_newline, "must end with spaces and one '\\n'"},
      {npy_bytes(good, six.substr(0, 23)), "truncated: the shape needs 24 bytes, the file has 23"},
      {npy_bytes(good, six + "x"), "1 byte of trailing data"},
      // A huge shape is refused by arithmetic on the header, before anything is allocated.
      {npy_bytes(dict("<f4", "False", "(4294967296, 4294967296)"), six), "more elements than fit in memory"},
      {npy_bytes(dict("<f4", "False", "(1000000000, 1000)"), six), "truncated: the shape needs 4000000000000 bytes"},
  };
  const auto sentinel = counting_matrix<float>(2, 2);
  for (const auto& [bytes, problem] : cases) {
    tl_test::write_bytes(file, bytes);
    tl::matrix destination = sentinel;
    expect_failure<tl::io_error>([&] { destination = tl::load_npy<float>(file, tl::npy_layout::samples_by_features); },
                                 {file.string(), problem});
    EXPECT_EQ(destination, sentinel);
  }
}

TEST(Npy, RejectsNonFiniteValuesUnlessAllowed) {
  tl_test::scratch_directory dir;
  tl::matrix m(2, 2, std::vector<float>{1, 2, std::numeric_limits<float>::infinity(), 4});
  tl::save_npy(dir / "inf.npy", m, tl::npy_layout::samples_by_features);
  expect_failure<tl::io_error>([&] { (void)tl::load_npy<float>(dir / "inf.npy", tl::npy_layout::samples_by_features); },
                               {"inf.npy", "NaN or infinity at element 2 of the matrix (feature 0, sample 1)"});
  EXPECT_EQ(tl::load_npy<float>(dir / "inf.npy", tl::npy_layout::samples_by_features, tl::non_finite_values::allow), m);
}

TEST(Npy, AFailedSaveKeepsThePreviousFile) {
  tl_test::scratch_directory dir;
  const auto file = dir / "x.npy";
  tl::save_npy(file, counting_matrix<double>(2, 3), tl::npy_layout::samples_by_features);
  const std::string before = tl_test::read_bytes(file);
  const tl::detail::write_fault fail_sync = [](tl::detail::write_step s) { return s == tl::detail::write_step::sync; };
  expect_failure<tl::io_error>(
      [&] { tl::detail::save_npy(file, counting_matrix<double>(5, 5), tl::npy_layout::features_by_samples, fail_sync); },
      {file.string(), "fsync failed"});
  EXPECT_EQ(tl_test::read_bytes(file), before);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"x.npy"});
}

}  // namespace
