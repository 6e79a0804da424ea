// The layered path's input-delta kernels: the deltas of layer L - 1 from layer L's,
//   delta_{L-1} = act'(Z_{L-1}) * (W_L^T delta_L),
// written in place of layer L - 1's slopes, with the column sums of what they write,
// layer L - 1's bias gradient, taken on the way (layered_plan.hpp, "delta_slices";
// cuda/slice_sums.hpp adds the slices).
// The product W_L^T delta_L is cuBLASLt's (`sums`) or, for a layer of at most
// thin_product_terms outputs, made here from W_L and delta_L. act'(Z_{L-1}) is the
// slope layer L - 1's forward kept or, for an activation whose derivative is a function
// of its value (slopes_from_outputs), recomputed from A_{L-1}.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <type_traits>

#include "tapeless/cuda/layered_plan.hpp"

namespace tl::detail::gpu {

// The layer before is no dense layer (a layer_norm, a skip: cuda/layered_stages.hpp):
// its deltas are the sums themselves, and it has no bias to sum.
struct no_slopes {};

// What the input-delta kernels write for unit i of the layer before from its sum over
// the next layer's deltas: delta = slope * sum, in place of the slope, and its bfloat16
// copy for bf16 products. Below: that layer's activation when its slope is recomputed
// from its output (`outputs`), void when its forward kept it. Returns the delta.
template <class Below, class T>
__device__ inline T write_delta(T sum, std::size_t i, const T* outputs, T* slope, __nv_bfloat16* low) {
  T delta;
  if constexpr (std::is_same_v<Below, no_slopes>) delta = sum;
  else if constexpr (std::is_void_v<Below>) delta = slope[i] * sum;
  else delta = Below::derivative_from_value(outputs[i]) * sum;
  slope[i] = delta;
  if (low) low[i] = __float2bfloat16(float(delta));
  return delta;
}

// One block: 32 units (threadIdx.x; a warp reads 32 neighbouring values of a sample)
// by 8 rows of samples (threadIdx.y) over one slice of the chunk (blockIdx.y). Out > 0:
// the sum over the next layer's Out deltas is made here from W (Out x In, row-major);
// Out = 0: it is `sums` (rows x In), plus `identity` (rows x In) when given: the deltas
// a skip's identity path brings to its open stage, added here rather than by a pass of
// their own (cuda/layered_stages.hpp). Each block's column sums go to its slice's row of
// `partials` (In values; none for no_slopes). Below and `outputs`: as write_delta's.
template <std::size_t In, std::size_t Out, class Below, class T>
__global__ void __launch_bounds__(delta_block_columns* delta_block_rows)
    input_delta_kernel(const T* w, const T* delta, const T* sums, const T* identity, const T* outputs,
                       T* previous_slope, std::size_t rows, __nv_bfloat16* low, T* partials) {
  const std::size_t k = blockIdx.x * std::size_t(delta_block_columns) + threadIdx.x;
  const auto [first, last] = block_slice(rows);
  T column = T(0);
  if (k < In) {
    T wk[Out > 0 ? Out : 1];  // this unit's column of W
    if constexpr (Out > 0) {
#pragma unroll
      for (std::size_t o = 0; o < Out; ++o) wk[o] = w[o * In + k];
    }
    for (std::size_t s = first + threadIdx.y; s < last; s += delta_block_rows) {
      T sum;
      if constexpr (Out > 0) {
        sum = T(0);
#pragma unroll
        for (std::size_t o = 0; o < Out; ++o) sum += wk[o] * delta[s * Out + o];
      } else {
        sum = sums[s * In + k];
        if (identity) sum += identity[s * In + k];
      }
      column += write_delta<Below>(sum, s * In + k, outputs, previous_slope, low);
    }
  }
  if constexpr (std::is_same_v<Below, no_slopes>) return;
  __shared__ T block_sums[delta_block_rows][delta_block_columns];
  block_sums[threadIdx.y][threadIdx.x] = column;
  __syncthreads();
  if (threadIdx.y == 0 && k < In) {
    T total = T(0);
#pragma unroll
    for (unsigned r = 0; r < delta_block_rows; ++r) total += block_sums[r][threadIdx.x];
    partials[blockIdx.y * In + k] = total;
  }
}
}  // namespace tl::detail::gpu
