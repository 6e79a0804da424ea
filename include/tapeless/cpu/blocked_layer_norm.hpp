// layer_norm on the blocked CPU pass (cpu/blocked_chain.hpp), a sample's row at a
// time. The generic sample stage (cpu/blocked_stages.hpp) gathers 16 rows into lanes,
// runs the layer's own code and scatters the results back: for a layer_norm, whose
// work is a few passes over each row, the gathers and scatters were most of its time
// (a 256-wide one cost 26 % of the dense model around it, docs/performance.md,
// 2026-12-06 morning). Here each row is read where it lies, its sums taken a whole
// vector at a time; only the sample's mean and 1 / sqrt(var + eps) are saved (the
// backward recomputes x̂ from the layer's input, which the chunk keeps); the weight
// and bias gradients are summed over the chunk's rows in the working precision, then
// added to the thread's double sums, as the generic stage does. Each value is computed
// as layer_norm_layer computes it (nn/layer_norm.hpp); a row's sums are added in
// another order, so the two agree to rounding.
#pragma once

#include <cstddef>

#include "tapeless/core/math.hpp"
#include "tapeless/cpu/blocked_stages.hpp"
#include "tapeless/nn/layer_norm.hpp"

namespace tl::detail {

template <std::size_t N, class T>
struct blocked_layer_norm {
  using layer_type = layer_norm_layer<N>;
  // Rows of `stride` values, whole vectors (values past N are zeros); every loop runs
  // over whole rows, so that g++ vectorizes it without a remainder.
  static constexpr std::size_t stride = simd::row_stride<T>(N), L = simd::lanes<T>;
  // The chain's interface (blocked_sample_layer's): saved values per group of 16 rows
  // (a row's mean and 1 / sqrt(var + eps)), and scratch: the chunk's weight and bias
  // gradient sums, a row of each.
  static constexpr std::size_t saved_per_group = 2 * 16, scratch_values = 2 * stride;

  static T row_sum(const T* a) {
    simd::vec<T> sum{};
    for (std::size_t i = 0; i < stride; i += L) sum += simd::load(a + i);
    return simd::sum_lanes<T>(sum);
  }
  static T row_dot(const T* a, const T* b) {
    simd::vec<T> sum{};
    for (std::size_t i = 0; i < stride; i += L) sum += simd::load(a + i) * simd::load(b + i);
    return simd::sum_lanes<T>(sum);
  }
  // N parameters (the weight or the bias) as a row, zeros past N: nothing past the
  // layer's 2N parameters is read.
  static void parameter_row(const T* from, T* row) {
    for (std::size_t i = 0; i < stride; ++i) row[i] = i < N ? from[i] : T(0);
  }

  static void forward(const layer_type& layer, const T* p, const T* in, T* out, T* saved, std::size_t used) {
    alignas(64) T w[stride], b[stride], centred[stride];
    parameter_row(p, w);
    parameter_row(p + N, b);
    for (std::size_t s = 0; s < used; ++s) {
      const T* x = in + s * stride;
      T* y = out + s * stride;
      const T mean = row_sum(x) * T(1.0 / double(N));
      for (std::size_t i = 0; i < stride; ++i) centred[i] = i < N ? x[i] - mean : T(0);
      const T rstd = T(1) / math::sqrt(row_dot(centred, centred) * T(1.0 / double(N)) + T(layer.eps));
      for (std::size_t i = 0; i < stride; ++i) y[i] = centred[i] * rstd * w[i] + b[i];  // (zeros past N)
      saved[2 * s] = mean;
      saved[2 * s + 1] = rstd;
    }
  }

  // Adds d loss / d weight and d loss / d bias into grad (the thread's double sums, the
  // layer's block) and, when InputDelta, hands d loss / d in back to the stage before
  // (IntoSlopes: a dense one). sums: scratch_values of scratch.
  template <bool InputDelta, bool IntoSlopes>
  static void backward(const layer_type&, const T* p, const T* in, const T*, const T* delta, T* saved, T* below,
                       std::size_t used, T* sums, double* grad) {
    alignas(64) T w[stride], xhat[stride], g[stride], din[stride];  // (the bias has no part here)
    parameter_row(p, w);
    T* weight_sums = sums;
    T* bias_sums = sums + stride;
    for (std::size_t j = 0; j < 2 * stride; ++j) sums[j] = T(0);
    for (std::size_t s = 0; s < used; ++s) {
      const T* x = in + s * stride;
      const T* d = delta + s * stride;  // (zeros past N, and on the chunk's padding rows)
      const T mean = saved[2 * s], rstd = saved[2 * s + 1];
      for (std::size_t i = 0; i < stride; ++i) {
        xhat[i] = i < N ? (x[i] - mean) * rstd : T(0);
        weight_sums[i] += d[i] * xhat[i];
        bias_sums[i] += d[i];
      }
      if constexpr (InputDelta) {
        for (std::size_t i = 0; i < stride; ++i) g[i] = d[i] * w[i];
        const T mean_g = row_sum(g) * T(1.0 / double(N)), mean_gx = row_dot(g, xhat) * T(1.0 / double(N));
        for (std::size_t i = 0; i < stride; ++i) din[i] = rstd * (g[i] - mean_g - xhat[i] * mean_gx);
        hand_back<IntoSlopes>(below + s * stride, din, N);
      }
    }
    for (std::size_t i = 0; i < N; ++i) {
      grad[i] += double(weight_sums[i]);
      grad[N + i] += double(bias_sums[i]);
    }
  }
};

// The code a sample stage runs on the blocked pass: a layer_norm's own, any other
// layer's through the generic stage.
template <class Stage, class T>
struct blocked_sample_stage {
  using type = blocked_sample_layer<Stage, T>;
};
template <std::size_t N, std::size_t Offset, class T>
struct blocked_sample_stage<layer_stage<stage_kind::sample, layer_norm_layer<N>, Offset>, T> {
  using type = blocked_layer_norm<N, T>;
};

}  // namespace tl::detail
