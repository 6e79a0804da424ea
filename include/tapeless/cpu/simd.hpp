// The host's vector registers, for the blocked dense pass (cpu/register_tile.hpp): a
// GCC/Clang vector type as wide as the instruction set this translation unit is
// compiled for, and how many of those registers a micro-kernel may fill. Vector
// types, not intrinsics: the same code is AVX-512, AVX2, SSE2 or NEON, and g++'s
// code for them is checked in docs/performance.md. Never wider than the target:
// a 64-byte vector without AVX-512 would be split and spilled, and would change the
// calling convention of functions taking it (-Wpsabi).
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <utility>

#include "tapeless/core/config.hpp"

// Unrolls the loop that follows, n times: the micro-kernel's loops over its tile must
// be unrolled completely for its accumulators to live in registers. nvcc, compiling a
// .cu file that includes the CPU headers, knows no such pragma (and drops it from the
// host code it hands to g++), so there the macro is empty.
#if defined(__NVCC__)
#define TL_UNROLL(n)
#else
#define TL_PRAGMA(text) _Pragma(#text)
#define TL_UNROLL(n) TL_PRAGMA(GCC unroll n)
#endif

namespace tl::detail::simd {

#if defined(__AVX512F__)
inline constexpr std::size_t vector_bytes = 64, vector_registers = 32;
#elif defined(__AVX__)
inline constexpr std::size_t vector_bytes = 32, vector_registers = 16;
#else
inline constexpr std::size_t vector_bytes = 16, vector_registers = 16;  // SSE2, NEON (32 there; 16 is safe)
#endif

// (A typedef in a class: an alias template would drop the attribute on a dependent type.)
template <class T>
struct vector_of {
  typedef T type __attribute__((vector_size(vector_bytes)));
};
template <class T>
using vec = typename vector_of<T>::type;
template <class T>
inline constexpr std::size_t lanes = vector_bytes / sizeof(T);

// Unaligned loads and stores: memcpy is what g++ turns into one vector move.
template <class T>
TL_INLINE vec<T> load(const T* p) {
  vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
TL_INLINE void store(T* p, const vec<T>& v) {
  std::memcpy(p, &v, sizeof v);
}

// The register tile of the micro-kernel: tile_rows x tile_vectors accumulators, two
// vectors of B loaded per step and one broadcast, all in registers (AVX-512: 8 x 2 of
// 32, measured best of 8x2, 12x2, 14x2 and 6x4 on a 256^3 product; 16 registers: 6 x 2).
inline constexpr std::size_t tile_vectors = 2;
inline constexpr std::size_t tile_rows = vector_registers >= 32 ? 8 : 6;

constexpr std::size_t round_up(std::size_t n, std::size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Values between the starts of two rows of `width` values: whole vectors, plus one
// when that makes an even number of 64-byte lines of 8 or more. A product walks down
// a column of rows; at a power-of-two stride (a 1024-wide layer: 4 KB) every row
// falls in the same L1 set, and a 12-way L1 keeps 12 of a chunk's 256 rows (measured:
// the 1024-wide weight gradient ran at half the speed of the 256-wide one).
template <class T>
constexpr std::size_t row_stride(std::size_t width) {
  const std::size_t stride = round_up(width, lanes<T>), line_values = 64 / sizeof(T);
  const std::size_t lines = (stride + line_values - 1) / line_values;
  return lines >= 8 && lines % 2 == 0 ? stride + lanes<T> : stride;
}

// Zeroed memory on a cache-line boundary, so that rows padded to whole vectors start
// on one (std::vector guarantees only the type's own alignment).
template <class T>
class aligned_buffer {
 public:
  aligned_buffer() = default;
  explicit aligned_buffer(std::size_t n)
      : data_(static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64}))), size_(n) {
    std::memset(static_cast<void*>(data_), 0, n * sizeof(T));
  }
  aligned_buffer(aligned_buffer&& other) noexcept : data_(other.data_), size_(other.size_) { other.data_ = nullptr; }
  aligned_buffer& operator=(aligned_buffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~aligned_buffer() {
    if (data_) ::operator delete(data_, std::align_val_t{64});
  }
  T* data() { return data_; }
  std::size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace tl::detail::simd
