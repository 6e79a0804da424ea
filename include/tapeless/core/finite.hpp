// Finding NaN and infinities among host values: the loaders name the element of a file
// that holds one (io/), the CPU step the sample of x or y when a step fails (cpu/train.hpp).
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <span>

namespace tl::detail {

// The index of the first NaN or infinity in `values`.
template <class T>
std::optional<std::size_t> first_non_finite(std::span<const T> values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return std::nullopt;
}

}  // namespace tl::detail
