// Layers that probe the layer-by-layer passes' hand-offs (tests of the CPU's blocked
// pass and the GPU's layered path): no parameters and a backward that reads its output
// (expo), a backward that overwrites its saved values (clobber), a width change (halve).
#pragma once

#include <cstddef>
#include <limits>

#include "tapeless/tapeless.hpp"

// y = exp(x): no parameters, nothing saved; its backward reads `out`.
template <std::size_t N>
struct expo_layer {
  static constexpr const char* kind = "expo";
  static constexpr std::size_t inputs = N, outputs = N, parameter_count = 0, saved_count = 0;
  template <class T> void init(T*, tl::rng&) const {}
  template <std::size_t K, class T>
  TL_HD void forward(const T*, const T* in, T* out, T*) const {
    for (std::size_t j = 0; j < N * K; ++j) out[j] = tl::math::exp(in[j]);
  }
  template <bool InputDelta, std::size_t K, class T>
  TL_HD void backward(const T*, const T*, const T* out, T*, const T* dout, T* din, T*) const {
    if constexpr (InputDelta)
      for (std::size_t j = 0; j < N * K; ++j) din[j] = dout[j] * out[j];
  }
};

// y_i = p_i x_i^2, x saved; the backward leaves NaN in `saved` after reading it.
template <std::size_t N>
struct clobber_layer {
  static constexpr const char* kind = "clobber";
  static constexpr std::size_t inputs = N, outputs = N, parameter_count = N, saved_count = N;
  template <class T> void init(T* p, tl::rng&) const {
    for (std::size_t i = 0; i < N; ++i) p[i] = T(0.5);
  }
  template <std::size_t K, class T>
  TL_HD void forward(const T* p, const T* in, T* out, T* saved) const {
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t k = 0; k < K; ++k) {
        saved[i * K + k] = in[i * K + k];
        out[i * K + k] = p[i] * in[i * K + k] * in[i * K + k];
      }
  }
  template <bool InputDelta, std::size_t K, class T>
  TL_HD void backward(const T* p, const T*, const T*, T* saved, const T* dout, T* din, T* grad) const {
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t k = 0; k < K; ++k) {
        const T x = saved[i * K + k];
        grad[i * K + k] += dout[i * K + k] * x * x;
        if constexpr (InputDelta) din[i * K + k] = dout[i * K + k] * T(2) * p[i] * x;
        saved[i * K + k] = std::numeric_limits<T>::quiet_NaN();
      }
  }
};

// y_j = x_{2j} x_{2j+1}: half the width, no parameters.
template <std::size_t N>
struct halve_layer {
  static constexpr const char* kind = "halve";
  static constexpr std::size_t inputs = N, outputs = N / 2, parameter_count = 0, saved_count = 0;
  template <class T> void init(T*, tl::rng&) const {}
  template <std::size_t K, class T>
  TL_HD void forward(const T*, const T* in, T* out, T*) const {
    for (std::size_t j = 0; j < N / 2; ++j)
      for (std::size_t k = 0; k < K; ++k) out[j * K + k] = in[2 * j * K + k] * in[(2 * j + 1) * K + k];
  }
  template <bool InputDelta, std::size_t K, class T>
  TL_HD void backward(const T*, const T* in, const T*, T*, const T* dout, T* din, T*) const {
    if constexpr (InputDelta)
      for (std::size_t j = 0; j < N / 2; ++j)
        for (std::size_t k = 0; k < K; ++k) {
          din[2 * j * K + k] = dout[j * K + k] * in[(2 * j + 1) * K + k];
          din[(2 * j + 1) * K + k] = dout[j * K + k] * in[2 * j * K + k];
        }
  }
};
