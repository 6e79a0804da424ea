// The blocked CPU pass for a chain of dense layers (cpu/pass_choice.hpp says when it
// runs): per thread, a chunk of samples goes forward layer by layer as small matrix
// products (cpu/blocked_dense.hpp), then the loss, then backward layer by layer, the
// weight gradient added straight into the thread's [P] sums in double. A chunk's
// values stay in the thread's own buffers (from a few hundred kilobytes to 17 MB for
// eight 1024-wide layers), reused for every chunk; no matrix as large as the batch
// exists. The chunk is summed in the working precision, chunks in double, as in the
// lane pass.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

#include "tapeless/cpu/blocked_dense.hpp"
#include "tapeless/nn/chain.hpp"

namespace tl::detail {

template <class Model, class T>
struct blocked_chain {
  static constexpr std::size_t depth = Model::depth, In = Model::inputs, Out = Model::outputs;

  // Samples per chunk: 256, as many as the lane pass sums per chunk (so a thread's
  // range of whole chunks of the batch is whole chunks here too). The weight
  // gradient's sums are read and written once per chunk, so fewer samples would
  // cost memory traffic on wide layers (a 1024 x 1024 layer's 8 MB of double sums).
  static constexpr std::size_t chunk = 256;
  static constexpr std::size_t rows = simd::round_up(chunk, simd::tile_rows);

  template <std::size_t I>
  using layer = blocked_dense<typename Model::template layer_type<I>, T, rows>;

  // Scratch for any layer's products (cpu/blocked_dense.hpp).
  static constexpr std::size_t scratch_size = [] {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return std::max({layer<I>::scratch_size...});
    }(std::make_index_sequence<depth>{});
  }();

  // A sample's work, for the choice of threads (cpu/batch.hpp): its multiply-adds, and
  // per unit its activation and epilogues, which cost about as much as 32 multiply-adds
  // (with it, one core does 15-25 units a nanosecond on 2-32-1, 2-256-1 (mostly
  // activations) and 2-128-128-128-1, 2-512-512-512-1 (mostly products) alike:
  // bench/cpu/thread_break_even.cpp, docs/performance.md).
  static constexpr std::size_t unit_cost = 32;
  static constexpr std::size_t work_per_sample = [] {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return ((layer<I>::layer_type::inputs * layer<I>::layer_type::outputs + unit_cost * layer<I>::layer_type::outputs) + ...);
    }(std::make_index_sequence<depth>{});
  }();

  // Packed weights of every layer, one after the other.
  static constexpr std::array<std::size_t, depth + 1> packed_offset = [] {
    std::array<std::size_t, depth + 1> at{};
    [&]<std::size_t... I>(std::index_sequence<I...>) { ((at[I + 1] = at[I] + layer<I>::packed_size), ...); }(
        std::make_index_sequence<depth>{});
    return at;
  }();
  static constexpr std::size_t packed_size = packed_offset[depth];

  // A thread's buffers: the chunk's inputs, then per layer its outputs and its slopes
  // (which become its deltas), each [rows][the layer's stride], then the scratch.
  static constexpr std::array<std::size_t, depth + 1> buffer_offset = [] {
    std::array<std::size_t, depth + 1> at{};
    at[0] = rows * layer<0>::in_stride;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((at[I + 1] = at[I] + 2 * rows * layer<I>::out_stride), ...);
    }(std::make_index_sequence<depth>{});
    return at;
  }();
  static constexpr std::size_t buffer_size = buffer_offset[depth] + scratch_size;

  template <std::size_t I> static T* inputs_of(T* buffer) {
    if constexpr (I == 0) return buffer;
    else return outputs_of<I - 1>(buffer);
  }
  template <std::size_t I> static T* outputs_of(T* buffer) { return buffer + buffer_offset[I]; }
  template <std::size_t I> static T* slopes_of(T* buffer) { return buffer + buffer_offset[I] + rows * layer<I>::out_stride; }
  static T* scratch_of(T* buffer) { return buffer + buffer_offset[depth]; }

  // This thread's buffers for this model type (zeroed once, kept for its lifetime).
  static T* thread_buffer() {
    thread_local simd::aligned_buffer<T> buffer(buffer_size);
    return buffer.data();
  }

  // Every layer's weights, rearranged for the products; part `part` of `parts`.
  static void pack(const T* params, T* packed, std::size_t part = 0, std::size_t parts = 1) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (layer<I>::pack(params + Model::template parameter_offset<I>, packed + packed_offset[I], part, parts), ...);
    }(std::make_index_sequence<depth>{});
  }

  // Adds the loss and gradient sums of samples [first, last) into grad[0, P) and
  // returns the loss sum. buffer: buffer_size values, this thread's (thread_buffer()).
  template <class Loss>
  static double accumulate(const Model& model, const Loss& loss, const T* packed, const T* x, const T* y,
                           std::size_t first, std::size_t last, T* buffer, double* grad) {
    double total = 0.0;
    for (std::size_t start = first; start < last; start += chunk) {
      const std::size_t count = std::min(chunk, last - start), used = simd::round_up(count, simd::tile_rows);
      forward_chunk(model, packed, x, start, count, used, buffer);
      total += loss_and_output_delta(loss, y + start * Out, count, used, buffer);  // zero deltas past count
      backward<depth - 1>(packed, buffer, used, grad);
    }
    return total;
  }

  // The model's outputs for samples [first, last) of x into y (sample-major, Out
  // values a sample), chunk by chunk: tl::apply.
  static void outputs(const Model& model, const T* packed, const T* x, std::size_t first, std::size_t last,
                      T* buffer, T* y) {
    constexpr std::size_t stride = layer<depth - 1>::out_stride;
    for (std::size_t start = first; start < last; start += chunk) {
      const std::size_t count = std::min(chunk, last - start), used = simd::round_up(count, simd::tile_rows);
      forward_chunk(model, packed, x, start, count, used, buffer);
      const T* out = outputs_of<depth - 1>(buffer);
      for (std::size_t s = 0; s < count; ++s)
        for (std::size_t o = 0; o < Out; ++o) y[(start + s) * Out + o] = out[s * stride + o];
    }
  }

 private:
  // Forward of samples [start, start + count) through every layer, in rows [0, used);
  // rows past count repeat the last sample (zeros could be outside the model's domain).
  static void forward_chunk(const Model& model, const T* packed, const T* x, std::size_t start, std::size_t count,
                            std::size_t used, T* buffer) {
    constexpr std::size_t in_stride = layer<0>::in_stride;
    T* input = inputs_of<0>(buffer);
    for (std::size_t s = 0; s < used; ++s)
      for (std::size_t i = 0; i < In; ++i) input[s * in_stride + i] = x[(start + std::min(s, count - 1)) * In + i];
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (layer<I>::forward(model.template sublayer<I>(), packed + packed_offset[I], inputs_of<I>(buffer),
                         outputs_of<I>(buffer), slopes_of<I>(buffer), used, scratch_of(buffer)),
       ...);
    }(std::make_index_sequence<depth>{});
  }

  // The chunk's loss sum; turns the last layer's slopes into its deltas.
  template <class Loss>
  static double loss_and_output_delta(const Loss& loss, const T* y, std::size_t count, std::size_t used, T* buffer) {
    constexpr std::size_t K = 16, stride = layer<depth - 1>::out_stride;
    const T* yhat = outputs_of<depth - 1>(buffer);
    T* delta = slopes_of<depth - 1>(buffer);
    alignas(64) T yh[Out * K], yg[Out * K], dout[Out * K], lane_loss[K];
    T chunk_loss = T(0);
    for (std::size_t g = 0; g < count; g += K) {
      const std::size_t n = std::min(K, count - g);
      for (std::size_t o = 0; o < Out; ++o)
        for (std::size_t k = 0; k < K; ++k) {
          const std::size_t s = g + std::min(k, n - 1);
          yh[o * K + k] = yhat[s * stride + o];
          yg[o * K + k] = y[s * Out + o];
        }
      loss.template group<Out, K>(yh, yg, dout, lane_loss);
      for (std::size_t k = 0; k < n; ++k) {
        chunk_loss += lane_loss[k];
        for (std::size_t o = 0; o < Out; ++o) delta[(g + k) * stride + o] *= dout[o * K + k];
      }
    }
    std::fill(delta + count * stride, delta + used * stride, T(0));  // padding rows add nothing
    return double(chunk_loss);
  }

  template <std::size_t I>
  static void backward(const T* packed, T* buffer, std::size_t used, double* grad) {
    layer<I>::add_gradient(slopes_of<I>(buffer), inputs_of<I>(buffer), used, grad + Model::template parameter_offset<I>,
                           scratch_of(buffer));
    if constexpr (I > 0) {
      layer<I>::input_delta(packed + packed_offset[I], slopes_of<I>(buffer), slopes_of<I - 1>(buffer), used,
                            scratch_of(buffer));
      backward<I - 1>(packed, buffer, used, grad);
    }
  }
};

}  // namespace tl::detail
