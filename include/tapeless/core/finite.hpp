// Finding NaN and infinities among host values: the loaders name the element of a file
// that holds one (io/), the CPU's steps and the GPU's fit the sample of x or y when a
// step fails (cpu/train.hpp, cuda/train.hpp; the GPU finds the element on the device).
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <string>

namespace tl::detail {

// The index of the first NaN or infinity in `values`.
template <class T>
std::optional<std::size_t> first_non_finite(std::span<const T> values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return std::nullopt;
}

// " (x holds NaN at feature 0 of sample 7)": element `index` of a batch of `features`
// values a sample, named `batch` (x or y), is `value`, not finite. Both backends'
// failed-step messages end with it.
inline std::string non_finite_sample(const char* batch, double value, std::size_t index, std::size_t features) {
  return std::string(" (") + batch + " holds " + (std::isnan(value) ? "NaN" : "an infinity") + " at feature " +
         std::to_string(index % features) + " of sample " + std::to_string(index / features) + ")";
}

// " (the parameters hold NaN at parameter 12 ...)": a step failed on finite data
// because an earlier update had already written a NaN or an infinity (a learning rate
// too large for the model, or for float). Both backends' failed-step messages end with
// it when x and y are finite.
// Before the state's first step the parameters are the initial ones (`initial`).
inline std::string non_finite_parameter(double value, std::size_t index, bool initial) {
  return std::string(" (the ") + (initial ? "initial " : "") + "parameters hold " +
         (std::isnan(value) ? "NaN" : "an infinity") + " at parameter " + std::to_string(index) +
         (initial ? ")" : ", written by an earlier update: a learning rate too large for the model?)");
}

}  // namespace tl::detail
