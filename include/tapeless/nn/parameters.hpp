// A model's trainable parameters as one flat, contiguous vector in a fixed order:
// each layer's block in turn, laid out as the layer declares (nn/layer.hpp). float
// by default; tl::init<double>(model, rng) trains in float64.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "tapeless/core/errors.hpp"
#include "tapeless/nn/chain.hpp"
#include "tapeless/nn/rng.hpp"

namespace tl {

template <model Model, class T = float>
class parameters {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "tapeless::parameters: the scalar type must be float or double");
  static_assert(std::is_same_v<Model, std::remove_cvref_t<Model>>,
                "tapeless::parameters<Model>: name the model type without const or & "
                "(std::remove_cvref_t<decltype(model)>)");

 public:
  using model_type = Model;
  using value_type = T;
  static constexpr std::size_t size = Model::parameter_count;

  parameters() : values_(size, T(0)) {}
  explicit parameters(std::vector<T> values) : values_(std::move(values)) {
    detail::require_size("parameters", "the number of values", size, values_.size());
  }

  std::span<T, size> flat() { return std::span<T, size>(values_.data(), size); }
  std::span<const T, size> flat() const { return std::span<const T, size>(values_.data(), size); }
  T* data() { return values_.data(); }
  const T* data() const { return values_.data(); }
  // Value i of the flat order (unchecked, as std::vector's; flat() is the span).
  T& operator[](std::size_t i) { return values_[i]; }
  const T& operator[](std::size_t i) const { return values_[i]; }

  friend bool operator==(const parameters&, const parameters&) = default;

 private:
  std::vector<T> values_;
};

template <model Model, class T>
std::span<T, Model::parameter_count> flat(parameters<Model, T>& p) { return p.flat(); }
template <model Model, class T>
std::span<const T, Model::parameter_count> flat(const parameters<Model, T>& p) { return p.flat(); }

// Each layer initialises its own block, in the flat order, from one generator: the
// same seed gives the same parameters on every compiler, flag set and machine.
template <class T = float, model Model>
parameters<Model, T> init(const Model& model, rng& generator) {
  parameters<Model, T> p;
  model.init(p.data(), generator);
  return p;
}

}  // namespace tl
