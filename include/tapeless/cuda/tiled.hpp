// The per-step partial sums for models too large for per-thread gradients (the
// scaled fit's 1-64-64-1 has 4353 parameters). A block takes tiles of T samples and
// keeps the tile's activations and deltas in shared memory, layer by layer; each
// thread owns a fixed slice of every layer's weight and bias gradient and accumulates
// it in registers over all the block's tiles, so activations never leave the chip and
// each block writes one partial, summed by reduce_update_kernel.
#pragma once

#include <cstddef>

#include "tapeless/cuda/kernels.hpp"

namespace tl::detail::gpu {

inline constexpr int tiled_threads = 256;
inline constexpr std::size_t tile = 32;              // samples per tile
inline constexpr std::size_t tile_stride = tile + 1;  // padded rows: no bank conflicts

template <std::size_t Count>
inline constexpr std::size_t owned = (Count + tiled_threads - 1) / tiled_threads;

// Registers per thread for layer L's gradient slice: weights, then biases.
template <class Model, std::size_t L>
inline constexpr std::size_t slice_size =
    owned<Model::template layer_type<L>::weight_count> + owned<Model::template layer_type<L>::outputs>;

template <class Model, std::size_t... L>
constexpr std::size_t total_slices(std::index_sequence<L...>) { return (slice_size<Model, L> + ... + 0); }
template <class Model, std::size_t... L>
constexpr std::size_t slice_offset(std::size_t layer, std::index_sequence<L...>) {
  std::size_t offset = 0, l = 0;
  ((offset += l++ < layer ? slice_size<Model, L> : 0), ...);
  return offset;
}

template <class Model>
struct tiled_layout {
  static constexpr std::size_t registers = total_slices<Model>(std::make_index_sequence<Model::depth>{});
  template <std::size_t L>
  static constexpr std::size_t slice = slice_offset<Model>(L, std::make_index_sequence<Model::depth>{});
  // Shared floats: input tile, each layer's outputs and slopes (deltas), then a copy
  // of the parameters (read once per block instead of once per multiply-add).
  static constexpr std::size_t activation_floats = (Model::inputs + 2 * Model::activation_count) * tile_stride;
  static constexpr std::size_t shared_floats = activation_floats + Model::parameter_count;
};

template <class Model, std::size_t L>
__device__ inline float* tile_out(float* shared) {
  if constexpr (L == std::size_t(-1)) return shared;  // the input tile
  else return shared + (Model::inputs + Model::template activation_offset<L>) * tile_stride;
}
template <class Model, std::size_t L>
__device__ inline float* tile_slope(float* shared) {
  return shared + (Model::inputs + Model::activation_count + Model::template activation_offset<L>) * tile_stride;
}

template <class Model, std::size_t L = 0>
__device__ inline void tile_forward(const Model& model, const float* params, float* shared) {
  using layer = typename Model::template layer_type<L>;
  constexpr std::size_t In = layer::inputs, Out = layer::outputs;
  const float* w = params + Model::template weight_offset<L>;
  const float* b = params + Model::template bias_offset<L>;
  const float* in = tile_out<Model, L - 1>(shared);
  float* out = tile_out<Model, L>(shared);
  float* slope = tile_slope<Model, L>(shared);
  const auto& act = model.template layer<L>().activation;
  for (std::size_t item = threadIdx.x; item < Out * tile; item += blockDim.x) {
    const std::size_t o = item / tile, s = item % tile;  // a warp: one output, 32 samples
    float z = b[o];
#pragma unroll 8
    for (std::size_t i = 0; i < In; ++i) z += w[o * In + i] * in[i * tile_stride + s];
    out[o * tile_stride + s] = act.value_and_derivative(z, slope[o * tile_stride + s]);
  }
  __syncthreads();
  if constexpr (L + 1 < Model::depth) tile_forward<Model, L + 1>(model, params, shared);
}

template <class Model, std::size_t L = Model::depth - 1, std::size_t R>
__device__ inline void tile_backward(const float* params, float* shared, float (&acc)[R]) {
  using layer = typename Model::template layer_type<L>;
  constexpr std::size_t In = layer::inputs, Out = layer::outputs, W = layer::weight_count;
  constexpr std::size_t base = tiled_layout<Model>::template slice<L>;
  const float* in = tile_out<Model, L - 1>(shared);
  const float* delta = tile_slope<Model, L>(shared);  // already the layer's output delta
  if constexpr (tiled_threads % In == 0) {
    // Every entry this thread owns lies in one input column i: load in[i][s] once per
    // sample and use it for all of them.
    constexpr std::size_t rows_apart = tiled_threads / In;
    const std::size_t i = threadIdx.x % In, o0 = threadIdx.x / In;
    float sum[owned<W>] = {};
    for (std::size_t s = 0; s < tile; ++s) {
      const float a = in[i * tile_stride + s];
#pragma unroll
      for (std::size_t k = 0; k < owned<W>; ++k) {
        const std::size_t o = o0 + k * rows_apart;
        if (o < Out) sum[k] += delta[o * tile_stride + s] * a;
      }
    }
#pragma unroll
    for (std::size_t k = 0; k < owned<W>; ++k) acc[base + k] += sum[k];
  } else {
#pragma unroll
    for (std::size_t k = 0; k < owned<W>; ++k) {
      const std::size_t e = threadIdx.x + k * tiled_threads;
      if (e < W) {
        const std::size_t o = e / In, i = e % In;
        float sum = 0.0f;
#pragma unroll 8
        for (std::size_t s = 0; s < tile; ++s) sum += delta[o * tile_stride + s] * in[i * tile_stride + s];
        acc[base + k] += sum;
      }
    }
  }
#pragma unroll
  for (std::size_t k = 0; k < owned<Out>; ++k) {
    const std::size_t o = threadIdx.x + k * tiled_threads;
    if (o < Out) {
      float sum = 0.0f;
      for (std::size_t s = 0; s < tile; ++s) sum += delta[o * tile_stride + s];
      acc[base + owned<W> + k] += sum;
    }
  }
  if constexpr (L > 0) {
    const float* w = params + Model::template weight_offset<L>;
    float* below = tile_slope<Model, L - 1>(shared);
    for (std::size_t item = threadIdx.x; item < In * tile; item += blockDim.x) {
      const std::size_t i = item / tile, s = item % tile;
      float d = 0.0f;
#pragma unroll 8
      for (std::size_t o = 0; o < Out; ++o) d += w[o * In + i] * delta[o * tile_stride + s];
      below[i * tile_stride + s] *= d;
    }
    __syncthreads();
    tile_backward<Model, L - 1>(params, shared, acc);
  }
}

// Per-step partial sums, tiled: the same output as partial_sums_kernel.
template <class Model, class Loss>
__global__ void __launch_bounds__(tiled_threads)
    tiled_partial_sums_kernel(Model model, Loss loss, const float* params, const float* x, const float* y,
                              std::size_t batch, float* partials, long* step_counter) {
  using layout = tiled_layout<Model>;
  constexpr std::size_t In = Model::inputs, Out = Model::outputs, N = Model::parameter_count + 1;
  constexpr std::size_t last = Model::depth - 1;
  extern __shared__ float shared[];
  if (step_counter && blockIdx.x == 0 && threadIdx.x == 0) ++*step_counter;
  float* const local_params = shared + layout::activation_floats;
  for (std::size_t p = threadIdx.x; p < Model::parameter_count; p += blockDim.x) local_params[p] = params[p];
  params = local_params;  // visible to all after the first tile's barrier
  float acc[layout::registers] = {};
  float loss_sum = 0.0f;
  for (std::size_t first = blockIdx.x * tile; first < batch; first += std::size_t(gridDim.x) * tile) {
    const std::size_t count = batch - first < tile ? batch - first : tile;
    for (std::size_t item = threadIdx.x; item < In * tile; item += blockDim.x) {
      const std::size_t i = item / tile, s = item % tile;
      shared[i * tile_stride + s] = s < count ? x[(first + s) * In + i] : 0.0f;
    }
    __syncthreads();
    tile_forward(model, params, shared);
    if (threadIdx.x < tile) {  // the loss, one thread per sample; padding adds nothing
      const std::size_t s = threadIdx.x;
      float yhat[Out], target[Out], dout[Out], l = 0.0f;
      for (std::size_t o = 0; o < Out; ++o) {
        yhat[o] = tile_out<Model, last>(shared)[o * tile_stride + s];
        target[o] = s < count ? y[(first + s) * Out + o] : yhat[o];
      }
      loss.template group<Out, 1>(yhat, target, dout, &l);
      for (std::size_t o = 0; o < Out; ++o) tile_slope<Model, last>(shared)[o * tile_stride + s] *= s < count ? dout[o] : 0.0f;
      if (s < count) loss_sum += l;
    }
    __syncthreads();
    tile_backward<Model>(params, shared, acc);
    __syncthreads();
  }
  // This block's partial, in the flat parameter layout.
  float* out = partials + blockIdx.x * N;
  [&]<std::size_t... L>(std::index_sequence<L...>) {
    (
        [&] {
          using layer = typename Model::template layer_type<L>;
          constexpr std::size_t W = layer::weight_count, base = layout::template slice<L>;
#pragma unroll
          for (std::size_t k = 0; k < owned<W>; ++k) {
            const std::size_t e = threadIdx.x + k * tiled_threads;
            if (e < W) out[Model::template weight_offset<L> + e] = acc[base + k];
          }
#pragma unroll
          for (std::size_t k = 0; k < owned<layer::outputs>; ++k) {
            const std::size_t o = threadIdx.x + k * tiled_threads;
            if (o < layer::outputs) out[Model::template bias_offset<L> + o] = acc[base + owned<W> + k];
          }
        }(),
        ...);
  }(std::make_index_sequence<Model::depth>{});
  // The loss: summed over the first warp (only threads < tile hold any).
  if (threadIdx.x < warp_size) {
    float v = loss_sum;
    for (int offset = warp_size / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (threadIdx.x == 0) out[N - 1] = v;
  }
}

}  // namespace tl::detail::gpu
