// The blocked CPU pass's stages (cpu/blocked_chain.hpp runs them) over a chunk of
// samples held sample-major, [sample][unit] with rows padded to whole vectors. The
// model's layers are flattened into stages by nn/stages.hpp: a dense stage runs as
// register-blocked products (cpu/blocked_dense.hpp); a sample stage (any other layer)
// runs its own forward and backward here, 16 samples at a time, lane-major as the lane
// pass runs it (a layer_norm instead a row at a time, cpu/blocked_layer_norm.hpp); a
// skip's open and close stages are copies and sums in the chain.
//
// Each stage owns an output buffer and a delta buffer. A dense stage's delta buffer
// holds its slopes (activation derivatives) after the forward, and d loss / d z after
// the backward; every other stage's holds d loss / d output. So the stage after one
// hands back d loss / d (that stage's output) multiplied into the slopes when that
// stage is dense (`hand_back<true>`), written over its delta buffer otherwise.
#pragma once

#include <algorithm>
#include <cstddef>

#include "tapeless/core/scratch.hpp"
#include "tapeless/cpu/blocked_dense.hpp"
#include "tapeless/nn/stages.hpp"

namespace tl::detail {

// d loss / d (a stage's output) for a row of n values (`from`), handed to that stage's
// delta buffer (`to`): multiplied into its slopes when it is a dense stage, written
// otherwise.
template <bool IntoSlopes, class T>
inline void hand_back(T* to, const T* from, std::size_t n) {
  if constexpr (IntoSlopes)
    for (std::size_t j = 0; j < n; ++j) to[j] *= from[j];
  else
    for (std::size_t j = 0; j < n; ++j) to[j] = from[j];
}

// A sample stage's saved values for a chunk of `rows` rows: one group of 16 rows at a time.
template <std::size_t Rows, std::size_t SavedPerGroup>
inline constexpr std::size_t saved_for_chunk = (Rows + 15) / 16 * SavedPerGroup;

// A sample stage over rows [0, used) of a chunk, 16 samples a group, lane-major. Lanes
// past `used` repeat the last row (zeros could be outside the layer's domain); in the
// backward their d loss / d output is zero, so they add nothing.
template <class Stage, class T>
struct blocked_sample_layer {
  using layer_type = typename Stage::layer_type;
  static constexpr std::size_t K = 16, In = Stage::inputs, Out = Stage::outputs;
  static constexpr std::size_t P = layer_type::parameter_count, saved_per_group = layer_type::saved_count * K;
  static constexpr std::size_t scratch_values = P * K;  // the gradient's lanes
  static constexpr std::size_t in_stride = simd::row_stride<T>(In), out_stride = simd::row_stride<T>(Out);

  static void gather(const T* rows, std::size_t stride, std::size_t width, std::size_t g, std::size_t n, T* lanes) {
    for (std::size_t i = 0; i < width; ++i)
      for (std::size_t k = 0; k < K; ++k) lanes[i * K + k] = rows[(g + std::min(k, n - 1)) * stride + i];
  }

  static void forward(const layer_type& layer, const T* p, const T* in, T* out, T* saved, std::size_t used) {
    group_array<T, In * K, K> xs;  // (core/scratch.hpp: on the heap for wide layers)
    group_array<T, Out * K, K> ys;
    T *x = xs.data(), *y = ys.data();
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
    group_array<T, In * K, K> xs, dins;  // (core/scratch.hpp: on the heap for wide layers)
    group_array<T, Out * K, K> ys, douts;
    T *x = xs.data(), *y = ys.data(), *dout = douts.data(), *din = dins.data();
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
          group_array<T, In, K> column;
          for (std::size_t i = 0; i < In; ++i) column.data()[i] = din[i * K + k];
          hand_back<IntoSlopes>(below + (g + k) * in_stride, column.data(), In);
        }
      }
    }
    if constexpr (P > 0)  // (a loop to 0 is a warning for nvcc)
      for (std::size_t j = 0; j < P; ++j) {
        T sum = T(0);
        for (std::size_t k = 0; k < K; ++k) sum += lanes[j * K + k];
        grad[j] += double(sum);
      }
  }
};

}  // namespace tl::detail
