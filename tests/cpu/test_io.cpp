// safetensors and the atomic writer: round trips, the exact bytes of a tiny file, every
// malformed input the loader must reject (each with the file's name and the problem in
// the message), and failed saves that leave the previous file byte-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../support/io_files.hpp"
#include "tapeless/io/safetensors.hpp"

namespace {

using tl_test::expect_failure;
using tl_test::le64;

// The tricky values: signed zero, the smallest subnormal, the largest finite value.
template <class T>
std::vector<T> awkward_values(std::size_t n) {
  std::vector<T> v(n);
  const T specials[] = {T(-0.0), std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::max(),
                        std::numeric_limits<T>::lowest(), T(0.1), T(1) / T(3)};
  for (std::size_t i = 0; i < n; ++i) v[i] = i < 6 ? specials[i] : T(std::sin(double(i)) * 1e3);
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

TEST(Safetensors, RoundTripsFloatAndDoubleOfOddShapes) {
  tl_test::scratch_directory dir;
  const auto file = dir / "mixed.safetensors";
  // Three floats (12 bytes) first put the doubles at an offset that is not 8-aligned.
  const std::vector<float> a = awkward_values<float>(3), c = awkward_values<float>(1);
  const std::vector<double> b = awkward_values<double>(7), d = awkward_values<double>(30), scalar = awkward_values<double>(1);
  const std::vector<float> empty;
  const std::vector<tl::tensor_view> tensors{{"a", a, {3}},       {"b.weight", b, {7, 1}},  {"c", c, {1, 1}},
                                             {"empty", empty, {2, 0, 3}}, {"d", d, {2, 3, 5}}, {"scalar", scalar, {}}};
  const std::map<std::string, std::string> metadata{{"format", "tapeless"}, {"note \"q\" \\ \n\t\x01 é 😀", "ü"}};
  tl::save_safetensors(file, tensors, metadata);

  const tl::safetensors_file loaded = tl::load_safetensors(file);
  EXPECT_EQ(loaded.names(), (std::vector<std::string>{"a", "b.weight", "c", "empty", "d", "scalar"}));
  EXPECT_EQ(loaded.metadata(), metadata);
  EXPECT_TRUE(same_bits(loaded.values<float>("a", {3}), a));
  EXPECT_TRUE(same_bits(loaded.values<double>("b.weight", {7, 1}), b));
  EXPECT_TRUE(same_bits(loaded.values<float>("c", {1, 1}), c));
  EXPECT_TRUE(loaded.values<float>("empty", {2, 0, 3}).empty());
  EXPECT_TRUE(same_bits(loaded.values<double>("d", {2, 3, 5}), d));
  EXPECT_TRUE(same_bits(loaded.values<double>("scalar", {}), scalar));
  EXPECT_EQ(loaded.at("d").type, tl::dtype::f64);
  EXPECT_EQ(loaded.at("d").elements(), 30u);
  EXPECT_EQ(loaded.at("empty").shape, (std::vector<std::size_t>{2, 0, 3}));
  EXPECT_TRUE(loaded.contains("c"));
  EXPECT_FALSE(loaded.contains("z"));

  std::vector<double> into(30, 7.0);
  loaded.copy_to<double>("d", into, {2, 3, 5});
  EXPECT_TRUE(same_bits(into, d));
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"mixed.safetensors"});  // no temporary left behind
}

TEST(Safetensors, NoTensorsIsAValidFile) {
  tl_test::scratch_directory dir;
  tl::save_safetensors(dir / "none.safetensors", std::vector<tl::tensor_view>{});
  EXPECT_EQ(tl_test::read_bytes(dir / "none.safetensors"), le64(8) + "{}      ");
  EXPECT_TRUE(tl::load_safetensors(dir / "none.safetensors").names().empty());
}

// Worked out by hand: {"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} is 54
// bytes, padded with 2 spaces to 56 (0x38) so the data starts 8-byte aligned; then
// 1.0f = 0x3f800000 and -2.0f = 0xc0000000, little-endian.
TEST(Safetensors, WritesTheExactBytesOfATinyFile) {
  tl_test::scratch_directory dir;
  const std::vector<float> w{1.0f, -2.0f};
  tl::save_safetensors(dir / "tiny.safetensors", std::vector<tl::tensor_view>{{"w", w, {2}}});
  const std::string expected = std::string("\x38\0\0\0\0\0\0\0", 8) +
                               R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})" + "  " +
                               std::string("\0\0\x80\x3f\0\0\0\xc0", 8);
  EXPECT_EQ(tl_test::read_bytes(dir / "tiny.safetensors"), expected);
}

// A file from a header text and data bytes; the header length is the text's unless given.
std::filesystem::path raw_file(const tl_test::scratch_directory& dir, const std::string& header, const std::string& data,
                               std::uint64_t length = ~std::uint64_t{0}) {
  const auto file = dir / "bad.safetensors";
  tl_test::write_bytes(file, le64(length == ~std::uint64_t{0} ? header.size() : length) + header + data);
  return file;
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

void expect_rejected(const std::filesystem::path& file, std::initializer_list<std::string_view> problem) {
  const std::string bytes = tl_test::read_bytes(file);
  SCOPED_TRACE(bytes.substr(std::min<std::size_t>(8, bytes.size()), 200));
  expect_failure<tl::io_error>([&] { (void)tl::load_safetensors(file); }, {file.string()});
  expect_failure<tl::io_error>([&] { (void)tl::load_safetensors(file); }, problem);
}

// Text from a file in a message: valid UTF-8 kept, anything else escaped (a log line of
// raw invalid bytes shows as garbage), cut short, never inside a character.
TEST(Messages, ExcerptsEscapeInvalidUtf8AndControlBytes) {
  EXPECT_EQ(tl::detail::quoted_excerpt("w\u00e9ight"), "'w\u00e9ight'");
  EXPECT_EQ(tl::detail::quoted_excerpt("a\xff" "b\xc0\x80" "c\n"), "'a\\xffb\\xc0\\x80c\\x0a'");
  EXPECT_EQ(tl::detail::quoted_excerpt("ab\u00e9", 3), "'ab...'");  // the 2-byte \u00e9 does not fit
  EXPECT_EQ(tl::detail::quoted_excerpt(std::string(50, 'x')), "'" + std::string(40, 'x') + "...'");
}

TEST(Safetensors, RejectsBrokenFramingBeforeAllocating) {
  tl_test::scratch_directory dir;
  const std::string data(8, '\0');
  const std::string good = "{" + entry("w", "F32", "[2]", "[0,8]") + "}";
  tl_test::write_bytes(dir / "short.safetensors", std::string("\x05\0\0\0", 4));
  expect_rejected(dir / "short.safetensors", {"is 4 bytes long", "8-byte header length"});
  expect_rejected(raw_file(dir, good, data, good.size() + 9), {"runs past the end of the file"});
  // A length field claiming gigabytes is refused from the 8 bytes alone.
  expect_rejected(raw_file(dir, good, data, std::uint64_t{1} << 40), {"header length 1099511627776 exceeds the limit"});
  expect_rejected(raw_file(dir, good, data, ~std::uint64_t{0} - 1), {"exceeds the limit"});
  expect_rejected(raw_file(dir, " " + good, data), {"does not start with '{'"});
  expect_rejected(raw_file(dir, "", ""), {"does not start with '{'"});
  expect_rejected(raw_file(dir, good, data + "junk"), {"4 bytes of trailing data after the last tensor"});
  expect_failure<tl::io_error>([&] { (void)tl::load_safetensors(dir / "missing.safetensors"); },
                               {"missing.safetensors", "cannot open for reading", "No such file"});
  expect_failure<tl::io_error>([&] { (void)tl::load_safetensors(dir.path()); }, {dir.path().string(), "not a regular file"});
}

TEST(Safetensors, RejectsJsonSyntaxErrors) {
  tl_test::scratch_directory dir;
  const std::string data(8, '\0');
  const std::string w = entry("w", "F32", "[2]", "[0,8]");
  const std::pair<std::string, std::string> cases[] = {
      {"{" + w + ",}", "expected a string key"},
      {"{" + w, "expected ',' or '}', the text ends"},
      {"{\"w\" {}}", "expected ':'"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,],\"data_offsets\":[0,8]}}", "unexpected character"},
      {"{" + w + "} x", "unexpected data after the end"},
      {"{\"w", "unterminated string"},
      {"{\"w\\q\":1}", "unknown escape"},
      {"{\"\\ud800\":1}", "high surrogate without"},
      {"{\"\\udc00\":1}", "unpaired low surrogate"},
      {"{\"\\u12G4\":1}", "four hex digits"},
      {"{\"a\x01\":1}", "control character"},
      {"{\"\xff\":1}", "invalid UTF-8"},
      {"{\"\xc0\x80\":1}", "invalid UTF-8"},  // overlong NUL
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", "only non-negative integers"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", "negative numbers"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", "leading zeros"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,8]}}", "larger than 2^64 - 1"},
      {"{\"w\":true}", "true, false and null"},
      {"{\"w\":" + std::string(40, '[') + std::string(40, ']') + "}", "nested more than 32 levels"},
  };
  for (const auto& [header, problem] : cases) expect_rejected(raw_file(dir, header, data), {"the header is not valid", problem});
}

TEST(Safetensors, RejectsInconsistentEntries) {
  tl_test::scratch_directory dir;
  const std::string d8(8, '\0'), d16(16, '\0');
  const auto w = [](const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return "{" + entry("w", dtype, shape, offsets) + "}";
  };
  expect_rejected(raw_file(dir, w("F33", "[2]", "[0,8]"), d8), {"tensor 'w'", "dtype 'F33' is not supported", "BF16, F8_E4M3"});
  expect_rejected(raw_file(dir, w("BF16", "[3]", "[0,8]"), d8), {"shape [3] of BF16 needs 6"});
  expect_rejected(raw_file(dir, w("F32", "[3]", "[0,8]"), d8), {"data_offsets [0, 8] hold 8 bytes, shape [3] of F32 needs 12"});
  expect_rejected(raw_file(dir, w("F64", "[2]", "[0,8]"), d8), {"shape [2] of F64 needs 16"});
  expect_rejected(raw_file(dir, w("F32", "[4294967296,4294967296,16]", "[0,8]"), d8), {"more elements than fit in memory"});
  expect_rejected(raw_file(dir, w("F32", "[4]", "[0,16]"), d8), {"data_offsets [0, 16] run past the end of the data (8 bytes)"});
  expect_rejected(raw_file(dir, w("F32", "[2]", "[8,0]"), d8), {"end before they begin"});
  expect_rejected(raw_file(dir, w("F32", "[2]", "[0,8,9]"), d8), {"'data_offsets' must be [begin, end]"});
  expect_rejected(raw_file(dir, w("F32", "\"2\"", "[0,8]"), d8), {"'shape' must be an array"});
  expect_rejected(raw_file(dir, "{\"w\":[1]}", d8), {"tensor 'w': expected an object, found an array"});
  expect_rejected(raw_file(dir, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", d8), {"needs 'dtype', 'shape' and 'data_offsets'"});
  expect_rejected(raw_file(dir, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", d8),
                  {"unknown key 'x'"});
  expect_rejected(raw_file(dir, "{\"__metadata__\":{\"k\":1}}", ""), {"metadata value 'k' must be a string"});
  expect_rejected(raw_file(dir, "{\"__metadata__\":[]}", ""), {"'__metadata__' must be an object"});
  // Two tensors: duplicates, overlaps, gaps. Order in the JSON does not matter, offsets do.
  const std::string a0 = entry("a", "F32", "[2]", "[0,8]"), b8 = entry("b", "F32", "[2]", "[8,16]");
  EXPECT_NO_THROW((void)tl::load_safetensors(raw_file(dir, "{" + b8 + "," + a0 + "}", d16)));
  expect_rejected(raw_file(dir, "{" + a0 + "," + entry("a", "F32", "[2]", "[8,16]") + "}", d16), {"duplicate key 'a'"});
  expect_rejected(raw_file(dir, "{" + a0 + "," + entry("b", "F32", "[3]", "[4,16]") + "}", d16),
                  {"tensor 'b' (bytes [4, 16)) overlaps tensor 'a'"});
  expect_rejected(raw_file(dir, "{" + a0 + "," + entry("b", "F32", "[1]", "[12,16]") + "}", d16),
                  {"data bytes [8, 12) belong to no tensor"});
  expect_rejected(raw_file(dir, "{" + entry("b", "F32", "[2]", "[8,16]") + "}", d16), {"data bytes [0, 8) belong to no tensor"});
}

// F16 (IEEE binary16) and BF16 widen exactly: normals, the extremes, subnormals,
// signed zeros; a NaN or infinity is refused with its index unless allowed.
TEST(Safetensors, HalfPrecisionTensorsWidenExactly) {
  tl_test::scratch_directory dir;
  const std::uint16_t f16[] = {0x3c00, 0xc100, 0x3555, 0x7bff, 0x0001, 0x03ff, 0x0400, 0x8000, 0xfbff};
  const float f16_values[] = {1.0f, -2.5f, 0.333251953125f, 65504.0f, 0x1p-24f, 0x3ffp-24f, 0x1p-14f, -0.0f, -65504.0f};
  const std::uint16_t bf16[] = {0x3f80, 0xc0a0, 0x7f7f, 0x0001, 0x8000, 0x4049};
  const float bf16_values[] = {1.0f, -5.0f, 0x1.fep127f, 0x1p-133f, -0.0f, 3.140625f};
  const auto path = dir / "half.safetensors";
  tl::save_safetensors(path, std::vector<tl::tensor_view>{
                                 {"a", tl::dtype::f16, {9}, std::as_bytes(std::span(f16))},
                                 {"b", tl::dtype::bf16, {2, 3}, std::as_bytes(std::span(bf16))}});
  const tl::safetensors_file file = tl::load_safetensors(path);
  const auto a = file.values<float>("a", {9});
  const auto a64 = file.values<double>("a", {9});
  for (std::size_t i = 0; i < 9; ++i) {
    EXPECT_EQ(a[i], f16_values[i]) << i;
    EXPECT_EQ(std::signbit(a[i]), std::signbit(f16_values[i])) << i;
    EXPECT_EQ(a64[i], double(f16_values[i])) << i;
  }
  const auto b = file.values<float>("b", {2, 3});
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(b[i], bf16_values[i]) << i;
  EXPECT_TRUE(std::signbit(b[4]));
  // Non-finite values: refused with the index, or passed through when allowed.
  const std::uint16_t bad_f16[] = {0x3c00, 0x7c00, 0x7e00};  // 1, +inf, NaN
  const std::uint16_t bad_bf16[] = {0xff80, 0x3f80};         // -inf, 1
  const auto bad = dir / "bad.safetensors";
  tl::save_safetensors(bad, std::vector<tl::tensor_view>{{"a", tl::dtype::f16, {3}, std::as_bytes(std::span(bad_f16))},
                                                         {"b", tl::dtype::bf16, {2}, std::as_bytes(std::span(bad_bf16))}});
  const tl::safetensors_file bad_file = tl::load_safetensors(bad);
  expect_failure<tl::io_error>([&] { (void)bad_file.values<float>("a", {3}); }, {"tensor 'a' holds a NaN or infinity at index 1"});
  expect_failure<tl::io_error>([&] { (void)bad_file.values<double>("b", {2}); }, {"tensor 'b' holds a NaN or infinity at index 0"});
  const auto allowed = bad_file.values<float>("a", {3}, tl::non_finite_values::allow);
  EXPECT_EQ(allowed[1], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(allowed[2]));
}

// A PyTorch state dict saved as safetensors may hold I64 counters (BatchNorm's
// num_batches_tracked) and half-precision tensors beside float32 weights: the file loads,
// the floating-point tensors copy out (widened), and only asking for the others is
// refused, by name.
TEST(Safetensors, EveryDtypeOfTheSpecLoadsAndFloatsCopyOut) {
  tl_test::scratch_directory dir;
  std::string data(2 * 4 + 8 + 4 * 2 + 3, '\0');
  const float w[2] = {1.5f, -2.0f};
  std::memcpy(data.data(), w, sizeof w);
  const std::uint16_t h[4] = {0x3f80, 0xc000, 0x3e20, 0x0000};  // BF16 1, -2, 0.15625, 0
  std::memcpy(data.data() + 16, h, sizeof h);
  const std::string header = "{" + entry("w", "F32", "[2]", "[0,8]") + "," + entry("steps", "I64", "[]", "[8,16]") + "," +
                             entry("h", "BF16", "[2,2]", "[16,24]") + "," + entry("mask", "BOOL", "[3]", "[24,27]") + "}";
  const auto file = raw_file(dir, header, data);
  const tl::safetensors_file loaded = tl::load_safetensors(file);
  EXPECT_EQ(loaded.names(), (std::vector<std::string>{"w", "steps", "h", "mask"}));
  EXPECT_EQ(loaded.at("steps").type, tl::dtype::i64);
  EXPECT_EQ(loaded.at("h").type, tl::dtype::bf16);
  EXPECT_EQ(loaded.at("h").elements(), 4u);
  EXPECT_EQ(loaded.at("mask").type, tl::dtype::boolean);
  EXPECT_EQ(loaded.values<float>("w", {2}), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(loaded.values<float>("h", {2, 2}), (std::vector<float>{1.0f, -2.0f, 0.15625f, 0.0f}));
  EXPECT_EQ(loaded.values<double>("h", {2, 2}), (std::vector<double>{1.0, -2.0, 0.15625, 0.0}));
  expect_failure<tl::io_error>([&] { (void)loaded.values<float>("steps", {}); },
                               {"tensor 'steps' is stored as I64, expected F32, F16 or BF16 (float)"});
  expect_failure<tl::io_error>([&] { (void)loaded.values<double>("mask", {3}); },
                               {"tensor 'mask' is stored as BOOL, expected F64, F32, F16 or BF16 (double)"});
  // F32 widens exactly into double; F64 does not narrow into float (below).
  EXPECT_EQ(loaded.values<double>("w", {2}), (std::vector<double>{1.5, -2.0}));
  // Every whole-byte dtype of the spec, written out here (not read from the library's
  // table): its name, size and enum value all load.
  const std::pair<const char*, std::size_t> spec[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E4M3FNUZ", 1},
      {"F8_E5M2FNUZ", 1}, {"F8_E8M0", 1}, {"C64", 8}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
      {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}};
  for (const auto& [dtype, size] : spec) {
    const auto one = raw_file(dir, "{" + entry("t", dtype, "[3]", "[0," + std::to_string(3 * size) + "]") + "}",
                              std::string(3 * size, '\0'));
    const tl::safetensors_file f = tl::load_safetensors(one);
    EXPECT_EQ(tl::dtype_name(f.at("t").type), dtype);
    EXPECT_EQ(tl::dtype_size(f.at("t").type), size) << dtype;
    EXPECT_EQ(f.at("t").elements(), 3u) << dtype;
  }
  for (const char* sub_byte : {"F4", "F6_E2M3", "F6_E3M2"})
    expect_rejected(raw_file(dir, "{" + entry("t", sub_byte, "[2]", "[0,1]") + "}", std::string(1, '\0')),
                    {"is not supported", "not the sub-byte"});
}

TEST(Safetensors, CopyChecksDtypeShapeAndFinitenessAndLeavesTheDestinationAlone) {
  tl_test::scratch_directory dir;
  const std::vector<float> w{1, 2, 3, 4, 5, 6}, bad{1, std::nanf(""), 3};
  const std::vector<double> b{0.5, 0.25};
  const auto file = dir / "model.safetensors";
  tl::save_safetensors(file, std::vector<tl::tensor_view>{{"w", w, {2, 3}}, {"b", b, {2}}, {"bad", bad, {3}}});
  const auto loaded = tl::load_safetensors(file);
  const std::string name = file.string();
  std::vector<float> out(6, -99.0f);
  const std::vector<float> sentinel = out;
  expect_failure<tl::shape_error>([&] { loaded.copy_to<float>("w", out, {3, 2}); },
                                  {name, "tensor 'w' has shape [2, 3], expected [3, 2]"});
  expect_failure<tl::shape_error>([&] { loaded.copy_to<float>("w", out, {2, 2}); },
                                  {name, "the destination holds 6 values, the expected shape [2, 2] has 4"});
  expect_failure<tl::io_error>([&] { loaded.copy_to<float>("b", std::span(out).first(2), {2}); },
                               {name, "tensor 'b' is stored as F64, expected F32, F16 or BF16 (float)"});
  expect_failure<tl::io_error>([&] { loaded.copy_to<float>("nope", out, {6}); },
                               {name, "has no tensor 'nope' (it holds 3: 'w', 'b', 'bad')"});
  expect_failure<tl::io_error>([&] { loaded.copy_to<float>("bad", std::span(out).first(3), {3}); },
                               {name, "tensor 'bad' holds a NaN or infinity at index 1"});
  expect_failure<tl::io_error>([&] { (void)loaded.values<double>("bad", {3}); },
                               {name, "tensor 'bad' holds a NaN or infinity at index 1"});  // widened, still checked
  EXPECT_EQ(out, sentinel);
  loaded.copy_to<float>("bad", std::span(out).first(3), {3}, tl::non_finite_values::allow);
  EXPECT_TRUE(std::isnan(out[1]));
  expect_failure<tl::shape_error>([&] { (void)loaded.values<double>("b", {1u << 31, 1u << 31, 1u << 31}); },
                                  {"more than fit in memory"});
}

TEST(Safetensors, AFailedLoadLeavesTheCallersFileObjectUnchanged) {
  tl_test::scratch_directory dir;
  const std::vector<float> w{1, 2};
  tl::save_safetensors(dir / "good.safetensors", std::vector<tl::tensor_view>{{"w", w, {2}}});
  tl::safetensors_file held = tl::load_safetensors(dir / "good.safetensors");
  tl_test::write_bytes(dir / "bad.safetensors", le64(3) + "{}x");
  EXPECT_THROW(held = tl::load_safetensors(dir / "bad.safetensors"), tl::io_error);
  EXPECT_EQ(held.values<float>("w", {2}), w);
}

TEST(Safetensors, RejectsTensorsItCannotWriteBeforeTouchingTheDisk) {
  tl_test::scratch_directory dir;
  const auto file = dir / "out.safetensors";
  const std::vector<float> w{1, 2, 3};
  expect_failure<tl::shape_error>([&] { tl::save_safetensors(file, std::vector<tl::tensor_view>{{"w", w, {2, 2}}}); },
                                  {file.string(), "tensor 'w': shape [2, 2] of F32 needs 16 bytes, the data has 12"});
  expect_failure<tl::io_error>(
      [&] { tl::save_safetensors(file, std::vector<tl::tensor_view>{{"w", w, {3}}, {"w", w, {3}}}); },
      {file.string(), "two tensors are named 'w'"});
  expect_failure<tl::io_error>([&] { tl::save_safetensors(file, std::vector<tl::tensor_view>{{"__metadata__", w, {3}}}); },
                               {"'__metadata__' is reserved"});
  expect_failure<tl::io_error>([&] { tl::save_safetensors(file, std::vector<tl::tensor_view>{{"\xff", w, {3}}}); },
                               {"not valid UTF-8"});
  EXPECT_TRUE(dir.listing().empty());
}

// Each step of the atomic write made to fail in turn, by the fault-injection hook.
TEST(AtomicWrite, AFailedSaveKeepsThePreviousFileByteIdentical) {
  tl_test::scratch_directory dir;
  const auto file = dir / "model.safetensors";
  const std::vector<double> old_values{1, 2, 3}, new_values(5000, 4.0);
  tl::save_safetensors(file, std::vector<tl::tensor_view>{{"w", old_values, {3}}});
  const std::string before = tl_test::read_bytes(file);
  using step = tl::detail::write_step;
  for (const auto& [failing, skip, words] : {std::tuple{step::create, 0, "creating the temporary file"},
                                            std::tuple{step::write, 0, "writing failed: No space left"},
                                            std::tuple{step::write, 2, "writing failed"},  // after a partial write
                                            std::tuple{step::sync, 0, "fsync failed"},
                                            std::tuple{step::close, 0, "closing the temporary file failed"},
                                            std::tuple{step::rename, 0, "renaming the temporary file"}}) {
    int calls = 0;
    const tl::detail::write_fault fault = [&, failing = failing, skip = skip](step s) {
      return s == failing && calls++ >= skip;
    };
    expect_failure<tl::io_error>(
        [&] { tl::detail::save_safetensors(file, std::vector<tl::tensor_view>{{"w", new_values, {5000}}}, {}, fault); },
        {file.string(), words, "previous contents, if any, are unchanged"});
    EXPECT_EQ(tl_test::read_bytes(file), before);
    EXPECT_EQ(dir.listing(), std::vector<std::string>{"model.safetensors"});
  }
}

// Real failures of the operating system, not injected ones (these work as root too).
TEST(AtomicWrite, ReportsRealFailuresAndCleansUp) {
  tl_test::scratch_directory dir;
  const std::vector<float> w{1};
  const std::vector<tl::tensor_view> tensors{{"w", w, {1}}};
  expect_failure<tl::io_error>([&] { tl::save_safetensors(dir / "no/such/dir/m.safetensors", tensors); },
                               {"no/such/dir/m.safetensors", "creating the temporary file failed", "No such file"});
  std::filesystem::create_directory(dir / "occupied");  // a directory, /dev/null: never replaced
  tl_test::write_bytes(dir / "occupied" / "keep", "x");
  expect_failure<tl::io_error>([&] { tl::save_safetensors(dir / "occupied", tensors); },
                               {"occupied", "it exists and is not a regular file"});
  expect_failure<tl::io_error>([&] { tl::save_safetensors("/dev/null", tensors); }, {"is not a regular file"});
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"occupied"});
  EXPECT_EQ(tl_test::read_bytes(dir / "occupied" / "keep"), "x");
  // A path that names no file says so (it said "Is a directory" for "").
  expect_failure<tl::io_error>([&] { tl::save_safetensors("", tensors); }, {"cannot save: the path is empty"});
  expect_failure<tl::io_error>([&] { tl::save_safetensors(dir.path() / "sub/", tensors); },
                               {"cannot save: the path names a directory, not a file"});
}

}  // namespace
