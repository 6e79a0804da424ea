// tl::chain(layer, layer, ...): layers applied in order. Its type knows every width,
// so a mismatch is a compile error, and every offset into the flat parameter vector
// and into the per-sample scratch is a compile-time constant. A chain is itself a
// layer (nn/layer.hpp), so chains nest (tl::skip holds one).
//
// Its saved values, per sample: the outputs of every layer but the last (the next
// layer's input, and what its own backward may read), then each layer's saved values.
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "tapeless/core/indexed_values.hpp"
#include "tapeless/core/scratch.hpp"
#include "tapeless/nn/layer.hpp"

namespace tl {

// Named wrappers so that a width mismatch reads plainly in the compiler's message.
template <std::size_t N> struct layer_index : std::integral_constant<std::size_t, N> {};
template <std::size_t N> struct expects_inputs : std::integral_constant<std::size_t, N> {};
template <std::size_t N> struct previous_layer_outputs : std::integral_constant<std::size_t, N> {};

template <class LayerIndex, class ExpectsInputs, class PreviousLayerOutputs>
struct chain_width_check {
  static_assert(ExpectsInputs::value == PreviousLayerOutputs::value,
                "tapeless::chain: layer widths do not match: layer_index<N> (from 0) "
                "expects_inputs<A> but previous_layer_outputs<B>; the numbers are in the chain_width_check<...> "
                "line of the message (above it with g++ and clang, below it under nvcc's \"detected during\")");
  static constexpr bool ok = ExpectsInputs::value == PreviousLayerOutputs::value;
};

namespace detail {
// A layer's sizes, or zeros for an argument that is not a layer (already reported),
// so that one mistake gives one error.
template <class L>
struct sizes_of {
  static constexpr bool valid = layer<L>;
  static constexpr std::size_t inputs = [] { if constexpr (valid) return L::inputs; else return std::size_t(0); }();
  static constexpr std::size_t outputs = [] { if constexpr (valid) return L::outputs; else return std::size_t(0); }();
  static constexpr std::size_t parameters = [] { if constexpr (valid) return L::parameter_count; else return std::size_t(0); }();
  static constexpr std::size_t saved = [] { if constexpr (valid) return L::saved_count; else return std::size_t(0); }();
};

inline constexpr std::size_t sum_first(const std::size_t* values, std::size_t n) {
  std::size_t s = 0;
  for (std::size_t i = 0; i < n; ++i) s += values[i];
  return s;
}
}  // namespace detail

template <class... Layers>
struct chain {
  static_assert(sizeof...(Layers) > 0, "tapeless::chain: needs at least one layer");
  static constexpr const char* kind = "chain";
  static constexpr std::size_t depth = sizeof...(Layers);
  static constexpr std::size_t sublayer_count = depth;

  detail::indexed_values<std::index_sequence_for<Layers...>, Layers...> layers;

  constexpr explicit chain(Layers... ls) : layers{{ls}...} {}

  template <std::size_t L>
  using layer_type = decltype(detail::value_type_at<L>(std::declval<decltype(layers)>()));

  template <std::size_t L>
  TL_HD constexpr const layer_type<L>& sublayer() const { return detail::value_at<L>(layers); }

 private:
  static constexpr bool arguments_are_layers = [] {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (check_is_layer<argument_index<I>, Layers>() && ...);
    }(std::index_sequence_for<Layers...>{});
  }();
  // std::array, not T[]: clang reads an in-class T[] as of unknown bound here.
  static constexpr std::array<std::size_t, depth> widths{detail::sizes_of<Layers>::outputs...};
  static constexpr std::array<std::size_t, depth> sizes{detail::sizes_of<Layers>::parameters...};
  static constexpr std::array<std::size_t, depth> saves{detail::sizes_of<Layers>::saved...};
  static constexpr bool widths_match = [] {
    if constexpr (depth == 1 || !arguments_are_layers) {
      return true;
    } else {
      return []<std::size_t... I>(std::index_sequence<I...>) {
        return (chain_width_check<layer_index<I + 1>, expects_inputs<layer_type<I + 1>::inputs>,
                                  previous_layer_outputs<layer_type<I>::outputs>>::ok && ...);
      }(std::make_index_sequence<depth - 1>{});
    }
  }();
  static_assert(widths_match || true);  // forces the checks; each reports itself
  static constexpr std::size_t intermediate_count = detail::sum_first(widths.data(), depth - 1);

 public:
  static constexpr std::size_t inputs = detail::sizes_of<layer_type<0>>::inputs;
  static constexpr std::size_t outputs = widths[depth - 1];
  static constexpr std::size_t parameter_count = detail::sum_first(sizes.data(), depth);
  static constexpr std::size_t saved_count = intermediate_count + detail::sum_first(saves.data(), depth);

  // Where layer L's parameters start in the flat parameter vector.
  template <std::size_t L>
  static constexpr std::size_t parameter_offset = detail::sum_first(sizes.data(), L);
  // Where layer L's outputs (L < depth - 1) and its saved values start in `saved`.
  template <std::size_t L>
  static constexpr std::size_t output_offset = detail::sum_first(widths.data(), L);
  template <std::size_t L>
  static constexpr std::size_t saved_offset = intermediate_count + detail::sum_first(saves.data(), L);

  template <class T>
  void init(T* p, rng& g) const {
    [&]<std::size_t... L>(std::index_sequence<L...>) {
      (sublayer<L>().init(p + parameter_offset<L>, g), ...);
    }(std::make_index_sequence<depth>{});
  }

  template <std::size_t K, class T, std::size_t L = 0>
  TL_HD TL_INLINE void forward(const T* p, const T* in, T* out, T* saved) const {
    sublayer<L>().template forward<K>(p + parameter_offset<L>, input_of<L, K>(in, saved), output_of<L, K>(out, saved),
                                      saved + saved_offset<L> * K);
    if constexpr (L + 1 < depth) forward<K, T, L + 1>(p, in, out, saved);
  }

  // Layer by layer from the last: each layer's input delta is the next one's dout.
  template <bool InputDelta, std::size_t K, class T, std::size_t L = depth - 1>
  TL_HD TL_INLINE void backward(const T* p, const T* in, const T* out, T* saved, const T* dout, T* din,
                                T* grad) const {
    const auto& l = sublayer<L>();
    const T* lin = input_of<L, K>(in, saved);
    const T* lout = output_of<L, K>(const_cast<T*>(out), saved);
    T* lsaved = saved + saved_offset<L> * K;
    if constexpr (L == 0) {
      l.template backward<InputDelta, K>(p, lin, lout, lsaved, dout, din, grad);
    } else {
      detail::group_array<T, layer_type<L>::inputs * K, K> delta;  // (core/scratch.hpp)
      l.template backward<true, K>(p + parameter_offset<L>, lin, lout, lsaved, dout, delta.data(),
                                   grad + parameter_offset<L> * K);
      backward<InputDelta, K, T, L - 1>(p, in, out, saved, delta.data(), din, grad);
    }
  }

 private:
  template <std::size_t L, std::size_t K, class T>
  TL_HD static const T* input_of(const T* in, T* saved) {
    if constexpr (L == 0) return in;
    else return saved + output_offset<L - 1> * K;
  }
  template <std::size_t L, std::size_t K, class T>
  TL_HD static T* output_of(T* out, T* saved) {
    if constexpr (L + 1 == depth) return out;
    else return saved + output_offset<L> * K;
  }
};

// A model is any layer: usually a chain, but one dense layer trains too.
template <class T>
concept model = layer<std::remove_cvref_t<T>>;

}  // namespace tl
