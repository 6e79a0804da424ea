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

inline constexpr int gemm_tile = 64, gemm_depth = 16, gemm_threads = 256, gemm_micro = 4;
inline constexpr int gemm_row = gemm_tile + 4;  // padded: tile stores hit at most 2 ways of a bank

// Loads this thread's 4 elements of a Rows x Cols slab (Rows * Cols = 4 * 256) of an
// operand, walking the contiguous index fastest; zero outside the matrix.
template <int Rows, int Cols, class T, class Layout>
struct slab {
  T v[4];
  int r[4], c[4];
  __device__ void load(const operand<T, Layout>& a, std::size_t r0, std::size_t rows, std::size_t c0,
                       std::size_t cols) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int idx = threadIdx.x + gemm_threads * e;
      r[e] = Layout::columns_contiguous ? idx / Cols : idx % Rows;
      c[e] = Layout::columns_contiguous ? idx % Cols : idx / Rows;
      const std::size_t gr = r0 + r[e], gc = c0 + c[e];
      v[e] = gr < rows && gc < cols ? a.at(gr, gc) : T(0);
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
  __shared__ __align__(16) T as[gemm_depth][gemm_row];  // A's slab as [k][m]
  __shared__ __align__(16) T bs[gemm_depth][gemm_row];  // B's slab as [k][n]
  const std::size_t m0 = std::size_t(blockIdx.y) * gemm_tile, n0 = std::size_t(blockIdx.x) * gemm_tile;
  const std::size_t k_begin = std::size_t(blockIdx.z) * k_slice;
  const std::size_t k_end = k_begin + k_slice < K ? k_begin + k_slice : K;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  T acc[gemm_micro][gemm_micro] = {};
  slab<gemm_tile, gemm_depth, T, LayoutA> sa;  // A: rows m, columns k
  slab<gemm_depth, gemm_tile, T, LayoutB> sb;  // B: rows k, columns n
  if (k_begin < k_end) {
    sa.load(a, m0, M, k_begin, k_end);
    sb.load(b, k_begin, k_end, n0, N);
  }
  for (std::size_t k0 = k_begin; k0 < k_end; k0 += gemm_depth) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      as[sa.c[e]][sa.r[e]] = sa.v[e];
      bs[sb.r[e]][sb.c[e]] = sb.v[e];
    }
    __syncthreads();
    if (k0 + gemm_depth < k_end) {  // the next slab's loads fly while this one is used
      sa.load(a, m0, M, k0 + gemm_depth, k_end);
      sb.load(b, k0 + gemm_depth, k_end, n0, N);
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
