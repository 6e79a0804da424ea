// tl::chain(layer, layer, ...): layers applied in order. Its type knows every width,
// so a mismatch is a compile error, and every offset into the flat parameter vector
// is a compile-time constant.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "tapeless/nn/dense.hpp"

namespace tl {

// Named wrappers so that a width mismatch reads plainly in the compiler's message.
template <std::size_t N> struct layer_index : std::integral_constant<std::size_t, N> {};
template <std::size_t N> struct expects_inputs : std::integral_constant<std::size_t, N> {};
template <std::size_t N> struct previous_layer_outputs : std::integral_constant<std::size_t, N> {};

template <class LayerIndex, class ExpectsInputs, class PreviousLayerOutputs>
struct chain_width_check {
  static_assert(ExpectsInputs::value == PreviousLayerOutputs::value,
                "tapeless::chain: layer widths do not match: layer_index<N> (from 0) "
                "expects_inputs<A> but previous_layer_outputs<B>; the numbers are in the line above");
  static constexpr bool ok = ExpectsInputs::value == PreviousLayerOutputs::value;
};

namespace detail {
template <std::size_t I, class Layer>
struct layer_slot {
  [[no_unique_address]] Layer layer;
};
template <class Indices, class... Layers>
struct layer_storage;
template <std::size_t... I, class... Layers>
struct layer_storage<std::index_sequence<I...>, Layers...> : layer_slot<I, Layers>... {};

template <std::size_t I, class Layer>
TL_HD constexpr const Layer& layer_at(const layer_slot<I, Layer>& slot) { return slot.layer; }
template <std::size_t I, class Layer>
Layer layer_type_at(const layer_slot<I, Layer>&);
}  // namespace detail

template <class... Layers>
struct chain {
  static_assert(sizeof...(Layers) > 0, "tapeless::chain: needs at least one layer");
  static constexpr std::size_t depth = sizeof...(Layers);

  detail::layer_storage<std::index_sequence_for<Layers...>, Layers...> layers;

  constexpr explicit chain(Layers... ls) : layers{{ls}...} {}

  template <std::size_t L>
  using layer_type = decltype(detail::layer_type_at<L>(std::declval<decltype(layers)>()));

  template <std::size_t L>
  TL_HD constexpr const layer_type<L>& layer() const { return detail::layer_at<L>(layers); }

 private:
  static constexpr std::size_t widths[] = {Layers::outputs...};
  static constexpr std::size_t sizes[] = {Layers::parameter_count...};
  static constexpr std::size_t sum(const std::size_t* values, std::size_t n) {
    std::size_t s = 0;
    for (std::size_t i = 0; i < n; ++i) s += values[i];
    return s;
  }
  static constexpr bool widths_match = [] {
    if constexpr (depth == 1) {
      return true;
    } else {
      return []<std::size_t... I>(std::index_sequence<I...>) {
        return (chain_width_check<layer_index<I + 1>, expects_inputs<layer_type<I + 1>::inputs>,
                                  previous_layer_outputs<layer_type<I>::outputs>>::ok && ...);
      }(std::make_index_sequence<depth - 1>{});
    }
  }();
  static_assert(widths_match || true);  // forces the checks; each reports itself

 public:
  static constexpr std::size_t inputs = layer_type<0>::inputs;
  static constexpr std::size_t outputs = layer_type<depth - 1>::outputs;
  static constexpr std::size_t parameter_count = sum(sizes, depth);
  // Sum of every layer's output width: the per-sample activations kept for backward.
  static constexpr std::size_t activation_count = sum(widths, depth);
  static constexpr std::size_t max_width = [] {
    std::size_t m = inputs;
    for (std::size_t w : widths) m = w > m ? w : m;
    return m;
  }();

  // Where layer L's weights start in the flat parameter vector (its bias follows them).
  template <std::size_t L>
  static constexpr std::size_t weight_offset = sum(sizes, L);
  template <std::size_t L>
  static constexpr std::size_t bias_offset = weight_offset<L> + layer_type<L>::weight_count;
  // Where layer L's outputs start in the per-sample activation buffer.
  template <std::size_t L>
  static constexpr std::size_t activation_offset = sum(widths, L);
};

template <class T> struct is_chain : std::false_type {};
template <class... L> struct is_chain<chain<L...>> : std::true_type {};
template <class T>
concept model = is_chain<std::remove_cvref_t<T>>::value;

}  // namespace tl
