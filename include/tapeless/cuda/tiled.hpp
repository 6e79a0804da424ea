// The per-step partial sums for models too large for per-thread gradients (the
// scaled fit's 1-64-64-1 has 4353 parameters). A block copies the parameters to
// shared memory once, then takes tiles of 64 (or 32) samples and keeps each tile's
// activations and deltas in shared memory, one row of the tile's samples per unit,
// layer by layer (cuda/tile_layout.hpp); each thread owns fixed micro-tiles of the layers'
// weight gradients (packed, so thin layers share registers) and accumulates them over
// all the block's tiles, so activations never leave the chip and each block writes
// one partial, summed by reduce_update_kernel.
//
// With fp32 (the default), all three products of a layer are register-blocked the
// same way: a thread computes a 4x4 micro-tile (4 units x 4 samples, or 4 outputs x
// 4 inputs) from 16-byte loads, so shared memory serves under one load per 4
// multiply-adds:
//   forward          z[o][s]     = b[o] + sum_i W[o][i] a[i][s]
//   input delta      d[i][s]    *= sum_o W[o][i] delta[o][s]
//   weight gradient  dW[o][i]   += sum_s delta[o][s] a[i][s]
// With matmul_precision::tf32, layers whose widths are multiples of 16 run the same
// three products on tensor cores (cuda/tile_mma.hpp).
#pragma once

#include <cstddef>

#include "tapeless/cuda/tile_layout.hpp"
#include "tapeless/cuda/tile_mma.hpp"

namespace tl::detail::gpu {

// Forward of layer L with fp32 FMAs, 4 outputs x 4 samples a thread.
template <class Model, std::size_t L, matmul_precision P>
__device__ inline void fp32_forward(const Model& model, const float* params, float* shared) {
  using shape = tiled_layer<Model, L, P>;
  constexpr std::size_t In = shape::In, Out = shape::Out, G = shape::out_groups;
  constexpr std::size_t row = tiled_layout<Model, P>::row, sample_quads = tiled_layout<Model, P>::sample_quads;
  const float* w = params + weights_at<Model, L>;
  const float* b = params + bias_at<Model, L>;
  const float* in = tile_out<Model, P, L - 1>(shared);
  const auto& act = model.template sublayer<L>().activation;
  for (std::size_t t = first_micro_tile<L>(); t < G * sample_quads; t += tiled_threads) {
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
        store4(tile_out<Model, P, L>(shared) + o * row + s, value);
        store4(tile_slope<Model, P, L>(shared) + o * row + s, slope);
      }
    }
  }
}

template <class Model, matmul_precision P, std::size_t L = 0>
__device__ inline void tile_forward(const Model& model, const float* params, float* shared) {
  if constexpr (tiled_layer<Model, L, P>::uses_mma) mma_forward<Model, L, P>(model, params, shared);
  else fp32_forward<Model, L, P>(model, params, shared);
  __syncthreads();
  if constexpr (L + 1 < Model::depth) tile_forward<Model, P, L + 1>(model, params, shared);
}

// Calls f(k, local, mine) for each slot k that layer L's packed threads [Start, Start +
// Count) reach (tile_layout.hpp): this thread is virtual thread g = threadIdx.x +
// tiled_threads k there, local = g - Start, and `mine` says whether g is one of them.
// Every thread calls f for the same k, so f may shuffle within a warp.
template <std::size_t Start, std::size_t Count, class F>
__device__ inline void for_each_packed(F&& f) {
  if constexpr (Count > 0) {
    constexpr std::size_t first = Start / tiled_threads, last = ceil_div(Start + Count, tiled_threads);
#pragma unroll
    for (std::size_t k = first; k < last; ++k) {
      const std::size_t g = threadIdx.x + k * tiled_threads;
      f(k, g - Start, g - Start < Count);  // unsigned: below Start wraps past Count
    }
  }
}

// Layer L's weight gradient over one tile with fp32 FMAs, added into this thread's
// packed slots: a 4x4 micro-tile over its part of the tile's samples. Part p of S takes
// 32 / S samples at 32 / S x p in every 32, so the 8 threads of a 16-byte load phase
// (8 / S micro-tiles x S parts) read distinct banks.
template <class Model, std::size_t L, matmul_precision P, std::size_t R>
__device__ inline void fp32_weight_gradient(float* shared, float (&acc)[R]) {
  using shape = tiled_layer<Model, L, P>;
  using layout = tiled_layout<Model, P>;
  constexpr std::size_t In = shape::In, Out = shape::Out, Go = shape::out_groups, Gi = shape::in_groups;
  constexpr std::size_t S = shape::split, part_samples = 32 / S;
  constexpr std::size_t row = layout::row, tile = layout::tile;
  const float* in = tile_out<Model, P, L - 1>(shared);
  const float* delta = tile_slope<Model, P, L>(shared);
  for_each_packed<layout::template gradient_start<L>, shape::gradient_threads>(
      [&](std::size_t k, std::size_t local, bool mine) {
        const std::size_t t = local / S, og = t % Go, ig = t / Go;
        if (!mine || t >= shape::gradient_tiles) return;
        float* a = acc + layout::gradient_registers + 16 * k;
        for (std::size_t span = 0; span < tile; span += 32) {
#pragma unroll
          for (std::size_t j = 0; j < part_samples; j += 4) {
            const std::size_t s = span + part_samples * (local % S) + j;
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
      });
}

// Layer L's bias gradients over one tile: output o's four quarters of the tile are
// summed by packed threads 4o..4o+3 and added together with two shuffles.
template <class Model, std::size_t L, matmul_precision P, std::size_t R>
__device__ inline void tile_bias_gradient(float* shared, float (&acc)[R]) {
  using shape = tiled_layer<Model, L, P>;
  using layout = tiled_layout<Model, P>;
  constexpr std::size_t row = layout::row, quarter = layout::tile / 4;
  const float* delta = tile_slope<Model, P, L>(shared);
  for_each_packed<layout::template bias_start<L>, shape::bias_threads>(
      [&](std::size_t k, std::size_t local, bool mine) {
        const std::size_t o = local / 4, first = quarter * (local % 4);
        float sum = 0.0f;
        if (mine && o < shape::Out) {
#pragma unroll
          for (std::size_t s = first; s < first + quarter; s += 4) {
            const float4 d = load4(delta + o * row + s);
            sum += d.x + d.y + d.z + d.w;
          }
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (mine) acc[layout::bias_registers + k] += sum;
      });
}

// The delta below layer L with fp32 FMAs: slope[L-1][i][s] *= sum_o W[o][i]
// delta[L][o][s], each thread 4 consecutive inputs of 4 samples.
template <class Model, std::size_t L, matmul_precision P>
__device__ inline void fp32_input_delta(const float* params, float* shared) {
  using shape = tiled_layer<Model, L, P>;
  using layout = tiled_layout<Model, P>;
  constexpr std::size_t In = shape::In, Out = shape::Out, row = layout::row, sample_quads = layout::sample_quads;
  const float* w = params + weights_at<Model, L>;
  const float* delta = tile_slope<Model, P, L>(shared);
  float* below = tile_slope<Model, P, L - 1>(shared);
  // It runs beside layer L's weight gradient: start at the first whole warp after that.
  constexpr std::size_t gradient_end = layout::template gradient_start<L> + shape::gradient_threads;
  constexpr std::size_t first_thread = ceil_div(gradient_end, warp_size) * warp_size % tiled_threads;
  const std::size_t me = (threadIdx.x + tiled_threads - first_thread) % tiled_threads;
  for (std::size_t t = me; t < ceil_div(In, 4) * sample_quads; t += tiled_threads) {
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

template <class Model, matmul_precision P, std::size_t L = Model::depth - 1, std::size_t R>
__device__ inline void tile_backward(const float* params, float* shared, float (&acc)[R]) {
  constexpr bool mma = tiled_layer<Model, L, P>::uses_mma;
  if constexpr (mma) mma_weight_gradient<Model, L, P>(shared, acc);
  else fp32_weight_gradient<Model, L, P>(shared, acc);
  tile_bias_gradient<Model, L, P>(shared, acc);
  if constexpr (L > 0) {  // writes slope[L-1], which the lines above do not read
    if constexpr (mma) mma_input_delta<Model, L, P>(shared);
    else fp32_input_delta<Model, L, P>(params, shared);
    __syncthreads();
    tile_backward<Model, P, L - 1>(params, shared, acc);
  }
}

// Writes layer L's fp32 weight gradient to `out`: the S parts of a micro-tile are
// neighbouring lanes, added pairwise (a fixed order) into the first.
template <class Model, std::size_t L, matmul_precision P, std::size_t R>
__device__ inline void fp32_store_weights(const float (&acc)[R], float* out) {
  using shape = tiled_layer<Model, L, P>;
  using layout = tiled_layout<Model, P>;
  constexpr std::size_t In = shape::In, Out = shape::Out, Go = shape::out_groups, Gi = shape::in_groups;
  constexpr std::size_t S = shape::split;
  for_each_packed<layout::template gradient_start<L>, shape::gradient_threads>(
      [&](std::size_t k, std::size_t local, bool mine) {
        float a[16];
#pragma unroll
        for (std::size_t e = 0; e < 16; ++e) {
          a[e] = acc[layout::gradient_registers + 16 * k + e];
          for (std::size_t lanes = 1; lanes < S; lanes *= 2) a[e] += __shfl_xor_sync(0xffffffffu, a[e], lanes);
        }
        const std::size_t t = local / S, og = t % Go, ig = t / Go;
        if (!mine || local % S != 0 || t >= shape::gradient_tiles) return;
#pragma unroll
        for (std::size_t ro = 0; ro < 4; ++ro) {
          const std::size_t o = og + Go * ro;
          if (o >= Out) continue;
#pragma unroll
          for (std::size_t ri = 0; ri < 4; ++ri)
            if (ig + Gi * ri < In) out[weights_at<Model, L> + o * In + ig + Gi * ri] = a[ro * 4 + ri];
        }
      });
}

// Writes this thread's share of layer L's gradient to the block's partial row.
template <class Model, std::size_t L, matmul_precision P, std::size_t R>
__device__ inline void store_slice(const float (&acc)[R], float* out) {
  using shape = tiled_layer<Model, L, P>;
  using layout = tiled_layout<Model, P>;
  if constexpr (shape::uses_mma) mma_store_weights<Model, L, P>(acc, out);
  else fp32_store_weights<Model, L, P>(acc, out);
  for_each_packed<layout::template bias_start<L>, shape::bias_threads>(
      [&](std::size_t k, std::size_t local, bool mine) {
        if (mine && local % 4 == 0 && local / 4 < shape::Out)
          out[bias_at<Model, L> + local / 4] = acc[layout::bias_registers + k];
      });
}

// Per-step partial sums, tiled: the same output as partial_sums_kernel.
template <class Model, class Loss, matmul_precision P>
__global__ void __launch_bounds__(tiled_threads, 2)
    tiled_partial_sums_kernel(Model model, Loss loss, const float* global_params, const float* x, const float* y,
                              std::size_t batch, float* partials, long* step_counter) {
  using layout = tiled_layout<Model, P>;
  constexpr std::size_t In = Model::inputs, Out = Model::outputs, Params = Model::parameter_count;
  constexpr std::size_t last = Model::depth - 1, tile = layout::tile, row = layout::row;
  extern __shared__ float4 shared_storage[];  // float4: 16-byte alignment for the float4 reads
  float* shared = reinterpret_cast<float*>(shared_storage);
  if (step_counter && blockIdx.x == 0 && threadIdx.x == 0) ++*step_counter;
  for (std::size_t p = threadIdx.x; p < Model::parameter_count; p += blockDim.x) shared[p] = global_params[p];
  [&]<std::size_t... L>(std::index_sequence<L...>) { (copy_mma_weights<Model, L, P>(global_params, shared), ...); }(
      std::make_index_sequence<Model::depth>{});
  const float* params = shared;  // visible to all after the first tile's barrier
  float acc[layout::registers] = {};
  float loss_sum = 0.0f;
  float* input = tile_out<Model, P, std::size_t(-1)>(shared);
  for (std::size_t first = blockIdx.x * tile; first < batch; first += std::size_t(gridDim.x) * tile) {
    const std::size_t count = batch - first < tile ? batch - first : tile;
    for (std::size_t item = threadIdx.x; item < In * tile; item += blockDim.x) {
      const std::size_t i = item / tile, s = item % tile;
      input[i * row + s] = s < count ? x[(first + s) * In + i] : 0.0f;
    }
    __syncthreads();
    tile_forward<Model, P>(model, params, shared);
    if (threadIdx.x < tile) {  // the loss, one thread per sample; padding adds nothing
      const std::size_t s = threadIdx.x;
      float yhat[Out], target[Out], dout[Out], l = 0.0f;
      for (std::size_t o = 0; o < Out; ++o) {
        yhat[o] = tile_out<Model, P, last>(shared)[o * row + s];
        target[o] = s < count ? y[(first + s) * Out + o] : yhat[o];
      }
      loss.template group<Out, 1>(yhat, target, dout, &l);
      for (std::size_t o = 0; o < Out; ++o) tile_slope<Model, P, last>(shared)[o * row + s] *= s < count ? dout[o] : 0.0f;
      if (s < count) loss_sum += l;
    }
    __syncthreads();
    tile_backward<Model, P>(params, shared, acc);
    __syncthreads();
  }
  float* out = partials + blockIdx.x * partial_row<Params>;  // this block's partial, in the flat parameter layout
  [&]<std::size_t... L>(std::index_sequence<L...>) { (store_slice<Model, L, P>(acc, out), ...); }(
      std::make_index_sequence<Model::depth>{});
  // The loss: summed over the tile's first warps (only threads < tile hold any).
  __shared__ float warp_losses[tile / warp_size];
  if (threadIdx.x < tile) {
    float v = loss_sum;
    for (int offset = warp_size / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (threadIdx.x % warp_size == 0) warp_losses[threadIdx.x / warp_size] = v;
  }
  __syncthreads();  // also makes the block's gradient row visible to all its threads
  if (threadIdx.x == 0) {
    float v = 0.0f;
    for (std::size_t w = 0; w < tile / warp_size; ++w) v += warp_losses[w];
    out[Params] = v;
  }
  bool finite = true;  // the flag column: a NaN or Inf among this block's gradient sums
  for (std::size_t j = threadIdx.x; j < Params; j += blockDim.x) finite &= bool(isfinite(out[j]));
  const bool any_bad = __syncthreads_or(!finite);
  if (threadIdx.x == 0) out[Params + 1] = any_bad ? 1.0f : 0.0f;
}

}  // namespace tl::detail::gpu
