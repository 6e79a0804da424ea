// A model's trainable parameters as one flat, contiguous float vector in a fixed
// order: layer by layer, weight [out][in] row-major, then bias [out].
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "tapeless/core/errors.hpp"
#include "tapeless/nn/chain.hpp"
#include "tapeless/nn/rng.hpp"

namespace tl {

template <model Model>
class parameters {
 public:
  static constexpr std::size_t size = Model::parameter_count;

  parameters() : values_(size, 0.0f) {}
  explicit parameters(std::vector<float> values) : values_(std::move(values)) {
    detail::require_size("parameters", "the number of values", size, values_.size());
  }

  std::span<float, size> flat() { return std::span<float, size>(values_.data(), size); }
  std::span<const float, size> flat() const { return std::span<const float, size>(values_.data(), size); }
  float* data() { return values_.data(); }
  const float* data() const { return values_.data(); }

  friend bool operator==(const parameters&, const parameters&) = default;

 private:
  std::vector<float> values_;
};

template <model Model>
std::span<float, Model::parameter_count> flat(parameters<Model>& p) { return p.flat(); }
template <model Model>
std::span<const float, Model::parameter_count> flat(const parameters<Model>& p) { return p.flat(); }

// Glorot-uniform weights, U(-a, a) with a = sqrt(6 / (in + out)), and zero biases
// (Lux's Dense defaults), drawn layer by layer in the flat order.
template <class... Layers>
parameters<chain<Layers...>> init(const chain<Layers...>&, rng& generator) {
  using Model = chain<Layers...>;
  parameters<Model> p;
  [&]<std::size_t... L>(std::index_sequence<L...>) {
    (
        [&] {
          using layer = typename Model::template layer_type<L>;
          const float limit = static_cast<float>(std::sqrt(6.0 / double(layer::inputs + layer::outputs)));
          float* w = p.data() + Model::template weight_offset<L>;
          for (std::size_t k = 0; k < layer::weight_count; ++k) w[k] = generator.uniform(-limit, limit);
        }(),
        ...);
  }(std::make_index_sequence<Model::depth>{});
  return p;
}

}  // namespace tl
