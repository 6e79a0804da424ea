// A small seeded generator whose streams are identical on every compiler and
// standard library (std::uniform_real_distribution is not): xoshiro128+ for floats,
// seeded through splitmix64.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "tapeless/core/config.hpp"

namespace tl {

class rng {
 public:
  TL_HD explicit rng(std::uint64_t seed = 0) {
    for (auto& word : state_) {
      seed += 0x9E3779B97F4A7C15ull;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      word = static_cast<std::uint32_t>((z ^ (z >> 31)) >> 16);
    }
  }

  TL_HD std::uint32_t next_u32() {
    const std::uint32_t result = state_[0] + state_[3];
    const std::uint32_t t = state_[1] << 9;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = (state_[3] << 11) | (state_[3] >> 21);
    return result;
  }

  // A UniformRandomBitGenerator, for the standard library's algorithms (std::shuffle's
  // order then depends on the library; permutation() below does not).
  using result_type = std::uint32_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return 0xFFFFFFFFu; }
  TL_HD result_type operator()() { return next_u32(); }

  // Uniform in [0, n), unbiased (n > 0; 0 for n = 0): Lemire's multiply-shift with
  // rejection while n fits 32 bits, else a 64-bit draw rejected past the last whole
  // multiple of n.
  std::uint64_t below(std::uint64_t n) {
    if (n <= 0xFFFFFFFFull) {
      const auto n32 = static_cast<std::uint32_t>(n);
      std::uint64_t m = std::uint64_t(next_u32()) * n32;
      if (static_cast<std::uint32_t>(m) < n32) {
        const std::uint32_t threshold = static_cast<std::uint32_t>(-n32) % n32;
        while (static_cast<std::uint32_t>(m) < threshold) m = std::uint64_t(next_u32()) * n32;
      }
      return m >> 32;
    }
    const std::uint64_t limit = ~std::uint64_t{0} - ~std::uint64_t{0} % n;
    std::uint64_t r;
    do {
      const std::uint64_t high = next_u32();  // sequenced: the operands of | are not
      r = (high << 32) | next_u32();
    } while (r >= limit);
    return r % n;
  }

  // 0 .. n-1 in a uniformly random order (Fisher-Yates), the same on every platform:
  // a shuffled mini-batch order, x.samples(...) of its slices.
  std::vector<std::size_t> permutation(std::size_t n) {
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[below(i)]);
    return order;
  }

  // Uniform in [0, 1), 24 random bits.
  TL_HD float uniform() { return static_cast<float>(next_u32() >> 8) * 0x1p-24f; }
  // In double, (high - low) * u is exact (24-bit factors), so whether the compiler
  // fuses the multiply-add or not, the one rounding to float is the same everywhere.
  TL_HD float uniform(float low, float high) {
    return static_cast<float>(double(low) + (double(high) - double(low)) * double(uniform()));
  }

  // Uniform in [-1, 1) with 24 random bits, exact in float and double: (2n - 2^24) / 2^24.
  template <class T>
  TL_HD T symmetric() {
    const std::int32_t n = static_cast<std::int32_t>(next_u32() >> 8);
    return static_cast<T>(2 * n - (1 << 24)) * static_cast<T>(0x1p-24);
  }

  // Standard normal, Box-Muller in double for accuracy.
  TL_HD double normal() {
    const double u1 = (static_cast<double>(next_u32() >> 8) + 1.0) * 0x1p-24;  // (0, 1]
    const double u2 = static_cast<double>(next_u32() >> 8) * 0x1p-24;
    return ::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586 * u2);
  }

 private:
  std::uint32_t state_[4];
};

}  // namespace tl
