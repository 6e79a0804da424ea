// Tensor element types as safetensors names them, and the floating-point ones tapeless
// reads into float or double parameters: F32 and F64, and the half-width F16 (IEEE
// binary16, PyTorch's `model.half()`) and BF16 (bfloat16), which widen to float
// exactly, so a checkpoint saved in half precision loads without rounding anything.
// Nothing narrows: F64 into float would round, and is refused by the loaders.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <span>
#include <stdexcept>
#include <string_view>
#include <type_traits>

#include "tapeless/io/host_floats.hpp"

namespace tl {

// The safetensors spec's dtypes of whole bytes, the two tapeless computes in first. (The
// sub-byte F4, F6_E2M3 and F6_E3M2 are refused by name.)
enum class dtype {
  f32, f64, f16, bf16, f8_e4m3, f8_e5m2, f8_e4m3fnuz, f8_e5m2fnuz, f8_e8m0, c64,
  i64, i32, i16, i8, u64, u32, u16, u8, boolean
};

namespace detail {
struct dtype_entry {
  dtype type;
  std::string_view name;
  std::size_t size;
};
inline constexpr dtype_entry dtype_table[] = {
    {dtype::f32, "F32", 4},         {dtype::f64, "F64", 8},         {dtype::f16, "F16", 2},
    {dtype::bf16, "BF16", 2},       {dtype::f8_e4m3, "F8_E4M3", 1}, {dtype::f8_e5m2, "F8_E5M2", 1},
    {dtype::f8_e4m3fnuz, "F8_E4M3FNUZ", 1}, {dtype::f8_e5m2fnuz, "F8_E5M2FNUZ", 1},
    {dtype::f8_e8m0, "F8_E8M0", 1}, {dtype::c64, "C64", 8},         {dtype::i64, "I64", 8},
    {dtype::i32, "I32", 4},         {dtype::i16, "I16", 2},         {dtype::i8, "I8", 1},
    {dtype::u64, "U64", 8},         {dtype::u32, "U32", 4},         {dtype::u16, "U16", 2},
    {dtype::u8, "U8", 1},           {dtype::boolean, "BOOL", 1}};
constexpr const dtype_entry& dtype_entry_of(dtype type) {
  const auto index = static_cast<std::size_t>(type);
  if (index >= std::size(dtype_table)) throw std::invalid_argument("tapeless: not a tl::dtype value");
  return dtype_table[index];
}
static_assert([] {
  for (std::size_t i = 0; i < std::size(dtype_table); ++i)
    if (static_cast<std::size_t>(dtype_table[i].type) != i) return false;
  return true;
}(), "dtype_table lists the dtypes in the enum's order");
}  // namespace detail

constexpr std::size_t dtype_size(dtype type) { return detail::dtype_entry_of(type).size; }
constexpr std::string_view dtype_name(dtype type) { return detail::dtype_entry_of(type).name; }

template <class T>
  requires std::is_same_v<T, float> || std::is_same_v<T, double>
inline constexpr dtype dtype_of = std::is_same_v<T, float> ? dtype::f32 : dtype::f64;

namespace detail {
// IEEE binary16 to binary32, exactly: normals and subnormals (renormalized), signed
// zeros, infinities and NaNs (payload kept).
inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: mantissa * 2^-24, normal as a float
    int shift = 0;
    std::uint32_t m = mantissa;
    while ((m & 0x400u) == 0) {
      m <<= 1;
      ++shift;
    }
    bits = sign | (std::uint32_t(113 - shift) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
// bfloat16 is the high half of a binary32.
inline float bfloat16_bits_to_float(std::uint16_t b) {
  const std::uint32_t bits = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The dtypes whose values T holds exactly: F32, F16, BF16, and F64 for double.
template <class T>
constexpr bool widens_exactly_into(dtype type) {
  return type == dtype::f32 || type == dtype::f16 || type == dtype::bf16 ||
         (std::is_same_v<T, double> && type == dtype::f64);
}
template <class T>
constexpr std::string_view readable_dtypes() {
  return std::is_same_v<T, float> ? "F32, F16 or BF16 (float)" : "F64, F32, F16 or BF16 (double)";
}

// Value i of the values of a floating-point dtype stored, possibly unaligned, in bytes.
inline double stored_value(dtype type, const std::byte* bytes, std::size_t i) {
  switch (type) {
    case dtype::f64: {
      double v;
      std::memcpy(&v, bytes + i * 8, 8);
      return v;
    }
    case dtype::f32: {
      float v;
      std::memcpy(&v, bytes + i * 4, 4);
      return v;
    }
    case dtype::f16:
    case dtype::bf16: {
      std::uint16_t h;
      std::memcpy(&h, bytes + i * 2, 2);
      return type == dtype::f16 ? half_bits_to_float(h) : bfloat16_bits_to_float(h);
    }
    default:
      throw std::invalid_argument("tapeless: stored_value of a dtype that is not F64, F32, F16 or BF16");
  }
}

// The values of a tensor of a dtype widens_exactly_into<T> accepts, into out.
template <class T>
void widen_values(dtype type, std::span<const std::byte> bytes, T* out) {
  if (type == dtype_of<T>) {
    if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
    return;
  }
  const std::size_t count = bytes.size() / dtype_size(type);
  for (std::size_t i = 0; i < count; ++i) out[i] = T(stored_value(type, bytes.data(), i));
}

// The index of the first NaN or infinity among the values, if any.
inline std::optional<std::size_t> first_non_finite_stored(dtype type, std::span<const std::byte> bytes) {
  const std::size_t count = bytes.size() / dtype_size(type);
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(stored_value(type, bytes.data(), i))) return i;
  return std::nullopt;
}
}  // namespace detail

}  // namespace tl
