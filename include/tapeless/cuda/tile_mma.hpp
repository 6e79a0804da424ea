// The tiled kernels' three products on tensor cores, for layers whose widths are
// multiples of 16 under matmul_precision::tf32: warp-level mma.sync m16n8k8 on TF32
// inputs (rounded to nearest) with fp32 sums. A warp takes a group of one 16-row tile
// and several 8-column tiles, so each A fragment is loaded once for the group.
// Fragment layout (PTX ISA, m16n8k8 .tf32), for lane = 4 g + t: A holds (g, t),
// (g+8, t), (g, t+4), (g+8, t+4); B holds (t, g), (t+4, g); C holds (g, 2t), (g, 2t+1),
// (g+8, 2t), (g+8, 2t+1). Operands stored k-contiguous load with ldmatrix (a b16
// 8x8 matrix is a 32-bit 8x4 one, thread l receiving (l / 4, l % 4)).
#pragma once

#include <cstdint>

#include "tapeless/cuda/tile_layout.hpp"

namespace tl::detail::gpu {

// Rounds to TF32 by adding half a TF32 ulp to the fp32 bits: the tensor cores ignore
// the low 13 bits, so this rounds to nearest (ties away from zero) in one integer
// add, where cvt.rna.tf32.f32 costs several instructions on sm_90.
__device__ inline std::uint32_t to_tf32(float x) { return __float_as_uint(x) + 0x1000u; }
__device__ inline std::uint32_t to_tf32(std::uint32_t bits) { return bits + 0x1000u; }

__device__ inline void mma_tf32(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A's fragment from rows [m0, m0 + 16) x columns [k, k + 8) of a k-contiguous matrix
// (row stride `stride` floats, rows 16-byte aligned).
__device__ inline void ldmatrix_a(std::uint32_t (&a)[4], const float* m0, std::size_t stride, std::size_t k) {
  const std::size_t lane = threadIdx.x % warp_size;
  const float* p = m0 + (lane % 8 + 8 * (lane / 8 % 2)) * stride + k + 4 * (lane / 16);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p)))
               : "memory");
}
// B's fragment from rows (n) [n0, n0 + 8) x columns (k) [k, k + 8), k-contiguous.
__device__ inline void ldmatrix_b(std::uint32_t (&b)[2], const float* n0, std::size_t stride, std::size_t k) {
  const std::size_t lane = threadIdx.x % warp_size;
  const float* p = n0 + lane % 8 * stride + k + 4 * (lane / 8 % 2);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p)))
               : "memory");
}

// c[j] += A B_j over k in [0, K): load_a(k, a) fills A's fragment at k, load_b(k, j, b)
// tile j's B fragment.
template <std::size_t K, std::size_t NT, class LoadA, class LoadB>
__device__ inline void mma_group(float (&c)[NT][4], LoadA load_a, LoadB load_b) {
#pragma unroll
  for (std::size_t k = 0; k < K; k += 8) {
    std::uint32_t a[4];
    load_a(k, a);
#pragma unroll
    for (std::size_t j = 0; j < NT; ++j) {
      std::uint32_t b[2];
      load_b(k, j, b);
      mma_tf32(c[j], a, b);
    }
  }
}

struct lane_position {
  std::size_t g = threadIdx.x % warp_size / 4, t = threadIdx.x % 4;
};

// Copies layer L's weights, TF32-rounded, into its padded shared copy.
template <class Model, std::size_t L, matmul_precision P>
__device__ inline void copy_mma_weights(const float* global_params, float* shared) {
  using shape = tiled_layer<Model, L, P>;
  if constexpr (shape::uses_mma) {
    float* copy = shared + tiled_layout<Model, P>::template mma_copy<L>;
    const float* w = global_params + weights_at<Model, L>;
    for (std::size_t e = threadIdx.x; e < shape::Out * shape::In; e += tiled_threads)
      copy[e / shape::In * shape::mma_row + e % shape::In] = __uint_as_float(to_tf32(w[e]) & ~0x1fffu);
  }
}

// B fragments from a [k][n] (n-contiguous) matrix: the activations and deltas as the
// forward and input-delta products read them.
__device__ inline void lds_b(std::uint32_t (&b)[2], const float* n0, std::size_t row, std::size_t k) {
  const lane_position l;
  b[0] = to_tf32(n0[(k + l.t) * row + l.g]);
  b[1] = to_tf32(n0[(k + l.t + 4) * row + l.g]);
}

inline constexpr std::size_t sample_group = 4;  // 8-sample tiles a warp takes together
template <class Model, matmul_precision P>
inline constexpr std::size_t sample_groups = tiled_layout<Model, P>::tile / 8 / sample_group;

// Forward: z[o][s] = b[o] + sum_i W[o][i] a[i][s] (M = Out, N = tile, K = In), then the
// activation's value and slope into shared memory.
template <class Model, std::size_t L, matmul_precision P>
__device__ inline void mma_forward(const Model& model, const float* params, float* shared) {
  using shape = tiled_layer<Model, L, P>;
  constexpr std::size_t row = tiled_layout<Model, P>::row, groups = sample_groups<Model, P>;
  const float* w = shared + tiled_layout<Model, P>::template mma_copy<L>;
  const float* b = params + bias_at<Model, L>;
  const float* in = tile_out<Model, P, L - 1>(shared);
  const auto& act = model.template sublayer<L>().activation;
  const lane_position l;
  for (std::size_t group = threadIdx.x / warp_size; group < shape::Out / 16 * groups; group += tiled_warps) {
    const std::size_t m0 = 16 * (group / groups), n0 = 8 * sample_group * (group % groups);
    float c[sample_group][4];
#pragma unroll
    for (std::size_t j = 0; j < sample_group; ++j) {
      c[j][0] = c[j][1] = b[m0 + l.g];
      c[j][2] = c[j][3] = b[m0 + l.g + 8];
    }
    mma_group<shape::In>(
        c, [&](std::size_t k, std::uint32_t(&a)[4]) { ldmatrix_a(a, w + m0 * shape::mma_row, shape::mma_row, k); },
        [&](std::size_t k, std::size_t j, std::uint32_t(&bf)[2]) { lds_b(bf, in + n0 + 8 * j, row, k); });
#pragma unroll
    for (std::size_t j = 0; j < sample_group; ++j) {
#pragma unroll
      for (std::size_t half = 0; half < 2; ++half) {
        const std::size_t at = (m0 + l.g + 8 * half) * row + n0 + 8 * j + 2 * l.t;
        float2 value, slope;
        value.x = act.value_and_derivative(c[j][2 * half], slope.x);
        value.y = act.value_and_derivative(c[j][2 * half + 1], slope.y);
        *reinterpret_cast<float2*>(tile_out<Model, P, L>(shared) + at) = value;
        *reinterpret_cast<float2*>(tile_slope<Model, P, L>(shared) + at) = slope;
      }
    }
  }
}

// Weight gradient: dW[o][i] += sum_s delta[o][s] a[i][s] (M = Out, N = In, K = tile),
// in the warp's accumulator groups. Both operands are k-contiguous: ldmatrix.
template <class Model, std::size_t L, matmul_precision P, std::size_t R>
__device__ inline void mma_weight_gradient(float* shared, float (&acc)[R]) {
  using shape = tiled_layer<Model, L, P>;
  constexpr std::size_t NT = shape::mma_group, per_row = shape::In / 8 / NT;
  constexpr std::size_t row = tiled_layout<Model, P>::row;
  const float* in = tile_out<Model, P, L - 1>(shared);
  const float* delta = tile_slope<Model, P, L>(shared);
#pragma unroll
  for (std::size_t q = 0; q < shape::mma_rounds; ++q) {
    const std::size_t group = threadIdx.x / warp_size + q * tiled_warps;
    if (group >= shape::mma_groups) break;
    const std::size_t m0 = 16 * (group / per_row), n0 = 8 * NT * (group % per_row);
    float* a = acc + tiled_layout<Model, P>::template mma_slice<L> + 4 * NT * q;
    float c[NT][4];
#pragma unroll
    for (std::size_t e = 0; e < 4 * NT; ++e) c[e / 4][e % 4] = a[e];
    mma_group<tiled_layout<Model, P>::tile>(
        c,
        [&](std::size_t k, std::uint32_t(&af)[4]) {
          ldmatrix_a(af, delta + m0 * row, row, k);
          for (auto& v : af) v = to_tf32(v);
        },
        [&](std::size_t k, std::size_t j, std::uint32_t(&bf)[2]) {
          ldmatrix_b(bf, in + (n0 + 8 * j) * row, row, k);
          for (auto& v : bf) v = to_tf32(v);
        });
#pragma unroll
    for (std::size_t e = 0; e < 4 * NT; ++e) a[e] = c[e / 4][e % 4];
  }
}

// Input delta: slope[L-1][i][s] *= sum_o W[o][i] delta[o][s] (M = In, N = tile, K = Out).
template <class Model, std::size_t L, matmul_precision P>
__device__ inline void mma_input_delta(float* shared) {
  using shape = tiled_layer<Model, L, P>;
  constexpr std::size_t S = shape::mma_row;
  constexpr std::size_t row = tiled_layout<Model, P>::row, groups = sample_groups<Model, P>;
  const float* w = shared + tiled_layout<Model, P>::template mma_copy<L>;
  const float* delta = tile_slope<Model, P, L>(shared);
  float* below = tile_slope<Model, P, L - 1>(shared);
  const lane_position l;
  for (std::size_t group = threadIdx.x / warp_size; group < shape::In / 16 * groups; group += tiled_warps) {
    const std::size_t m0 = 16 * (group / groups), n0 = 8 * sample_group * (group % groups);
    float c[sample_group][4] = {};
    mma_group<shape::Out>(
        c,
        [&](std::size_t k, std::uint32_t(&a)[4]) {  // A(i, o) = W[o][i], already TF32
          const float* p = w + (k + l.t) * S + m0 + l.g;
          a[0] = __float_as_uint(p[0]);
          a[1] = __float_as_uint(p[8]);
          a[2] = __float_as_uint(p[4 * S]);
          a[3] = __float_as_uint(p[4 * S + 8]);
        },
        [&](std::size_t k, std::size_t j, std::uint32_t(&bf)[2]) { lds_b(bf, delta + n0 + 8 * j, row, k); });
#pragma unroll
    for (std::size_t j = 0; j < sample_group; ++j) {
#pragma unroll
      for (std::size_t half = 0; half < 2; ++half) {
        float2& d = *reinterpret_cast<float2*>(below + (m0 + l.g + 8 * half) * row + n0 + 8 * j + 2 * l.t);
        d.x *= c[j][2 * half];
        d.y *= c[j][2 * half + 1];
      }
    }
  }
}

// Writes the warp's accumulator groups of layer L's weight gradient to `out`.
template <class Model, std::size_t L, matmul_precision P, std::size_t R>
__device__ inline void mma_store_weights(const float (&acc)[R], float* out) {
  using shape = tiled_layer<Model, L, P>;
  constexpr std::size_t NT = shape::mma_group, per_row = shape::In / 8 / NT;
  const lane_position l;
#pragma unroll
  for (std::size_t q = 0; q < shape::mma_rounds; ++q) {
    const std::size_t group = threadIdx.x / warp_size + q * tiled_warps;
    if (group >= shape::mma_groups) break;
    const std::size_t m0 = 16 * (group / per_row), n0 = 8 * NT * (group % per_row);
    const float* a = acc + tiled_layout<Model, P>::template mma_slice<L> + 4 * NT * q;
#pragma unroll
    for (std::size_t e = 0; e < 4 * NT; ++e) {
      const std::size_t j = e / 4, r = e % 4, o = m0 + l.g + 8 * (r / 2), i = n0 + 8 * j + 2 * l.t + r % 2;
      out[weights_at<Model, L> + o * shape::In + i] = a[e];
    }
  }
}

}  // namespace tl::detail::gpu
