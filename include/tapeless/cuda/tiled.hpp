// The per-step partial sums for models too large for per-thread gradients (the
// scaled fit's 1-64-64-1 has 4353 parameters). A block copies the parameters to
// shared memory once, then takes tiles of 32 samples and keeps each tile's
// activations and deltas in shared memory, layer by layer; each thread owns a fixed
// slice of every layer's weight and bias gradient and accumulates it in registers
// over all the block's tiles, so activations never leave the chip and each block
// writes one partial, summed by reduce_update_kernel.
//
// Register blocking keeps shared-memory loads below one per multiply-add: a warp is
// 32 samples of one tile, each thread computes several outputs (forward) or inputs
// (backward) of its sample, and weights and deltas are read 16 bytes at a time where
// the widths allow it (In a multiple of 4).
#pragma once

#include <cstddef>

#include "tapeless/cuda/kernels.hpp"

namespace tl::detail::gpu {

inline constexpr int tiled_threads = 256;
inline constexpr std::size_t tile = 32;                         // samples per tile: one warp
inline constexpr std::size_t groups = tiled_threads / tile;     // warps per block
inline constexpr std::size_t tile_stride = tile + 1;            // outputs: odd stride, no bank conflicts
inline constexpr std::size_t slope_stride = tile + 4;           // deltas: 16-byte rows for float4 reads
inline constexpr std::size_t round4(std::size_t n) { return (n + 3) / 4 * 4; }

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
  // Shared floats: the parameters, the input tile and each layer's outputs, then each
  // layer's slopes (deltas); every region starts 16-byte aligned.
  static constexpr std::size_t params_floats = round4(Model::parameter_count);
  static constexpr std::size_t output_floats = round4((Model::inputs + Model::activation_count) * tile_stride);
  static constexpr std::size_t shared_floats = params_floats + output_floats + Model::activation_count * slope_stride;
};

// Layer L's outputs ([unit][tile_stride]); L = size_t(-1) is the input tile.
template <class Model, std::size_t L>
__device__ inline float* tile_out(float* shared) {
  if constexpr (L == std::size_t(-1)) {
    return shared + tiled_layout<Model>::params_floats;
  } else {
    return shared + tiled_layout<Model>::params_floats +
           (Model::inputs + Model::template activation_offset<L>) * tile_stride;
  }
}
template <class Model, std::size_t L>
__device__ inline float* tile_slope(float* shared) {
  return shared + tiled_layout<Model>::params_floats + tiled_layout<Model>::output_floats +
         Model::template activation_offset<L> * slope_stride;
}

template <class Model, std::size_t L>
inline constexpr bool float4_rows =
    Model::template layer_type<L>::inputs % 4 == 0 && Model::template weight_offset<L> % 4 == 0;

template <class Model, std::size_t L = 0>
__device__ inline void tile_forward(const Model& model, const float* params, float* shared) {
  using layer = typename Model::template layer_type<L>;
  constexpr std::size_t In = layer::inputs, Out = layer::outputs, R = (Out + groups - 1) / groups;
  const float* w = params + Model::template weight_offset<L>;
  const float* b = params + Model::template bias_offset<L>;
  const float* in = tile_out<Model, L - 1>(shared);
  float* out = tile_out<Model, L>(shared);
  float* slope = tile_slope<Model, L>(shared);
  const auto& act = model.template layer<L>().activation;
  const std::size_t s = threadIdx.x % tile, g = threadIdx.x / tile;  // outputs g, g + groups, ...
  float z[R];
#pragma unroll
  for (std::size_t r = 0; r < R; ++r) z[r] = g + groups * r < Out ? b[g + groups * r] : 0.0f;
  if constexpr (float4_rows<Model, L>) {
    for (std::size_t i = 0; i < In; i += 4) {
      const float a0 = in[i * tile_stride + s], a1 = in[(i + 1) * tile_stride + s];
      const float a2 = in[(i + 2) * tile_stride + s], a3 = in[(i + 3) * tile_stride + s];
#pragma unroll
      for (std::size_t r = 0; r < R; ++r) {
        const std::size_t o = g + groups * r;
        if (o < Out) {
          const float4 w4 = *reinterpret_cast<const float4*>(w + o * In + i);
          z[r] += w4.x * a0;
          z[r] += w4.y * a1;
          z[r] += w4.z * a2;
          z[r] += w4.w * a3;
        }
      }
    }
  } else {
    for (std::size_t i = 0; i < In; ++i) {
      const float a = in[i * tile_stride + s];
#pragma unroll
      for (std::size_t r = 0; r < R; ++r)
        if (g + groups * r < Out) z[r] += w[(g + groups * r) * In + i] * a;
    }
  }
#pragma unroll
  for (std::size_t r = 0; r < R; ++r) {
    const std::size_t o = g + groups * r;
    if (o < Out) out[o * tile_stride + s] = act.value_and_derivative(z[r], slope[o * slope_stride + s]);
  }
  __syncthreads();
  if constexpr (L + 1 < Model::depth) tile_forward<Model, L + 1>(model, params, shared);
}

// Layer L's weight and bias gradients, added into this thread's slice.
template <class Model, std::size_t L, std::size_t R>
__device__ inline void tile_weight_gradient(float* shared, float (&acc)[R]) {
  using layer = typename Model::template layer_type<L>;
  constexpr std::size_t In = layer::inputs, Out = layer::outputs, W = layer::weight_count;
  constexpr std::size_t base = tiled_layout<Model>::template slice<L>;
  const float* in = tile_out<Model, L - 1>(shared);
  const float* delta = tile_slope<Model, L>(shared);
  if constexpr (tiled_threads % In == 0) {
    // Every entry this thread owns lies in one input column i: load in[i][s] once per
    // sample for all of them, and the deltas four samples at a time.
    constexpr std::size_t rows_apart = tiled_threads / In;
    const std::size_t i = threadIdx.x % In, o0 = threadIdx.x / In;
    float sum[owned<W>] = {};
    for (std::size_t s = 0; s < tile; s += 4) {
      const float a0 = in[i * tile_stride + s], a1 = in[i * tile_stride + s + 1];
      const float a2 = in[i * tile_stride + s + 2], a3 = in[i * tile_stride + s + 3];
#pragma unroll
      for (std::size_t k = 0; k < owned<W>; ++k) {
        const std::size_t o = o0 + k * rows_apart;
        if (o < Out) {
          const float4 d4 = *reinterpret_cast<const float4*>(delta + o * slope_stride + s);
          sum[k] += d4.x * a0;
          sum[k] += d4.y * a1;
          sum[k] += d4.z * a2;
          sum[k] += d4.w * a3;
        }
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
        for (std::size_t s = 0; s < tile; ++s) sum += delta[o * slope_stride + s] * in[i * tile_stride + s];
        acc[base + k] += sum;
      }
    }
  }
#pragma unroll
  for (std::size_t k = 0; k < owned<Out>; ++k) {
    const std::size_t o = threadIdx.x + k * tiled_threads;
    if (o < Out) {
      float sum = 0.0f;
      for (std::size_t s = 0; s < tile; ++s) sum += delta[o * slope_stride + s];
      acc[base + owned<W> + k] += sum;
    }
  }
}

// The delta below layer L: slope[L-1] *= W^T delta[L], each thread several inputs of
// its sample.
template <class Model, std::size_t L>
__device__ inline void tile_input_delta(const float* params, float* shared) {
  using layer = typename Model::template layer_type<L>;
  constexpr std::size_t In = layer::inputs, Out = layer::outputs;
  const float* w = params + Model::template weight_offset<L>;
  const float* delta = tile_slope<Model, L>(shared);
  float* below = tile_slope<Model, L - 1>(shared);
  const std::size_t s = threadIdx.x % tile, g = threadIdx.x / tile;
  if constexpr (float4_rows<Model, L>) {
    constexpr std::size_t Q = (In + 4 * groups - 1) / (4 * groups);  // blocks of 4 inputs: 4(g + groups q)
    float d[Q][4] = {};
    for (std::size_t o = 0; o < Out; ++o) {
      const float dl = delta[o * slope_stride + s];
#pragma unroll
      for (std::size_t q = 0; q < Q; ++q) {
        const std::size_t i = 4 * (g + groups * q);
        if (i < In) {
          const float4 w4 = *reinterpret_cast<const float4*>(w + o * In + i);
          d[q][0] += w4.x * dl;
          d[q][1] += w4.y * dl;
          d[q][2] += w4.z * dl;
          d[q][3] += w4.w * dl;
        }
      }
    }
#pragma unroll
    for (std::size_t q = 0; q < Q; ++q) {
      const std::size_t i = 4 * (g + groups * q);
      if (i < In)
        for (std::size_t j = 0; j < 4; ++j) below[(i + j) * slope_stride + s] *= d[q][j];
    }
  } else {
    constexpr std::size_t Q = (In + groups - 1) / groups;  // inputs g + groups q
    float d[Q] = {};
    for (std::size_t o = 0; o < Out; ++o) {
      const float dl = delta[o * slope_stride + s];
#pragma unroll
      for (std::size_t q = 0; q < Q; ++q)
        if (g + groups * q < In) d[q] += w[o * In + g + groups * q] * dl;
    }
#pragma unroll
    for (std::size_t q = 0; q < Q; ++q)
      if (g + groups * q < In) below[(g + groups * q) * slope_stride + s] *= d[q];
  }
}

template <class Model, std::size_t L = Model::depth - 1, std::size_t R>
__device__ inline void tile_backward(const float* params, float* shared, float (&acc)[R]) {
  tile_weight_gradient<Model, L>(shared, acc);
  if constexpr (L > 0) {
    tile_input_delta<Model, L>(params, shared);  // writes slope[L-1], which the line above does not read
    __syncthreads();
    tile_backward<Model, L - 1>(params, shared, acc);
  }
}

// Per-step partial sums, tiled: the same output as partial_sums_kernel.
template <class Model, class Loss>
__global__ void __launch_bounds__(tiled_threads)
    tiled_partial_sums_kernel(Model model, Loss loss, const float* global_params, const float* x, const float* y,
                              std::size_t batch, float* partials, long* step_counter) {
  using layout = tiled_layout<Model>;
  constexpr std::size_t In = Model::inputs, Out = Model::outputs, N = Model::parameter_count + 1;
  constexpr std::size_t last = Model::depth - 1;
  extern __shared__ float4 shared_storage[];  // float4: 16-byte alignment for the float4 reads
  float* shared = reinterpret_cast<float*>(shared_storage);
  if (step_counter && blockIdx.x == 0 && threadIdx.x == 0) ++*step_counter;
  for (std::size_t p = threadIdx.x; p < Model::parameter_count; p += blockDim.x) shared[p] = global_params[p];
  const float* params = shared;  // visible to all after the first tile's barrier
  float acc[layout::registers] = {};
  float loss_sum = 0.0f;
  float* input = tile_out<Model, std::size_t(-1)>(shared);
  for (std::size_t first = blockIdx.x * tile; first < batch; first += std::size_t(gridDim.x) * tile) {
    const std::size_t count = batch - first < tile ? batch - first : tile;
    for (std::size_t item = threadIdx.x; item < In * tile; item += blockDim.x) {
      const std::size_t i = item / tile, s = item % tile;
      input[i * tile_stride + s] = s < count ? x[(first + s) * In + i] : 0.0f;
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
      for (std::size_t o = 0; o < Out; ++o)
        tile_slope<Model, last>(shared)[o * slope_stride + s] *= s < count ? dout[o] : 0.0f;
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
