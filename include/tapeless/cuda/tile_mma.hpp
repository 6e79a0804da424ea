// The tiled kernels' three products on tensor cores, for layers whose widths are
// multiples of 16 under matmul_precision::tf32: warp-level mma.sync m16n8k8 on TF32
// inputs (rounded to nearest) with fp32 sums. Fragment layout (PTX ISA, m16n8k8
// .tf32), for lane = 4 g + t: A holds (g, t), (g+8, t), (g, t+4), (g+8, t+4); B holds
// (t, g), (t+4, g); C holds (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
#pragma once

#include <cstdint>

#include "tapeless/cuda/tile_layout.hpp"

namespace tl::detail::gpu {

// Rounds to TF32 by adding half a TF32 ulp to the fp32 bits: the tensor cores ignore
// the low 13 bits, so this rounds to nearest (ties away from zero) in one integer
// add, where cvt.rna.tf32.f32 costs several instructions on sm_90.
__device__ inline std::uint32_t to_tf32(float x) { return __float_as_uint(x) + 0x1000u; }

__device__ inline void mma_tf32(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// c += A B over k in [0, K) for one 16x8 tile; a(m, k) and b(k, n) take tile-local
// m < 16, n < 8 and return TF32 bits.
template <std::size_t K, class LoadA, class LoadB>
__device__ inline void mma_accumulate(float (&c)[4], LoadA a, LoadB b) {
  const std::size_t lane = threadIdx.x % warp_size, g = lane / 4, t = lane % 4;
#pragma unroll
  for (std::size_t k = 0; k < K; k += 8) {
    const std::uint32_t af[4] = {a(g, k + t), a(g + 8, k + t), a(g, k + t + 4), a(g + 8, k + t + 4)};
    const std::uint32_t bf[2] = {b(k + t, g), b(k + t + 4, g)};
    mma_tf32(c, af, bf);
  }
}

// Calls f(r, m, n) for the tile-local position of this lane's C register r.
template <class F>
__device__ inline void for_each_c(F f) {
  const std::size_t lane = threadIdx.x % warp_size, g = lane / 4, t = lane % 4;
  f(0, g, 2 * t);
  f(1, g, 2 * t + 1);
  f(2, g + 8, 2 * t);
  f(3, g + 8, 2 * t + 1);
}

// Copies layer L's weights, TF32-rounded, into its padded shared copy.
template <class Model, std::size_t L, matmul_precision P>
__device__ inline void copy_mma_weights(const float* global_params, float* shared) {
  using shape = tiled_layer<Model, L, P>;
  if constexpr (shape::uses_mma) {
    float* copy = shared + tiled_layout<Model, P>::template mma_copy<L>;
    const float* w = global_params + Model::template weight_offset<L>;
    for (std::size_t e = threadIdx.x; e < shape::Out * shape::In; e += tiled_threads)
      copy[e / shape::In * shape::mma_row + e % shape::In] = __uint_as_float(to_tf32(w[e]) & ~0x1fffu);
  }
}

// Forward: z[o][s] = b[o] + sum_i W[o][i] a[i][s] (M = Out, N = tile, K = In), then the
// activation's value and slope into shared memory.
template <class Model, std::size_t L, matmul_precision P>
__device__ inline void mma_forward(const Model& model, const float* params, float* shared) {
  using shape = tiled_layer<Model, L, P>;
  constexpr std::size_t In = shape::In, n_tiles = tile / 8, tiles = (shape::Out / 16) * n_tiles;
  const float* w = shared + tiled_layout<Model, P>::template mma_copy<L>;
  const float* b = params + Model::template bias_offset<L>;
  const float* in = tile_out<Model, L - 1>(shared);
  const auto& act = model.template layer<L>().activation;
  const std::size_t warp = threadIdx.x / warp_size;
#pragma unroll
  for (std::size_t j = warp; j < tiles; j += tiled_warps) {
    const std::size_t m0 = 16 * (j / n_tiles), n0 = 8 * (j % n_tiles), g = threadIdx.x % warp_size / 4;
    float c[4] = {b[m0 + g], b[m0 + g], b[m0 + g + 8], b[m0 + g + 8]};
    mma_accumulate<In>(
        c, [&](std::size_t m, std::size_t k) { return __float_as_uint(w[(m0 + m) * shape::mma_row + k]); },
        [&](std::size_t k, std::size_t n) { return to_tf32(in[k * row + n0 + n]); });
    for_each_c([&](int r, std::size_t m, std::size_t n) {
      const std::size_t at = (m0 + m) * row + n0 + n;
      tile_out<Model, L>(shared)[at] = act.value_and_derivative(c[r], tile_slope<Model, L>(shared)[at]);
    });
  }
}

// Weight gradient: dW[o][i] += sum_s delta[o][s] a[i][s] (M = Out, N = In, K = tile),
// in the warp's accumulator tiles.
template <class Model, std::size_t L, matmul_precision P, std::size_t R>
__device__ inline void mma_weight_gradient(float* shared, float (&acc)[R]) {
  using shape = tiled_layer<Model, L, P>;
  constexpr std::size_t n_tiles = shape::In / 8;
  const float* in = tile_out<Model, L - 1>(shared);
  const float* delta = tile_slope<Model, L>(shared);
  const std::size_t warp = threadIdx.x / warp_size;
#pragma unroll
  for (std::size_t q = 0; q < shape::rounds; ++q) {
    const std::size_t j = warp + q * tiled_warps, m0 = 16 * (j / n_tiles), n0 = 8 * (j % n_tiles);
    if (j >= shape::mma_tiles) break;
    float* a = acc + tiled_layout<Model, P>::template slice<L> + 4 * q;
    float c[4] = {a[0], a[1], a[2], a[3]};
    mma_accumulate<tile>(
        c, [&](std::size_t m, std::size_t k) { return to_tf32(delta[(m0 + m) * row + k]); },
        [&](std::size_t k, std::size_t n) { return to_tf32(in[(n0 + n) * row + k]); });
    for (int r = 0; r < 4; ++r) a[r] = c[r];
  }
}

// Input delta: slope[L-1][i][s] *= sum_o W[o][i] delta[o][s] (M = In, N = tile, K = Out).
template <class Model, std::size_t L, matmul_precision P>
__device__ inline void mma_input_delta(float* shared) {
  using shape = tiled_layer<Model, L, P>;
  constexpr std::size_t n_tiles = tile / 8, tiles = (shape::In / 16) * n_tiles;
  const float* w = shared + tiled_layout<Model, P>::template mma_copy<L>;
  const float* delta = tile_slope<Model, L>(shared);
  float* below = tile_slope<Model, L - 1>(shared);
  const std::size_t warp = threadIdx.x / warp_size;
#pragma unroll
  for (std::size_t j = warp; j < tiles; j += tiled_warps) {
    const std::size_t m0 = 16 * (j / n_tiles), n0 = 8 * (j % n_tiles);
    float c[4] = {};
    mma_accumulate<shape::Out>(
        c, [&](std::size_t m, std::size_t k) { return __float_as_uint(w[k * shape::mma_row + m0 + m]); },
        [&](std::size_t k, std::size_t n) { return to_tf32(delta[k * row + n0 + n]); });
    for_each_c([&](int r, std::size_t m, std::size_t n) { below[(m0 + m) * row + n0 + n] *= c[r]; });
  }
}

// Writes the warp's accumulator tiles of layer L's weight gradient to `out`.
template <class Model, std::size_t L, matmul_precision P, std::size_t R>
__device__ inline void mma_store_weights(const float (&acc)[R], float* out) {
  using shape = tiled_layer<Model, L, P>;
  constexpr std::size_t n_tiles = shape::In / 8;
  const std::size_t warp = threadIdx.x / warp_size;
#pragma unroll
  for (std::size_t q = 0; q < shape::rounds; ++q) {
    const std::size_t j = warp + q * tiled_warps, m0 = 16 * (j / n_tiles), n0 = 8 * (j % n_tiles);
    if (j >= shape::mma_tiles) break;
    const float* a = acc + tiled_layout<Model, P>::template slice<L> + 4 * q;
    for_each_c([&](int r, std::size_t m, std::size_t n) {
      out[Model::template weight_offset<L> + (m0 + m) * shape::In + n0 + n] = a[r];
    });
  }
}

}  // namespace tl::detail::gpu
