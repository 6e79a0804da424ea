// The blocked CPU pass (cpu/pass_choice.hpp says when it runs): per thread, a chunk
// of samples goes forward stage by stage (cpu/blocked_stages.hpp: a dense layer as
// small matrix products, cpu/blocked_dense.hpp; a layer_norm a row at a time,
// cpu/blocked_layer_norm.hpp; any other layer 16 samples at a time through its own
// code; a skip's open and close), then the loss, then backward stage by stage, each
// layer's gradient added straight into the thread's [P] sums in double. A chunk's
// values stay in the thread's own buffers (from a few hundred kilobytes to 17 MB for
// eight 1024-wide layers, and for another layer its saved values and its gradient's
// lanes: 2.2 MB for a user's layer that saves 1025 values a sample and has 2048
// parameters, in double), reused for every chunk;
// no matrix as large as the batch exists. The chunk is summed in the working
// precision, chunks in double, as in the lane pass.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <tuple>
#include <utility>

#include "tapeless/core/scratch.hpp"
#include "tapeless/cpu/blocked_layer_norm.hpp"
#include "tapeless/cpu/blocked_stages.hpp"
#include "tapeless/nn/chain.hpp"

namespace tl::detail {

template <class Model, class T>
struct blocked_chain {
  using stages_type = stages_of<Model>;
  // depth: the stages (a dense chain's layers; a skip adds two).
  static constexpr std::size_t depth = stage_count<stages_type>, In = Model::inputs, Out = Model::outputs;
  template <std::size_t I>
  using stage = std::tuple_element_t<I, stages_type>;
  template <std::size_t I>
  static constexpr stage_kind kind = stage<I>::kind;

  // Samples per chunk: 256, as many as the lane pass sums per chunk, counted from the
  // start of the thread's range (whole 64-sample units: its last chunk may be short,
  // as is a small batch's one chunk a thread). The weight gradient's sums are read and
  // written once per chunk, so fewer samples would cost memory traffic on wide layers
  // (a 1024 x 1024 layer's 8 MB of double sums).
  static constexpr std::size_t chunk = 256;
  static constexpr std::size_t rows = simd::round_up(chunk, simd::tile_rows);

  template <std::size_t I>
  using dense = blocked_dense<typename stage<I>::layer_type, T, rows>;
  template <std::size_t I>
  using sample = typename blocked_sample_stage<stage<I>, T>::type;
  template <std::size_t I>
  static constexpr std::size_t out_stride = simd::row_stride<T>(stage<I>::outputs);
  static constexpr std::size_t in_stride = simd::row_stride<T>(In);

  // Per stage: its packed parameters, its scratch, and (sample stages) the values its
  // forward saves for each group of 16 rows and its gradient's scratch.
  // (Another layer's parameters are copied as they are, rounded up to whole cache lines
  // so that the dense stages' panels after them stay aligned.)
  template <std::size_t I>
  static constexpr std::size_t packed_size_of = [] {
    if constexpr (kind<I> == stage_kind::dense) return dense<I>::packed_size;
    else return simd::round_up(stage<I>::parameter_count, 64);
  }();
  template <std::size_t I>
  static constexpr std::size_t scratch_size_of = [] {
    if constexpr (kind<I> == stage_kind::dense) return dense<I>::scratch_size;
    else return std::size_t(0);
  }();
  template <std::size_t I>
  static constexpr std::size_t private_size_of = [] {
    if constexpr (kind<I> == stage_kind::sample)
      return saved_for_chunk<rows, sample<I>::saved_per_group> + sample<I>::scratch_values;
    else return std::size_t(0);
  }();

  static constexpr std::size_t scratch_size = []<std::size_t... I>(std::index_sequence<I...>) {
    return std::max({scratch_size_of<I>...});
  }(std::make_index_sequence<depth>{});

  // A sample's work, for the choice of threads (cpu/batch.hpp): a dense layer's
  // multiply-adds, and per unit its activation and epilogues, which cost about as much
  // as 32 multiply-adds (with it, one core does 15-25 units a nanosecond on 2-32-1,
  // 2-256-1 (mostly activations) and 2-128-128-128-1, 2-512-512-512-1 (mostly products)
  // alike: bench/cpu/thread_break_even.cpp, docs/performance.md); another layer's units
  // in and out at that cost, and its parameters.
  static constexpr std::size_t unit_cost = 32;
  template <std::size_t I>
  static constexpr std::size_t work_of = [] {
    if constexpr (kind<I> == stage_kind::dense)
      return stage<I>::inputs * stage<I>::outputs + unit_cost * stage<I>::outputs;
    else return unit_cost * (stage<I>::inputs + stage<I>::outputs) + stage<I>::parameter_count;
  }();
  static constexpr std::size_t work_per_sample = []<std::size_t... I>(std::index_sequence<I...>) {
    return (work_of<I> + ...);
  }(std::make_index_sequence<depth>{});

  // Packed parameters of every stage, one after the other.
  static constexpr std::array<std::size_t, depth + 1> packed_offset = [] {
    std::array<std::size_t, depth + 1> at{};
    [&]<std::size_t... I>(std::index_sequence<I...>) { ((at[I + 1] = at[I] + packed_size_of<I>), ...); }(
        std::make_index_sequence<depth>{});
    return at;
  }();
  static constexpr std::size_t packed_size = packed_offset[depth];

  // A thread's buffers: the chunk's inputs, then per stage its outputs and its delta
  // buffer (a dense stage's slopes, which become its deltas), each [rows][stride], and
  // its private values; then the scratch.
  static constexpr std::array<std::size_t, depth + 1> buffer_offset = [] {
    std::array<std::size_t, depth + 1> at{};
    at[0] = rows * in_stride;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((at[I + 1] = at[I] + 2 * rows * out_stride<I> + simd::round_up(private_size_of<I>, 64)), ...);
    }(std::make_index_sequence<depth>{});
    return at;
  }();
  static constexpr std::size_t buffer_size = buffer_offset[depth] + scratch_size;

  template <std::size_t I> static T* inputs_of(T* buffer) {
    if constexpr (I == 0) return buffer;
    else return outputs_of<I - 1>(buffer);
  }
  template <std::size_t I> static T* outputs_of(T* buffer) { return buffer + buffer_offset[I]; }
  template <std::size_t I> static T* deltas_of(T* buffer) { return buffer + buffer_offset[I] + rows * out_stride<I>; }
  template <std::size_t I> static T* private_of(T* buffer) { return buffer + buffer_offset[I] + 2 * rows * out_stride<I>; }
  static T* scratch_of(T* buffer) { return buffer + buffer_offset[depth]; }

  // This thread's buffers for this model type (zeroed once, kept for its lifetime).
  static T* thread_buffer() {
    thread_local simd::aligned_buffer<T> buffer(buffer_size);
    return buffer.data();
  }

  // Every stage's parameters, dense layers' rearranged for the products; part `part`
  // of `parts`.
  static void pack(const T* params, T* packed, std::size_t part = 0, std::size_t parts = 1) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (pack_stage<I>(params + stage<I>::offset, packed + packed_offset[I], part, parts), ...);
    }(std::make_index_sequence<depth>{});
  }

  // Adds the loss and gradient sums of samples [first, last) into grad[0, P) and
  // returns the loss sum. buffer: buffer_size values, this thread's (thread_buffer()).
  template <class Loss>
  static double accumulate(const Model& model, const Loss& loss, const T* packed, const T* x, const T* y,
                           std::size_t first, std::size_t last, T* buffer, double* grad) {
    const stages_type stages = flatten_stages<0>(model);
    double total = 0.0;
    for (std::size_t start = first; start < last; start += chunk) {
      const std::size_t count = std::min(chunk, last - start), used = simd::round_up(count, simd::tile_rows);
      forward_chunk(stages, packed, x, start, count, used, buffer);
      total += loss_and_output_delta(loss, y + start * Out, count, used, buffer);  // zero deltas past count
      backward<depth - 1>(stages, packed, buffer, used, grad);
    }
    return total;
  }

  // The model's outputs for samples [first, last) of x into y (sample-major, Out
  // values a sample), chunk by chunk: tl::apply.
  static void outputs(const Model& model, const T* packed, const T* x, std::size_t first, std::size_t last,
                      T* buffer, T* y) {
    const stages_type stages = flatten_stages<0>(model);
    constexpr std::size_t stride = out_stride<depth - 1>;
    for (std::size_t start = first; start < last; start += chunk) {
      const std::size_t count = std::min(chunk, last - start), used = simd::round_up(count, simd::tile_rows);
      forward_chunk(stages, packed, x, start, count, used, buffer);
      const T* out = outputs_of<depth - 1>(buffer);
      for (std::size_t s = 0; s < count; ++s)
        for (std::size_t o = 0; o < Out; ++o) y[(start + s) * Out + o] = out[s * stride + o];
    }
  }

 private:
  template <std::size_t I>
  static void pack_stage(const T* params, T* packed, std::size_t part, std::size_t parts) {
    if constexpr (kind<I> == stage_kind::dense) dense<I>::pack(params, packed, part, parts);
    else if constexpr (kind<I> == stage_kind::sample)
      if (part == 0) std::copy(params, params + stage<I>::parameter_count, packed);
  }

  // Forward of samples [start, start + count) through every stage, in rows [0, used);
  // rows past count repeat the last sample (zeros could be outside the model's domain).
  static void forward_chunk(const stages_type& stages, const T* packed, const T* x, std::size_t start,
                            std::size_t count, std::size_t used, T* buffer) {
    T* input = inputs_of<0>(buffer);
    for (std::size_t s = 0; s < used; ++s)
      for (std::size_t i = 0; i < In; ++i) input[s * in_stride + i] = x[(start + std::min(s, count - 1)) * In + i];
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (forward_stage<I>(std::get<I>(stages), packed + packed_offset[I], used, buffer), ...);
    }(std::make_index_sequence<depth>{});
  }

  template <std::size_t I>
  static void forward_stage(const stage<I>& st, const T* packed, std::size_t used, T* buffer) {
    const T* in = inputs_of<I>(buffer);
    T* out = outputs_of<I>(buffer);
    constexpr std::size_t width = out_stride<I>;
    if constexpr (kind<I> == stage_kind::dense) {
      dense<I>::forward(st.layer, packed, in, out, deltas_of<I>(buffer), used, scratch_of(buffer));
    } else if constexpr (kind<I> == stage_kind::sample) {
      sample<I>::forward(st.layer, packed, in, out, private_of<I>(buffer), used);
    } else if constexpr (kind<I> == stage_kind::skip_open) {
      std::copy(in, in + used * width, out);
    } else {  // skip_close: f(x) + x, x being its open stage's output
      const T* x = outputs_of<open_of<stages_type>(I)>(buffer);
      for (std::size_t j = 0; j < used * width; ++j) out[j] = in[j] + x[j];
    }
  }

  // The chunk's loss sum; d loss / d outputs into the last stage's delta buffer.
  template <class Loss>
  static double loss_and_output_delta(const Loss& loss, const T* y, std::size_t count, std::size_t used, T* buffer) {
    constexpr std::size_t K = 16, stride = out_stride<depth - 1>;
    const T* yhat = outputs_of<depth - 1>(buffer);
    T* delta = deltas_of<depth - 1>(buffer);
    group_array<T, Out * K, K> yhs, ygs, douts;  // (core/scratch.hpp: on the heap for many outputs)
    T *yh = yhs.data(), *yg = ygs.data(), *dout = douts.data();
    alignas(64) T lane_loss[K];
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
        group_array<T, Out, K> d;
        for (std::size_t o = 0; o < Out; ++o) d.data()[o] = dout[o * K + k];
        hand_back<kind<depth - 1> == stage_kind::dense>(delta + (g + k) * stride, d.data(), Out);
      }
    }
    std::fill(delta + count * stride, delta + used * stride, T(0));  // padding rows add nothing
    return double(chunk_loss);
  }

  // Stage I's backward: its gradient, and d loss / d its input handed to stage I - 1.
  template <std::size_t I>
  static void backward(const stages_type& stages, const T* packed, T* buffer, std::size_t used, double* grad) {
    constexpr bool into_slopes = [] {
      if constexpr (I > 0) return kind<I - 1> == stage_kind::dense;
      else return false;
    }();
    T* delta = deltas_of<I>(buffer);
    [[maybe_unused]] T* below = nullptr;
    if constexpr (I > 0) below = deltas_of<I - 1>(buffer);
    constexpr std::size_t width = out_stride<I>;
    if constexpr (kind<I> == stage_kind::dense) {
      dense<I>::add_gradient(delta, inputs_of<I>(buffer), used, grad + stage<I>::offset, scratch_of(buffer));
      if constexpr (I > 0)
        dense<I>::template input_delta<into_slopes>(packed + packed_offset[I], delta, below, used, scratch_of(buffer));
    } else if constexpr (kind<I> == stage_kind::sample) {
      T* priv = private_of<I>(buffer);
      sample<I>::template backward<(I > 0), into_slopes>(
          std::get<I>(stages).layer, packed + packed_offset[I], inputs_of<I>(buffer), outputs_of<I>(buffer), delta,
          priv, below, used, priv + saved_for_chunk<rows, sample<I>::saved_per_group>, grad + stage<I>::offset);
    } else if constexpr (I > 0) {
      // Real columns only: the padding columns of a delta buffer stay as they are (zero).
      constexpr std::size_t real = stage<I>::outputs;
      for (std::size_t s = 0; s < used; ++s) {
        if constexpr (kind<I> == stage_kind::skip_open) {  // the inner layers' delta and the identity path's
          const T* identity = deltas_of<close_of<stages_type>(I)>(buffer) + s * width;
          for (std::size_t j = 0; j < real; ++j) delta[s * width + j] += identity[j];
        }
        hand_back<into_slopes>(below + s * width, delta + s * width, real);
      }
    }
    if constexpr (I > 0) backward<I - 1>(stages, packed, buffer, used, grad);
  }
};

}  // namespace tl::detail
