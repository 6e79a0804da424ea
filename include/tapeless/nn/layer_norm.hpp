// tl::layer_norm<N>(): PyTorch's LayerNorm over the N features of each sample,
// y = (x - mean) / sqrt(var + eps) * weight + bias, biased variance, eps = 1e-5,
// weight initialised to 1 and bias to 0.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <stdexcept>

#include "tapeless/core/math.hpp"
#include "tapeless/nn/layer.hpp"

namespace tl {

template <std::size_t N>
struct layer_norm_layer {
  static_assert(N > 0, "tapeless::layer_norm: the width must be positive");
  static constexpr const char* kind = "layer_norm";
  static constexpr std::size_t inputs = N, outputs = N;
  static constexpr std::size_t parameter_count = 2 * N;
  static constexpr std::size_t saved_count = N + 1;  // the normalized x, then 1 / sqrt(var + eps)
  double eps = 1e-5;

  static constexpr std::array<parameter_block, 2> parameter_blocks() {
    return {{{"weight", 0, N, 0}, {"bias", N, N, 0}}};
  }

  template <class T>
  void init(T* p, rng&) const {
    for (std::size_t i = 0; i < N; ++i) {
      p[i] = T(1);
      p[N + i] = T(0);
    }
  }

  template <std::size_t K, class T>
  TL_HD TL_INLINE void forward(const T* p, const T* in, T* out, T* saved) const {
    T* xhat = saved;
    T* rstd = saved + N * K;
    T mean[K] = {}, var[K] = {};
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t k = 0; k < K; ++k) mean[k] += in[i * K + k];
    for (std::size_t k = 0; k < K; ++k) mean[k] *= T(1.0 / double(N));
    for (std::size_t i = 0; i < N; ++i)  // two passes: no cancellation for large means
      for (std::size_t k = 0; k < K; ++k) {
        const T c = in[i * K + k] - mean[k];
        var[k] += c * c;
      }
    for (std::size_t k = 0; k < K; ++k) rstd[k] = T(1) / math::sqrt(var[k] * T(1.0 / double(N)) + T(eps));
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t k = 0; k < K; ++k) {
        xhat[i * K + k] = (in[i * K + k] - mean[k]) * rstd[k];
        out[i * K + k] = xhat[i * K + k] * p[i] + p[N + i];
      }
  }

  // With g = dout * weight: din = rstd (g - mean(g) - xhat mean(g xhat)).
  template <bool InputDelta, std::size_t K, class T>
  TL_HD TL_INLINE void backward(const T* p, const T*, const T*, T* saved, const T* dout, T* din, T* grad) const {
    const T* xhat = saved;
    const T* rstd = saved + N * K;
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t k = 0; k < K; ++k) {
        grad[i * K + k] += dout[i * K + k] * xhat[i * K + k];
        grad[(N + i) * K + k] += dout[i * K + k];
      }
    if constexpr (InputDelta) {
      T mean_g[K] = {}, mean_gx[K] = {};
      for (std::size_t i = 0; i < N; ++i)
        for (std::size_t k = 0; k < K; ++k) {
          const T g = dout[i * K + k] * p[i];
          mean_g[k] += g;
          mean_gx[k] += g * xhat[i * K + k];
        }
      for (std::size_t k = 0; k < K; ++k) {
        mean_g[k] *= T(1.0 / double(N));
        mean_gx[k] *= T(1.0 / double(N));
      }
      for (std::size_t i = 0; i < N; ++i)
        for (std::size_t k = 0; k < K; ++k)
          din[i * K + k] = rstd[k] * (dout[i * K + k] * p[i] - mean_g[k] - xhat[i * K + k] * mean_gx[k]);
    }
  }
};

// eps must be finite and >= 0 (torch.nn.LayerNorm's rule); a negative or NaN one made
// every step's loss NaN, reported as the step's failure with no word of eps.
template <std::size_t N>
constexpr layer_norm_layer<N> layer_norm(double eps = 1e-5) {
  if (!(eps >= 0 && eps <= std::numeric_limits<double>::max()))
    throw std::invalid_argument("tapeless::layer_norm: eps must be finite and >= 0");
  return {eps};
}

}  // namespace tl
