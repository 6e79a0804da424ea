// A small seeded generator whose streams are identical on every compiler and
// standard library (std::uniform_real_distribution is not): xoshiro128+ for floats,
// seeded through splitmix64.
#pragma once

#include <cmath>
#include <cstdint>

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
