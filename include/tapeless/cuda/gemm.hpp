// A tiled GEMM with a user epilogue, for the layer-at-a-time path (cuda/layered.hpp):
//   C(m, n) = sum over k in the block's slice of A(m, k) B(k, n), then epilogue(m, n, c, slice)
// Which index of an operand is contiguous is part of its type (row_major /
// col_major, as in CuTe), so the three products of a dense layer — forward, input
// delta, weight gradient — are one kernel with loads that stay coalesced. A block owns
// a 64 x 64 tile of C, 256 threads a 4 x 4 micro-tile each, and walks K 16 at a time
// through shared memory, the next slab loaded into registers while this one is used.
// blockIdx.z picks a slice of K (split-K), so that a small C over a long K (a weight
// gradient summed over 10^6 samples) still fills the device; each slice's sums go to
// its own place, never through atomics, so results do not depend on timing.
//
// It multiplies in fp32 (or fp64) only: cuBLASLt (cuda/blas.hpp) is the layered
// path's default and serves its tf32 and bf16 products. This kernel's WMMA tensor-core
// slabs, removed, ran at 16-28 TFLOP/s in TF32 where cuBLASLt's reach 40-223 for
// widths 128-1024 (bench/micro/dense_layer_gpu.cu, docs/performance.md).
#pragma once

#include <cstddef>

namespace tl::detail::gpu {

// Element (r, c) of an operand with leading dimension ld.
struct row_major {  // ... at p[r * ld + c]: columns contiguous
  static constexpr bool columns_contiguous = true;
};
struct col_major {  // ... at p[c * ld + r]: rows contiguous
  static constexpr bool columns_contiguous = false;
};

template <class T, class Layout>
struct operand {
  const T* p;
  std::size_t ld;
  // A column of ones at this index (none when >= the operand's columns): the bias
  // gradient is the weight gradient's extra column, summed against ones.
  std::size_t ones_column = ~std::size_t(0);
  __device__ T at(std::size_t r, std::size_t c) const {
    if (c == ones_column) return T(1);
    return Layout::columns_contiguous ? p[r * ld + c] : p[c * ld + r];
  }
};

// 16 deep: 32 measured 5-20 % slower on the H200 for widths 128-1024 (more registers
// a thread, fewer blocks an SM), though faster at 1000 samples.
inline constexpr int gemm_tile = 64, gemm_depth = 16, gemm_threads = 256, gemm_micro = 4;

// Reads this thread's E elements of successive Rows x Cols slabs (Rows * Cols =
// E * 256) of an operand along K, the contiguous index fastest, so a warp's loads are
// coalesced. K is the operand's column index (A) or its row index (B: KAlongRows).
// Pointers and the other index's bounds are worked out once; then a slab costs one
// compare, one load and one pointer step per element. Zero outside the matrix.
template <int Rows, int Cols, bool KAlongRows, class T, class Layout>
struct slab_reader {
  static constexpr int E = Rows * Cols / gemm_threads;
  T v[E];
  const T* p[E];
  int r[E], c[E];  // the element's place in the slab
  bool inside[E], ones[E];
  std::size_t step;  // elements from one slab to the next

  __device__ slab_reader(const operand<T, Layout>& a, std::size_t fixed0, std::size_t fixed_count,
                         std::size_t k_begin) {
    step = KAlongRows == Layout::columns_contiguous ? gemm_depth * a.ld : gemm_depth;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int idx = threadIdx.x + gemm_threads * e;
      r[e] = Layout::columns_contiguous ? idx / Cols : idx % Rows;
      c[e] = Layout::columns_contiguous ? idx % Cols : idx / Rows;
      const std::size_t fixed = fixed0 + (KAlongRows ? c[e] : r[e]);
      inside[e] = fixed < fixed_count;
      ones[e] = KAlongRows && fixed == a.ones_column;
      const std::size_t row = KAlongRows ? k_begin + r[e] : fixed, col = KAlongRows ? fixed : k_begin + c[e];
      p[e] = inside[e] && !ones[e] ? a.p + (Layout::columns_contiguous ? row * a.ld + col : col * a.ld + row) : a.p;
    }
  }
  // The next slab, of which the first k_left values along K are inside the slice.
  __device__ void load(std::size_t k_left) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const bool k_inside = std::size_t(KAlongRows ? r[e] : c[e]) < k_left;
      v[e] = inside[e] && k_inside ? (ones[e] ? T(1) : *p[e]) : T(0);
      p[e] += inside[e] && !ones[e] ? step : 0;
    }
  }
};

// C = A (M x K) B (K x N) with slices of `k_slice` along K. grid: (N tiles, M tiles,
// slices); every block calls the epilogue for each of its in-range (m, n), also when
// its slice is empty (with zero sums), so each slice's outputs are always written.
template <class T, class LayoutA, class LayoutB, class Epilogue>
__global__ void __launch_bounds__(gemm_threads)
    gemm_kernel(operand<T, LayoutA> a, operand<T, LayoutB> b, std::size_t M, std::size_t N, std::size_t K,
                std::size_t k_slice, Epilogue epilogue) {
  // Rows padded by 4: a warp's stores of a slab hit at most 2 ways of a bank.
  __shared__ __align__(32) T as[gemm_depth][gemm_tile + 4];  // A's slab as [k][m]
  __shared__ __align__(32) T bs[gemm_depth][gemm_tile + 4];  // B's slab as [k][n]
  const std::size_t m0 = std::size_t(blockIdx.y) * gemm_tile, n0 = std::size_t(blockIdx.x) * gemm_tile;
  const std::size_t k_begin = std::size_t(blockIdx.z) * k_slice;
  const std::size_t k_end = k_begin + k_slice < K ? k_begin + k_slice : K;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  T acc[gemm_micro][gemm_micro] = {};
  slab_reader<gemm_tile, gemm_depth, false, T, LayoutA> sa(a, m0, M, k_begin);  // A: rows m, columns k
  slab_reader<gemm_depth, gemm_tile, true, T, LayoutB> sb(b, n0, N, k_begin);    // B: rows k, columns n
  if (k_begin < k_end) {
    sa.load(k_end - k_begin);
    sb.load(k_end - k_begin);
  }
  for (std::size_t k0 = k_begin; k0 < k_end; k0 += gemm_depth) {
#pragma unroll
    for (int e = 0; e < sa.E; ++e) {
      as[sa.c[e]][sa.r[e]] = sa.v[e];
      bs[sb.r[e]][sb.c[e]] = sb.v[e];
    }
    __syncthreads();
    if (k0 + gemm_depth < k_end) {  // the next slab's loads fly while this one is used
      sa.load(k_end - k0 - gemm_depth);
      sb.load(k_end - k0 - gemm_depth);
    }
#pragma unroll
    for (int k = 0; k < gemm_depth; ++k) {
      T x[gemm_micro], y[gemm_micro];
#pragma unroll
      for (int i = 0; i < gemm_micro; ++i) {
        x[i] = as[k][ty * gemm_micro + i];
        y[i] = bs[k][tx * gemm_micro + i];
      }
#pragma unroll
      for (int i = 0; i < gemm_micro; ++i)
#pragma unroll
        for (int j = 0; j < gemm_micro; ++j) acc[i][j] += x[i] * y[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < gemm_micro; ++i) {
    const std::size_t m = m0 + ty * gemm_micro + i;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < gemm_micro; ++j) {
      const std::size_t n = n0 + tx * gemm_micro + j;
      if (n < N) epilogue(m, n, acc[i][j], blockIdx.z);
    }
  }
}

inline constexpr std::size_t gemm_tiles(std::size_t n) { return (n + gemm_tile - 1) / gemm_tile; }

template <class T, class LayoutA, class LayoutB, class Epilogue>
void launch_gemm(const operand<T, LayoutA>& a, const operand<T, LayoutB>& b, std::size_t M, std::size_t N,
                 std::size_t K, unsigned slices, const Epilogue& epilogue, cudaStream_t stream) {
  const std::size_t k_slice = ((K + slices - 1) / slices + gemm_depth - 1) / gemm_depth * gemm_depth;
  const dim3 grid(unsigned(gemm_tiles(N)), unsigned(gemm_tiles(M)), slices);
  gemm_kernel<<<grid, gemm_threads, 0, stream>>>(a, b, M, N, K, k_slice ? k_slice : gemm_depth, epilogue);
}

}  // namespace tl::detail::gpu
