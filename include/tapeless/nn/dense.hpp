// A fully connected layer y = act(W x + b); widths are template arguments so that a
// model's shape is part of its type. Its parameter block is W [Out][In] row-major,
// then b [Out] (PyTorch's Linear "weight" and "bias"); this header is the one place
// that knows it. The forward pass keeps act'(z) per output; backward turns it into
// the delta in place.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>

#include "tapeless/nn/activation.hpp"
#include "tapeless/nn/layer.hpp"

namespace tl {

template <std::size_t In, std::size_t Out, class Activation>
struct dense_layer {
  static_assert(In > 0 && Out > 0, "tapeless::dense: widths must be positive");
  static constexpr const char* kind = "dense";
  static constexpr std::size_t inputs = In, outputs = Out;
  static constexpr std::size_t weight_offset = 0, bias_offset = In * Out;
  static constexpr std::size_t parameter_count = In * Out + Out;
  static constexpr std::size_t saved_count = Out;  // act'(z)
  static constexpr std::size_t sequential_modules = std::is_same_v<Activation, identity_fn> ? 1 : 2;
  Activation activation;

  static constexpr std::array<parameter_block, 2> parameter_blocks() {
    return {{{"weight", weight_offset, Out, In}, {"bias", bias_offset, Out, 0}}};
  }
  // W[o][i] and b[o] within the layer's block.
  static constexpr std::size_t weight_index(std::size_t o, std::size_t i) { return o * In + i; }
  static constexpr std::size_t bias_index(std::size_t o) { return bias_offset + o; }

  // Glorot-uniform weights U(-a, a), a = sqrt(6 / (In + Out)), zero biases (Lux's
  // defaults). One rounding per weight (a * an exact sample in [-1, 1)): no
  // contraction into an FMA can change it, so it is bitwise the same everywhere.
  template <class T>
  void init(T* p, rng& g) const {
    const T limit = static_cast<T>(std::sqrt(6.0 / double(In + Out)));
    for (std::size_t k = 0; k < In * Out; ++k) p[weight_offset + k] = limit * g.symmetric<T>();
    for (std::size_t o = 0; o < Out; ++o) p[bias_offset + o] = T(0);
  }

  template <std::size_t K, class T>
  TL_HD TL_INLINE void forward(const T* p, const T* in, T* out, T* slope) const {
    const T* w = p + weight_offset;
    const T* b = p + bias_offset;
    for (std::size_t o = 0; o < Out; ++o) {
      T z[K];
      for (std::size_t k = 0; k < K; ++k) z[k] = b[o];
      for (std::size_t i = 0; i < In; ++i) {
        const T wi = w[o * In + i];
        for (std::size_t k = 0; k < K; ++k) z[k] += wi * in[i * K + k];
      }
      for (std::size_t k = 0; k < K; ++k) out[o * K + k] = activation.value_and_derivative(z[k], slope[o * K + k]);
    }
  }

  template <bool InputDelta, std::size_t K, class T>
  TL_HD TL_INLINE void backward(const T* p, const T* in, const T*, T* slope, const T* dout, T* din, T* grad) const {
    T* delta = slope;  // d loss / d z = act'(z) * dout, in place, formed as it is first used
    T* gw = grad + weight_offset * K;
    T* gb = grad + bias_offset * K;
    for (std::size_t o = 0; o < Out; ++o) {
      for (std::size_t k = 0; k < K; ++k) {
        delta[o * K + k] *= dout[o * K + k];
        gb[o * K + k] += delta[o * K + k];
      }
      for (std::size_t i = 0; i < In; ++i)
        for (std::size_t k = 0; k < K; ++k) gw[(o * In + i) * K + k] += delta[o * K + k] * in[i * K + k];
    }
    if constexpr (InputDelta) {
      const T* w = p + weight_offset;
      for (std::size_t i = 0; i < In; ++i) {
        T* d = din + i * K;
        for (std::size_t k = 0; k < K; ++k) d[k] = w[i] * delta[k];
        for (std::size_t o = 1; o < Out; ++o) {
          const T wi = w[o * In + i];
          for (std::size_t k = 0; k < K; ++k) d[k] += wi * delta[o * K + k];
        }
      }
    }
  }
};

// tl::dense<16, 1>() is linear; tl::dense<1, 16>(tl::gelu) applies gelu; any callable
// built from tapeless functions is an activation too (nn/activation.hpp).
template <std::size_t In, std::size_t Out, class Activation = identity_fn>
constexpr auto dense(const Activation& activation = {}) {
  return dense_layer<In, Out, decltype(detail::make_activation(activation))>{detail::make_activation(activation)};
}

}  // namespace tl
