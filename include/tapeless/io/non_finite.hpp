// Whether a loader accepts NaN and infinities. Rejecting them is the default: a NaN in a
// data set or checkpoint almost always means a broken file, and it would otherwise
// surface much later as a NaN loss.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>
#include <optional>
#include <span>

#include "tapeless/core/finite.hpp"  // first_non_finite, for values in memory

namespace tl {

enum class non_finite_values { reject, allow };

namespace detail {

// The index of the first NaN or infinity among `count` values of type T stored (possibly
// unaligned) in `bytes`.
template <class T>
std::optional<std::size_t> first_non_finite_in_bytes(std::span<const std::byte> bytes) {
  const std::size_t count = bytes.size() / sizeof(T);
  for (std::size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
    if (!std::isfinite(value)) return i;
  }
  return std::nullopt;
}

}  // namespace detail
}  // namespace tl
