// The per-step partial sums for models too large for per-thread gradients (the
// scaled fit's 1-64-64-1 has 4353 parameters). A block copies the parameters to
// shared memory once, then takes tiles of 64 samples and keeps each tile's
// activations and deltas in shared memory, one row of 64 samples per unit, layer by
// layer; each thread owns a fixed 4x4 block of every layer's weight gradient and
// accumulates it in registers over all the block's tiles, so activations never leave
// the chip and each block writes one partial, summed by reduce_update_kernel.
//
// All three products of a layer are register-blocked the same way: a thread computes
// a 4x4 micro-tile (4 units x 4 samples, or 4 outputs x 4 inputs) from 16-byte
// loads, so shared memory serves under one load per 4 multiply-adds:
//   forward          z[o][s]     = b[o] + sum_i W[o][i] a[i][s]
//   input delta      d[i][s]    *= sum_o W[o][i] delta[o][s]
//   weight gradient  dW[o][i]   += sum_s delta[o][s] a[i][s]
#pragma once

#include <cstddef>

#include "tapeless/cuda/kernels.hpp"

namespace tl::detail::gpu {

inline constexpr int tiled_threads = 256;
inline constexpr std::size_t tile = 64;                // samples per tile
inline constexpr std::size_t row = tile + 4;           // floats per unit row: 16-byte aligned, 4 banks apart
inline constexpr std::size_t sample_quads = tile / 4;  // a micro-tile's 4 samples
inline constexpr std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }
inline constexpr std::size_t round4(std::size_t n) { return ceil_div(n, 4) * 4; }

__device__ inline float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ inline void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ inline void fma4(float4& acc, float s, float4 v) {
  acc.x += s * v.x;
  acc.y += s * v.y;
  acc.z += s * v.z;
  acc.w += s * v.w;
}

// Layer L's shapes. Its weight gradient is cut into 4x4 micro-tiles with outputs
// o = og + out_groups r and inputs i = ig + in_groups r (r < 4); micro-tile t has
// og = t % out_groups, so threads next to each other own neighbouring rows and their
// 16-byte loads hit distinct banks. Bias gradients: 4 threads an output, each a
// quarter of the tile's samples.
template <class Model, std::size_t L>
struct tiled_layer {
  using layer = typename Model::template layer_type<L>;
  static constexpr std::size_t In = layer::inputs, Out = layer::outputs;
  static constexpr std::size_t out_groups = ceil_div(Out, 4), in_groups = ceil_div(In, 4);
  static constexpr std::size_t gradient_tiles = out_groups * in_groups;
  static constexpr std::size_t rounds = ceil_div(gradient_tiles, tiled_threads);
  static constexpr std::size_t bias_rounds = ceil_div(4 * Out, tiled_threads);
  static constexpr std::size_t slice = rounds * 16 + bias_rounds;
  // Weight rows start 16-byte aligned and hold whole float4s.
  static constexpr bool float4_rows = In % 4 == 0 && Model::template weight_offset<L> % 4 == 0;
};

// The micro-tile a thread takes first in a stage (forward 0, weight gradient 1) of
// layer L: a thin layer's stage has fewer micro-tiles than threads, and rotating by
// whole warps puts each such stage on another scheduler (warp w issues on w % 4).
template <std::size_t L, int Stage>
__device__ inline std::size_t first_micro_tile() {
  return (threadIdx.x + warp_size * ((3 * L + 5 * Stage) % (tiled_threads / warp_size))) % tiled_threads;
}

template <class Model, std::size_t... L>
constexpr std::size_t slice_offset(std::size_t layer, std::index_sequence<L...>) {
  std::size_t offset = 0, l = 0;
  ((offset += l++ < layer ? tiled_layer<Model, L>::slice : 0), ...);
  return offset;
}

template <class Model>
struct tiled_layout {
  using layers = std::make_index_sequence<Model::depth>;
  static constexpr std::size_t registers = slice_offset<Model>(Model::depth, layers{});
  template <std::size_t L>
  static constexpr std::size_t slice = slice_offset<Model>(L, layers{});
  // Shared floats: the parameters, then rows of `row` floats: the input tile, each
  // layer's outputs, each layer's slopes (activation derivatives, then deltas).
  static constexpr std::size_t params_floats = round4(Model::parameter_count);
  static constexpr std::size_t rows = Model::inputs + 2 * Model::activation_count;
  static constexpr std::size_t shared_floats = params_floats + rows * row;
};

// Layer L's outputs; L = size_t(-1) is the input tile.
template <class Model, std::size_t L>
__device__ inline float* tile_out(float* shared) {
  float* rows = shared + tiled_layout<Model>::params_floats;
  if constexpr (L == std::size_t(-1)) return rows;
  else return rows + (Model::inputs + Model::template activation_offset<L>) * row;
}
template <class Model, std::size_t L>
__device__ inline float* tile_slope(float* shared) {
  return shared + tiled_layout<Model>::params_floats +
         (Model::inputs + Model::activation_count + Model::template activation_offset<L>) * row;
}

template <class Model, std::size_t L = 0>
__device__ inline void tile_forward(const Model& model, const float* params, float* shared) {
  using shape = tiled_layer<Model, L>;
  constexpr std::size_t In = shape::In, Out = shape::Out, G = shape::out_groups;
  const float* w = params + Model::template weight_offset<L>;
  const float* b = params + Model::template bias_offset<L>;
  const float* in = tile_out<Model, L - 1>(shared);
  const auto& act = model.template layer<L>().activation;
  for (std::size_t t = first_micro_tile<L, 0>(); t < G * sample_quads; t += tiled_threads) {
    const std::size_t s = 4 * (t % sample_quads), og = t / sample_quads;  // outputs og + G r
    float4 z[4];
#pragma unroll
    for (std::size_t r = 0; r < 4; ++r) {
      const float bias = og + G * r < Out ? b[og + G * r] : 0.0f;
      z[r] = make_float4(bias, bias, bias, bias);
    }
    if constexpr (shape::float4_rows) {
      for (std::size_t i = 0; i < In; i += 4) {
        float4 a[4];
#pragma unroll
        for (std::size_t j = 0; j < 4; ++j) a[j] = load4(in + (i + j) * row + s);
#pragma unroll
        for (std::size_t r = 0; r < 4; ++r) {
          if (Out % 4 == 0 || og + G * r < Out) {
            const float4 w4 = load4(w + (og + G * r) * In + i);
            fma4(z[r], w4.x, a[0]);
            fma4(z[r], w4.y, a[1]);
            fma4(z[r], w4.z, a[2]);
            fma4(z[r], w4.w, a[3]);
          }
        }
      }
    } else {
      for (std::size_t i = 0; i < In; ++i) {
        const float4 a = load4(in + i * row + s);
#pragma unroll
        for (std::size_t r = 0; r < 4; ++r)
          if (og + G * r < Out) fma4(z[r], w[(og + G * r) * In + i], a);
      }
    }
#pragma unroll
    for (std::size_t r = 0; r < 4; ++r) {
      const std::size_t o = og + G * r;
      if (o < Out) {
        float4 value, slope;
        value.x = act.value_and_derivative(z[r].x, slope.x);
        value.y = act.value_and_derivative(z[r].y, slope.y);
        value.z = act.value_and_derivative(z[r].z, slope.z);
        value.w = act.value_and_derivative(z[r].w, slope.w);
        store4(tile_out<Model, L>(shared) + o * row + s, value);
        store4(tile_slope<Model, L>(shared) + o * row + s, slope);
      }
    }
  }
  __syncthreads();
  if constexpr (L + 1 < Model::depth) tile_forward<Model, L + 1>(model, params, shared);
}

// Layer L's weight gradient over one tile, added into this thread's slice: per round
// one micro-tile.
template <class Model, std::size_t L, std::size_t R>
__device__ inline void tile_weight_gradient(float* shared, float (&acc)[R]) {
  using shape = tiled_layer<Model, L>;
  constexpr std::size_t In = shape::In, Out = shape::Out, Go = shape::out_groups, Gi = shape::in_groups;
  const float* in = tile_out<Model, L - 1>(shared);
  const float* delta = tile_slope<Model, L>(shared);
#pragma unroll
  for (std::size_t q = 0; q < shape::rounds; ++q) {
    const std::size_t t = first_micro_tile<L, 1>() + q * tiled_threads, og = t % Go, ig = t / Go;
    float* a = acc + tiled_layout<Model>::template slice<L> + q * 16;
    if (t >= shape::gradient_tiles) break;
    for (std::size_t s = 0; s < tile; s += 4) {
      float4 d[4], x[4];
#pragma unroll
      for (std::size_t r = 0; r < 4; ++r) {
        d[r] = Out % 4 == 0 || og + Go * r < Out ? load4(delta + (og + Go * r) * row + s) : float4{};
        x[r] = In % 4 == 0 || ig + Gi * r < In ? load4(in + (ig + Gi * r) * row + s) : float4{};
      }
#pragma unroll
      for (std::size_t ro = 0; ro < 4; ++ro) {
#pragma unroll
        for (std::size_t ri = 0; ri < 4; ++ri) {
          float& g = a[ro * 4 + ri];
          g += d[ro].x * x[ri].x;
          g += d[ro].y * x[ri].y;
          g += d[ro].z * x[ri].z;
          g += d[ro].w * x[ri].w;
        }
      }
    }
  }
}

// Layer L's bias gradients over one tile: output o's four quarters of the tile are
// summed by threads 4o..4o+3 and added together with two shuffles.
template <class Model, std::size_t L, std::size_t R>
__device__ inline void tile_bias_gradient(float* shared, float (&acc)[R]) {
  using shape = tiled_layer<Model, L>;
  constexpr std::size_t quarter = tile / 4;
  const float* delta = tile_slope<Model, L>(shared);
#pragma unroll
  for (std::size_t q = 0; q < shape::bias_rounds; ++q) {
    const std::size_t t = threadIdx.x + q * tiled_threads, o = t / 4, first = quarter * (t % 4);
    float sum = 0.0f;
    if (o < shape::Out) {
#pragma unroll
      for (std::size_t s = first; s < first + quarter; s += 4) {
        const float4 d = load4(delta + o * row + s);
        sum += d.x + d.y + d.z + d.w;
      }
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    acc[tiled_layout<Model>::template slice<L> + shape::rounds * 16 + q] += sum;
  }
}

// The delta below layer L: slope[L-1][i][s] *= sum_o W[o][i] delta[L][o][s], each
// thread 4 consecutive inputs of 4 samples.
template <class Model, std::size_t L>
__device__ inline void tile_input_delta(const float* params, float* shared) {
  using shape = tiled_layer<Model, L>;
  constexpr std::size_t In = shape::In, Out = shape::Out;
  const float* w = params + Model::template weight_offset<L>;
  const float* delta = tile_slope<Model, L>(shared);
  float* below = tile_slope<Model, L - 1>(shared);
  for (std::size_t t = threadIdx.x; t < ceil_div(In, 4) * sample_quads; t += tiled_threads) {
    const std::size_t s = 4 * (t % sample_quads), i = 4 * (t / sample_quads);
    float4 d[4] = {};
    for (std::size_t o = 0; o < Out; ++o) {
      const float4 dl = load4(delta + o * row + s);
      if constexpr (shape::float4_rows) {
        const float4 w4 = load4(w + o * In + i);
        fma4(d[0], w4.x, dl);
        fma4(d[1], w4.y, dl);
        fma4(d[2], w4.z, dl);
        fma4(d[3], w4.w, dl);
      } else {
#pragma unroll
        for (std::size_t r = 0; r < 4; ++r)
          if (i + r < In) fma4(d[r], w[o * In + i + r], dl);
      }
    }
#pragma unroll
    for (std::size_t r = 0; r < 4; ++r) {
      if (i + r < In) {
        float4 v = load4(below + (i + r) * row + s);
        v.x *= d[r].x;
        v.y *= d[r].y;
        v.z *= d[r].z;
        v.w *= d[r].w;
        store4(below + (i + r) * row + s, v);
      }
    }
  }
}

template <class Model, std::size_t L = Model::depth - 1, std::size_t R>
__device__ inline void tile_backward(const float* params, float* shared, float (&acc)[R]) {
  tile_weight_gradient<Model, L>(shared, acc);
  tile_bias_gradient<Model, L>(shared, acc);
  if constexpr (L > 0) {
    tile_input_delta<Model, L>(params, shared);  // writes slope[L-1], which the line above does not read
    __syncthreads();
    tile_backward<Model, L - 1>(params, shared, acc);
  }
}

// Writes this thread's slice of layer L's gradient to the block's partial row.
template <class Model, std::size_t L, std::size_t R>
__device__ inline void store_slice(const float (&acc)[R], float* out) {
  using shape = tiled_layer<Model, L>;
  constexpr std::size_t In = shape::In, Out = shape::Out, Go = shape::out_groups, Gi = shape::in_groups;
#pragma unroll
  for (std::size_t q = 0; q < shape::rounds; ++q) {
    const std::size_t t = first_micro_tile<L, 1>() + q * tiled_threads, og = t % Go, ig = t / Go;
    const float* a = acc + tiled_layout<Model>::template slice<L> + q * 16;
    if (t >= shape::gradient_tiles) break;
#pragma unroll
    for (std::size_t ro = 0; ro < 4; ++ro) {
      const std::size_t o = og + Go * ro;
      if (o >= Out) continue;
#pragma unroll
      for (std::size_t ri = 0; ri < 4; ++ri)
        if (ig + Gi * ri < In) out[Model::template weight_offset<L> + o * In + ig + Gi * ri] = a[ro * 4 + ri];
    }
  }
#pragma unroll
  for (std::size_t q = 0; q < shape::bias_rounds; ++q) {
    const std::size_t t = threadIdx.x + q * tiled_threads, o = t / 4;
    if (t % 4 == 0 && o < Out)
      out[Model::template bias_offset<L> + o] = acc[tiled_layout<Model>::template slice<L> + shape::rounds * 16 + q];
  }
}

// Per-step partial sums, tiled: the same output as partial_sums_kernel.
template <class Model, class Loss>
__global__ void __launch_bounds__(tiled_threads, 2)
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
      input[i * row + s] = s < count ? x[(first + s) * In + i] : 0.0f;
    }
    __syncthreads();
    tile_forward(model, params, shared);
    if (threadIdx.x < tile) {  // the loss, one thread per sample; padding adds nothing
      const std::size_t s = threadIdx.x;
      float yhat[Out], target[Out], dout[Out], l = 0.0f;
      for (std::size_t o = 0; o < Out; ++o) {
        yhat[o] = tile_out<Model, last>(shared)[o * row + s];
        target[o] = s < count ? y[(first + s) * Out + o] : yhat[o];
      }
      loss.template group<Out, 1>(yhat, target, dout, &l);
      for (std::size_t o = 0; o < Out; ++o) tile_slope<Model, last>(shared)[o * row + s] *= s < count ? dout[o] : 0.0f;
      if (s < count) loss_sum += l;
    }
    __syncthreads();
    tile_backward<Model>(params, shared, acc);
    __syncthreads();
  }
  float* out = partials + blockIdx.x * N;  // this block's partial, in the flat parameter layout
  [&]<std::size_t... L>(std::index_sequence<L...>) { (store_slice<Model, L>(acc, out), ...); }(
      std::make_index_sequence<Model::depth>{});
  // The loss: summed over the first two warps (only threads < tile hold any).
  __shared__ float warp_losses[tile / warp_size];
  if (threadIdx.x < tile) {
    float v = loss_sum;
    for (int offset = warp_size / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (threadIdx.x % warp_size == 0) warp_losses[threadIdx.x / warp_size] = v;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float v = 0.0f;
    for (std::size_t w = 0; w < tile / warp_size; ++w) v += warp_losses[w];
    out[N - 1] = v;
  }
}

}  // namespace tl::detail::gpu
