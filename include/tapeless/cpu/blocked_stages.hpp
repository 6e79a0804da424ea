// The blocked CPU pass's view of a model (cpu/blocked_chain.hpp runs it): the model's
// layers flattened, in order, into stages over a chunk of samples held sample-major,
// [sample][unit] with rows padded to whole vectors:
//   dense        a dense layer: register-blocked products (cpu/blocked_dense.hpp)
//   sample       any other layer (layer_norm, a user's layer): its own forward and
//                backward through the layer protocol, 16 samples at a time, lane-major
//                as the lane pass runs it
//   skip_open    the start of a skip (x + f(x)): passes x on; in the backward, adds the
//   skip_close   the end of a skip: f(x) + x          identity path's delta
// Chains nest into one list; a skip's layers lie between its open and close stages.
//
// Each stage owns an output buffer and a delta buffer. A dense stage's delta buffer
// holds its slopes (activation derivatives) after the forward, and d loss / d z after
// the backward; every other stage's holds d loss / d output. So the stage after one
// hands back d loss / d (that stage's output) multiplied into the slopes when that
// stage is dense (`into_slopes`), written over its delta buffer otherwise.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tapeless/cpu/blocked_dense.hpp"
#include "tapeless/nn/dense_chain.hpp"
#include "tapeless/nn/skip.hpp"

namespace tl::detail {

enum class stage_kind { dense, sample, skip_open, skip_close };

template <class Layer, std::size_t Offset>
struct dense_stage {
  static constexpr stage_kind kind = stage_kind::dense;
  static constexpr std::size_t offset = Offset, inputs = Layer::inputs, outputs = Layer::outputs;
  static constexpr std::size_t parameter_count = Layer::parameter_count;
  using layer_type = Layer;
  Layer layer;
};
template <class Layer, std::size_t Offset>
struct sample_stage {
  static constexpr stage_kind kind = stage_kind::sample;
  static constexpr std::size_t offset = Offset, inputs = Layer::inputs, outputs = Layer::outputs;
  static constexpr std::size_t parameter_count = Layer::parameter_count;
  using layer_type = Layer;
  Layer layer;
};
template <stage_kind Kind, std::size_t Width>
struct skip_stage {
  static constexpr stage_kind kind = Kind;
  static constexpr std::size_t offset = 0, inputs = Width, outputs = Width, parameter_count = 0;
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
  std::size_t depth = 0;
  for (std::size_t i = close; i-- > 0;) {
    if (kinds[i] == stage_kind::skip_close) ++depth;
    if (kinds[i] == stage_kind::skip_open) {
      if (depth == 0) return i;
      --depth;
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

// d loss / d (a stage's output) for rows of `width` values, handed to that stage's delta
// buffer: multiplied into its slopes when it is a dense stage, written otherwise.
template <bool IntoSlopes, class T>
inline void hand_back(T* delta, const T* d, std::size_t n) {
  if constexpr (IntoSlopes)
    for (std::size_t j = 0; j < n; ++j) delta[j] *= d[j];
  else
    for (std::size_t j = 0; j < n; ++j) delta[j] = d[j];
}

// A sample stage over rows [0, used) of a chunk, 16 samples a group, lane-major. Lanes
// past `used` repeat the last row (zeros could be outside the layer's domain); in the
// backward their d loss / d output is zero, so they add nothing.
template <class Stage, class T>
struct blocked_sample_layer {
  using layer_type = typename Stage::layer_type;
  static constexpr std::size_t K = 16, In = Stage::inputs, Out = Stage::outputs;
  static constexpr std::size_t P = layer_type::parameter_count, saved_per_group = layer_type::saved_count * K;
  static constexpr std::size_t in_stride = simd::row_stride<T>(In), out_stride = simd::row_stride<T>(Out);

  static void gather(const T* rows, std::size_t stride, std::size_t width, std::size_t g, std::size_t n, T* lanes) {
    for (std::size_t i = 0; i < width; ++i)
      for (std::size_t k = 0; k < K; ++k) lanes[i * K + k] = rows[(g + std::min(k, n - 1)) * stride + i];
  }

  static void forward(const layer_type& layer, const T* p, const T* in, T* out, T* saved, std::size_t used) {
    alignas(64) T x[In * K], y[Out * K];
    for (std::size_t g = 0; g < used; g += K) {
      const std::size_t n = std::min(K, used - g);
      gather(in, in_stride, In, g, n, x);
      layer.template forward<K>(p, x, y, saved + g / K * saved_per_group);
      for (std::size_t k = 0; k < n; ++k) {
        T* row = out + (g + k) * out_stride;
        for (std::size_t o = 0; o < Out; ++o) row[o] = y[o * K + k];
        for (std::size_t o = Out; o < out_stride; ++o) row[o] = T(0);
      }
    }
  }

  // Adds d loss / d p into grad (the thread's double sums, the layer's block) and, when
  // InputDelta, hands d loss / d in back to the stage before (IntoSlopes: a dense one).
  template <bool InputDelta, bool IntoSlopes>
  static void backward(const layer_type& layer, const T* p, const T* in, const T* out, const T* delta, T* saved,
                       T* below, std::size_t used, T* lanes, double* grad) {
    alignas(64) T x[In * K], y[Out * K], dout[Out * K], din[In * K];
    std::fill(lanes, lanes + P * K, T(0));
    for (std::size_t g = 0; g < used; g += K) {
      const std::size_t n = std::min(K, used - g);
      gather(in, in_stride, In, g, n, x);
      gather(out, out_stride, Out, g, n, y);
      gather(delta, out_stride, Out, g, n, dout);
      for (std::size_t o = 0; o < Out; ++o)
        for (std::size_t k = n; k < K; ++k) dout[o * K + k] = T(0);
      layer.template backward<InputDelta, K>(p, x, y, saved + g / K * saved_per_group, dout, din, lanes);
      if constexpr (InputDelta) {
        for (std::size_t k = 0; k < n; ++k) {
          T column[In];
          for (std::size_t i = 0; i < In; ++i) column[i] = din[i * K + k];
          hand_back<IntoSlopes>(below + (g + k) * in_stride, column, In);
        }
      }
    }
    for (std::size_t j = 0; j < P; ++j) {
      T sum = T(0);
      for (std::size_t k = 0; k < K; ++k) sum += lanes[j * K + k];
      grad[j] += double(sum);
    }
  }
};

}  // namespace tl::detail
