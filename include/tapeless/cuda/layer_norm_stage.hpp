// layer_norm on the layered path (cuda/layered_stages.hpp): a warp a sample. The
// generic sample stage runs the layer's own code on one thread a sample, whose reads
// and writes of a 256-wide row are 32 different lines a warp, and writes a row of 2N
// parameter gradients a sample for a product with ones to add up; a layer_norm stage
// cost 4.9x the dense model around it (docs/performance.md, 2026-12-06 morning). Here
// a warp reads a sample's row coalesced (each lane C = ceil(N / 32) values, in
// registers), cub::WarpReduce adds the row's sums, and the saved values are the
// sample's mean and 1 / sqrt(var + eps) alone: the backward recomputes x̂ from the
// layer's input, which the chunk keeps anyway. Each warp of the backward keeps its
// samples' weight and bias gradients in registers and writes one row of them, so the
// product with ones adds up a few thousand rows, not one a sample. Each value is
// computed as layer_norm_layer computes it (nn/layer_norm.hpp); the row's sums are
// added in another order (a lane's strided values, then a tree over the lanes), so
// results agree with the CPU to rounding, not bit for bit. (In double at N near 1024
// a lane's four arrays of 32 values exceed the registers and spill: correct, slower.)
#pragma once

#include <cub/warp/warp_reduce.cuh>

#include <algorithm>
#include <cstddef>

#include "tapeless/core/math.hpp"
#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/launch_size.hpp"
#include "tapeless/nn/layer_norm.hpp"

namespace tl::detail::gpu {

// The widths a warp takes: a lane's C values and its 2C gradient sums stay in
// registers up to 1024 (C = 32); wider layer_norms take the generic sample stage.
inline constexpr std::size_t warp_layer_norm_limit = 1024;
template <class Layer>
inline constexpr bool warp_layer_norm = false;
template <std::size_t N>
inline constexpr bool warp_layer_norm<layer_norm_layer<N>> = N <= warp_layer_norm_limit;

inline constexpr unsigned layer_norm_warps = 8;  // a block's warps (256 threads)
// The backward's warps at most: each writes a row of 2N gradients for the product
// with ones. 512 blocks of 8 warps: about 4 blocks on each of an H200's 132 SMs.
inline constexpr std::size_t layer_norm_gradient_rows = 4096;

// The sum of every lane's v, in every lane.
template <class T>
__device__ T warp_total(T v, typename cub::WarpReduce<T>::TempStorage& storage) {
  const T sum = cub::WarpReduce<T>(storage).Sum(v);  // valid in lane 0
  __syncwarp();  // the storage is used again by the next call (as CUB asks)
  return __shfl_sync(0xffffffffu, sum, 0);
}

// saved: [rows][S] (S = the layer's saved_count; this stage uses its first two: the
// mean and 1 / sqrt(var + eps)).
template <std::size_t N, std::size_t S, class T>
__global__ void __launch_bounds__(256)
    layer_norm_forward_kernel(T eps, const T* p, const T* in, T* out, T* saved, std::size_t rows) {
  constexpr std::size_t C = (N + 31) / 32;
  __shared__ typename cub::WarpReduce<T>::TempStorage storage[layer_norm_warps];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (std::size_t s = blockIdx.x * std::size_t(layer_norm_warps) + warp; s < rows;
       s += std::size_t(gridDim.x) * layer_norm_warps) {
    T v[C], sum = T(0);
#pragma unroll
    for (std::size_t c = 0; c < C; ++c) {
      const std::size_t i = c * 32 + lane;
      v[c] = i < N ? in[s * N + i] : T(0);
      sum += v[c];
    }
    const T mean = warp_total(sum, storage[warp]) * T(1.0 / double(N));
    T var = T(0);
#pragma unroll
    for (std::size_t c = 0; c < C; ++c)
      if (c * 32 + lane < N) {
        const T centred = v[c] - mean;
        var += centred * centred;
      }
    const T rstd = T(1) / math::sqrt(warp_total(var, storage[warp]) * T(1.0 / double(N)) + eps);
#pragma unroll
    for (std::size_t c = 0; c < C; ++c) {
      const std::size_t i = c * 32 + lane;
      if (i < N) out[s * N + i] = (v[c] - mean) * rstd * p[i] + p[N + i];
    }
    if (lane == 0) {
      saved[s * S] = mean;
      saved[s * S + 1] = rstd;
    }
  }
}

// Warp w (of `warps`) takes samples w, w + warps, ...: d loss / d input into din (when
// InputDelta) and its samples' gradient sums into gradient_rows[w] ([warps][2N]).
template <bool InputDelta, std::size_t N, std::size_t S, class T>
__global__ void __launch_bounds__(256)
    layer_norm_backward_kernel(const T* p, const T* in, const T* saved, const T* dout, T* din, T* gradient_rows,
                               std::size_t rows, std::size_t warps) {
  constexpr std::size_t C = (N + 31) / 32;
  __shared__ typename cub::WarpReduce<T>::TempStorage storage[layer_norm_warps];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::size_t w = blockIdx.x * std::size_t(layer_norm_warps) + warp;
  if (w >= warps) return;  // a whole warp: its shuffles stay full
  T weight_sums[C] = {}, bias_sums[C] = {};
  for (std::size_t s = w; s < rows; s += warps) {
    const T mean = saved[s * S], rstd = saved[s * S + 1];
    T xhat[C] = {}, g[C] = {}, mean_g = T(0), mean_gx = T(0);
#pragma unroll
    for (std::size_t c = 0; c < C; ++c) {
      const std::size_t i = c * 32 + lane;
      if (i < N) {
        const T d = dout[s * N + i];
        xhat[c] = (in[s * N + i] - mean) * rstd;
        weight_sums[c] += d * xhat[c];
        bias_sums[c] += d;
        g[c] = d * p[i];
        mean_g += g[c];
        mean_gx += g[c] * xhat[c];
      }
    }
    if constexpr (InputDelta) {
      mean_g = warp_total(mean_g, storage[warp]) * T(1.0 / double(N));
      mean_gx = warp_total(mean_gx, storage[warp]) * T(1.0 / double(N));
#pragma unroll
      for (std::size_t c = 0; c < C; ++c) {
        const std::size_t i = c * 32 + lane;
        if (i < N) din[s * N + i] = rstd * (g[c] - mean_g - xhat[c] * mean_gx);
      }
    }
  }
#pragma unroll
  for (std::size_t c = 0; c < C; ++c) {
    const std::size_t i = c * 32 + lane;
    if (i < N) {
      gradient_rows[w * 2 * N + i] = weight_sums[c];
      gradient_rows[w * 2 * N + N + i] = bias_sums[c];
    }
  }
}

// The backward's warps for a chunk of `rows` samples: the rows of gradients it leaves.
inline std::size_t layer_norm_backward_warps(std::size_t rows) {
  return std::min(rows, layer_norm_gradient_rows);
}

template <std::size_t N, class T>
void layer_norm_forward(const layer_norm_layer<N>& layer, const T* p, const T* in, T* out, T* saved, std::size_t rows,
                        cudaStream_t stream) {
  layer_norm_forward_kernel<N, layer_norm_layer<N>::saved_count>
      <<<grid_stride_blocks(rows, layer_norm_warps), 32 * layer_norm_warps, 0, stream>>>(T(layer.eps), p, in, out, saved, rows);
  TL_CUDA_CHECK_LAUNCH("layer_norm_forward_kernel (layered stage)");
}

// Returns the rows of gradient_rows written (layer_norm_backward_warps(rows)).
template <bool InputDelta, std::size_t N, class T>
std::size_t layer_norm_backward(const T* p, const T* in, const T* saved, const T* dout, T* din, T* gradient_rows,
                                std::size_t rows, cudaStream_t stream) {
  const std::size_t warps = layer_norm_backward_warps(rows);
  layer_norm_backward_kernel<InputDelta, N, layer_norm_layer<N>::saved_count>
      <<<unsigned((warps + layer_norm_warps - 1) / layer_norm_warps), 32 * layer_norm_warps, 0, stream>>>(
          p, in, saved, dout, din, gradient_rows, rows, warps);
  TL_CUDA_CHECK_LAUNCH("layer_norm_backward_kernel (layered stage)");
  return warps;
}

}  // namespace tl::detail::gpu
