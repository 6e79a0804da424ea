// A model's layers flattened, in order, into stages, by its type: what the layer-by-
// layer passes run (the CPU's blocked pass, cpu/blocked_chain.hpp; the GPU's layered
// path, cuda/layered.hpp).
//   dense        a dense layer: matrix products
//   sample       any other layer (layer_norm, a user's layer): its own forward and
//                backward through the layer protocol, sample by sample
//   skip_open    the start of a skip (x + f(x)): passes x on; in the backward, adds its
//                close stage's delta (the identity path's) to the inner layers'
//   skip_close   the end of a skip: f(x) + x
// Chains nest into one list; a skip's layers lie between its open and close stages.
// Each stage knows where its parameters start in the model's flat vector (`offset`).
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tapeless/nn/dense_chain.hpp"
#include "tapeless/nn/skip.hpp"

namespace tl::detail {

enum class stage_kind { dense, sample, skip_open, skip_close };

// A stage that is a layer of the model (a copy of it): dense or sample.
template <stage_kind Kind, class Layer, std::size_t Offset>
struct layer_stage {
  static constexpr stage_kind kind = Kind;
  static constexpr std::size_t offset = Offset, inputs = Layer::inputs, outputs = Layer::outputs;
  static constexpr std::size_t parameter_count = Layer::parameter_count;
  using layer_type = Layer;
  Layer layer;
};
template <class Layer, std::size_t Offset>
using dense_stage = layer_stage<stage_kind::dense, Layer, Offset>;
template <class Layer, std::size_t Offset>
using sample_stage = layer_stage<stage_kind::sample, Layer, Offset>;
template <stage_kind Kind, std::size_t Width>
struct skip_stage {
  static constexpr stage_kind kind = Kind;
  static constexpr std::size_t inputs = Width, outputs = Width, parameter_count = 0;
  static constexpr std::size_t offset = 0;  // (no parameters: the offset is never read)
};

template <class L> struct is_chain_layer : std::false_type {};
template <class... Ls> struct is_chain_layer<chain<Ls...>> : std::true_type {};
template <class L> struct is_skip_layer : std::false_type {};
template <class Inner> struct is_skip_layer<skip_layer<Inner>> : std::true_type {};

// The stages of `layer`, whose parameters start at Offset, as a std::tuple.
template <std::size_t Offset, class Layer>
constexpr auto flatten_stages(const Layer& layer) {
  if constexpr (is_dense_layer<Layer>::value) {
    return std::tuple<dense_stage<Layer, Offset>>{{layer}};
  } else if constexpr (is_chain_layer<Layer>::value) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple_cat(flatten_stages<Offset + Layer::template parameter_offset<I>>(layer.template sublayer<I>())...);
    }(std::make_index_sequence<Layer::depth>{});
  } else if constexpr (is_skip_layer<Layer>::value) {
    return std::tuple_cat(std::tuple<skip_stage<stage_kind::skip_open, Layer::inputs>>{},
                          flatten_stages<Offset>(layer.inner),
                          std::tuple<skip_stage<stage_kind::skip_close, Layer::inputs>>{});
  } else {
    return std::tuple<sample_stage<Layer, Offset>>{{layer}};
  }
}
template <class Model>
using stages_of = decltype(flatten_stages<0>(std::declval<const Model&>()));

template <class Stages>
inline constexpr std::size_t stage_count = std::tuple_size_v<Stages>;
template <class Stages>
constexpr std::array<stage_kind, stage_count<Stages>> stage_kinds() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<stage_kind, sizeof...(I)>{std::tuple_element_t<I, Stages>::kind...};
  }(std::make_index_sequence<stage_count<Stages>>{});
}
// The skip_open stage that a skip_close stage at `close` ends.
template <class Stages>
constexpr std::size_t open_of(std::size_t close) {
  constexpr auto kinds = stage_kinds<Stages>();
  std::size_t nesting = 0;
  for (std::size_t i = close; i-- > 0;) {
    if (kinds[i] == stage_kind::skip_close) ++nesting;
    if (kinds[i] == stage_kind::skip_open) {
      if (nesting == 0) return i;
      --nesting;
    }
  }
  return close;  // unreachable: flatten_stages pairs them
}
// The skip_close stage that ends the skip opened at `open`.
template <class Stages>
constexpr std::size_t close_of(std::size_t open) {
  for (std::size_t i = open + 1; i < stage_count<Stages>; ++i)
    if (stage_kinds<Stages>()[i] == stage_kind::skip_close && open_of<Stages>(i) == open) return i;
  return open;
}
template <class Stages>
constexpr std::size_t dense_stage_count() {
  std::size_t n = 0;
  for (const stage_kind k : stage_kinds<Stages>()) n += k == stage_kind::dense;
  return n;
}

}  // namespace tl::detail
