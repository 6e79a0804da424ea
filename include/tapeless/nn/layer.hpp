// The layer protocol. Every layer kind (dense, layer_norm, skip, chain itself) is a
// small copyable type that meets it, and everything above — the CPU batch loop, the
// CUDA kernels, initialisation, checkpoints, summaries — drives layers only through
// it. A new layer kind is one header; docs/design.md walks through an example.
//
// A layer L provides, all `static constexpr std::size_t`:
//   inputs, outputs      per-sample widths
//   parameter_count      the size of its block of the model's flat parameter vector
//   saved_count          per-sample values its forward keeps for its backward
// and the member functions (T is float or double; K samples at once, lane-major:
// value[unit * K + lane], so loops over the K lanes vectorize on the CPU and K = 1 is
// one sample per CUDA thread):
//   template <class T> void init(T* p, rng& g) const;            // fills its block
//   template <std::size_t K, class T>
//   TL_HD void forward(const T* p, const T* in, T* out, T* saved) const;
//   template <bool InputDelta, std::size_t K, class T>
//   TL_HD void backward(const T* p, const T* in, const T* out, T* saved,
//                       const T* dout, T* din, T* grad) const;
// backward receives dout = d loss / d out, adds d loss / d p into grad ([p][K]) and,
// when InputDelta, writes d loss / d in into din; the first layer of a model is called
// with InputDelta = false, since nothing needs the data's derivative. `saved` is its
// own: backward may overwrite it (dense turns its slopes into deltas there).
// Parameters are named for summaries and checkpoints: a layer that holds parameters
// itself lists `parameter_blocks` (name, offset, shape; row-major); a container
// (chain, skip) lists its sublayers (`sublayer_count`, `sublayer<I>()`).
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <type_traits>

#include "tapeless/core/config.hpp"
#include "tapeless/nn/rng.hpp"

namespace tl {

// One named block of a layer's parameters: `rows` x `cols` row-major (a matrix), or a
// vector of `rows` when cols == 0. PyTorch names and shapes: dense's "weight" is
// [outputs][inputs], its "bias" [outputs].
struct parameter_block {
  const char* name;
  std::size_t offset;
  std::size_t rows, cols;
  constexpr std::size_t size() const { return cols ? rows * cols : rows; }
};

template <class L>
concept layer =
    std::is_trivially_copyable_v<L> &&
    requires {
      requires std::same_as<std::remove_cv_t<decltype(L::inputs)>, std::size_t>;
      requires std::same_as<std::remove_cv_t<decltype(L::outputs)>, std::size_t>;
      requires std::same_as<std::remove_cv_t<decltype(L::parameter_count)>, std::size_t>;
      requires std::same_as<std::remove_cv_t<decltype(L::saved_count)>, std::size_t>;
    } &&
    requires(const L& l, const float* c, float* m, rng& g) {
      l.init(m, g);
      l.template forward<1>(c, c, m, m);
      l.template backward<true, 1>(c, c, c, m, c, m, m);
    };

// Names that read well in a compiler message: tapeless::chain's check says which
// argument is not a layer.
template <std::size_t N> struct argument_index : std::integral_constant<std::size_t, N> {};

template <class ArgumentIndex, class Type>
constexpr bool check_is_layer() {
  static_assert(layer<Type>,
                "tapeless: argument_index<N> (from 0) is not a layer: a layer declares inputs, outputs, "
                "parameter_count, saved_count, init, forward and backward (tapeless/nn/layer.hpp)");
  return layer<Type>;
}

// Layers that hold parameters of their own name them; containers name their sublayers.
template <class L>
concept has_parameter_blocks = requires { L::parameter_blocks(); };
template <class L>
concept layer_container = requires(const L& l) {
  L::sublayer_count;
  L::template parameter_offset<0>;
  typename L::template layer_type<0>;
  l.template sublayer<0>();
};

// How many modules the layer is in a PyTorch nn.Sequential: dense with an activation
// is two (Linear, then the activation), so the next layer's names count past both.
template <class L>
constexpr std::size_t sequential_modules() {
  if constexpr (requires { L::sequential_modules; }) return L::sequential_modules;
  else return 1;
}

}  // namespace tl
