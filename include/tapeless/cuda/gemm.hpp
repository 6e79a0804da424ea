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
// With matmul_precision::tf32 or bf16 (float only), the slabs are multiplied on
// tensor cores (WMMA): 8 warps as 2 x 4, each a 32 x 16 part of the tile; operands
// rounded to TF32 as they are loaded, or stored in shared memory as bfloat16; sums in
// fp32, which the epilogue reads back from shared memory.
#pragma once

#include <cuda_bf16.h>
#include <mma.h>

#include <cstddef>
#include <type_traits>

#include "tapeless/cuda/tile_layout.hpp"

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

// How a slab is kept in shared memory: as T, or as bfloat16 for bf16 products. Rows
// are padded (stores hit at most 2 ways of a bank) to a multiple of 16 bytes, as WMMA
// loads need.
template <class T, matmul_precision Precision>
struct gemm_slab_storage {
  using type = T;
  static constexpr int row = gemm_tile + 4;
};
template <>
struct gemm_slab_storage<float, matmul_precision::bf16> {
  using type = __nv_bfloat16;
  static constexpr int row = gemm_tile + 8;
};
template <class T, matmul_precision Precision>
inline constexpr bool uses_tensor_cores = std::is_same_v<T, float> && Precision != matmul_precision::fp32;

// acc += the block's slab products on tensor cores, into a 64 x 64 fp32 tile `sums`.
template <matmul_precision Precision, class S, int Row>
struct tensor_core_tile {
  static constexpr int k_step = Precision == matmul_precision::bf16 ? 16 : 8;
  using element = std::conditional_t<Precision == matmul_precision::bf16, __nv_bfloat16, nvcuda::wmma::precision::tf32>;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, k_step, float> c[2];
  __device__ tensor_core_tile() {
    nvcuda::wmma::fill_fragment(c[0], 0.0f);
    nvcuda::wmma::fill_fragment(c[1], 0.0f);
  }
  __device__ void multiply(const S (*as)[Row], const S (*bs)[Row]) {
    using namespace nvcuda;
    const int warp = threadIdx.x / 32, wm = warp / 4, wn = warp % 4;
#pragma unroll
    for (int k = 0; k < gemm_depth; k += k_step) {
      wmma::fragment<wmma::matrix_b, 16, 16, k_step, element, wmma::row_major> b;
      wmma::load_matrix_sync(b, &bs[k][wn * 16], Row);
      round(b);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        wmma::fragment<wmma::matrix_a, 16, 16, k_step, element, wmma::col_major> a;
        wmma::load_matrix_sync(a, &as[k][wm * 32 + i * 16], Row);
        round(a);
        wmma::mma_sync(c[i], a, b, c[i]);
      }
    }
  }
  __device__ void store(float* sums, int ld) const {
    const int warp = threadIdx.x / 32, wm = warp / 4, wn = warp % 4;
    for (int i = 0; i < 2; ++i)
      nvcuda::wmma::store_matrix_sync(sums + (wm * 32 + i * 16) * ld + wn * 16, c[i], ld, nvcuda::wmma::mem_row_major);
  }

 private:
  template <class Fragment>
  __device__ static void round(Fragment& f) {
    if constexpr (Precision == matmul_precision::tf32)
      for (int t = 0; t < f.num_elements; ++t) f.x[t] = nvcuda::wmma::__float_to_tf32(f.x[t]);
  }
};

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
template <matmul_precision Precision, class T, class LayoutA, class LayoutB, class Epilogue>
__global__ void __launch_bounds__(gemm_threads)
    gemm_kernel(operand<T, LayoutA> a, operand<T, LayoutB> b, std::size_t M, std::size_t N, std::size_t K,
                std::size_t k_slice, Epilogue epilogue) {
  using S = typename gemm_slab_storage<T, Precision>::type;
  constexpr int gemm_row = gemm_slab_storage<T, Precision>::row;
  constexpr bool tensor_cores = uses_tensor_cores<T, Precision>;
  __shared__ __align__(32) S as[gemm_depth][gemm_row];  // A's slab as [k][m]
  __shared__ __align__(32) S bs[gemm_depth][gemm_row];  // B's slab as [k][n]
  const std::size_t m0 = std::size_t(blockIdx.y) * gemm_tile, n0 = std::size_t(blockIdx.x) * gemm_tile;
  const std::size_t k_begin = std::size_t(blockIdx.z) * k_slice;
  const std::size_t k_end = k_begin + k_slice < K ? k_begin + k_slice : K;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  T acc[gemm_micro][gemm_micro] = {};
  [[maybe_unused]] std::conditional_t<tensor_cores, tensor_core_tile<Precision, S, gemm_row>, char> mma;
  slab_reader<gemm_tile, gemm_depth, false, T, LayoutA> sa(a, m0, M, k_begin);  // A: rows m, columns k
  slab_reader<gemm_depth, gemm_tile, true, T, LayoutB> sb(b, n0, N, k_begin);    // B: rows k, columns n
  if (k_begin < k_end) {
    sa.load(k_end - k_begin);
    sb.load(k_end - k_begin);
  }
  for (std::size_t k0 = k_begin; k0 < k_end; k0 += gemm_depth) {
#pragma unroll
    for (int e = 0; e < sa.E; ++e) {
      as[sa.c[e]][sa.r[e]] = S(sa.v[e]);
      bs[sb.r[e]][sb.c[e]] = S(sb.v[e]);
    }
    __syncthreads();
    if (k0 + gemm_depth < k_end) {  // the next slab's loads fly while this one is used
      sa.load(k_end - k0 - gemm_depth);
      sb.load(k_end - k0 - gemm_depth);
    }
    if constexpr (tensor_cores) {
      mma.multiply(as, bs);
    } else {
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
    }
    __syncthreads();
  }
  if constexpr (tensor_cores) {  // the fragments' sums, back in the threads' micro-tiles
    __shared__ __align__(32) float sums[gemm_tile][gemm_tile + 4];
    mma.store(&sums[0][0], gemm_tile + 4);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < gemm_micro; ++i)
#pragma unroll
      for (int j = 0; j < gemm_micro; ++j) acc[i][j] = sums[ty * gemm_micro + i][tx * gemm_micro + j];
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

template <matmul_precision Precision, class T, class LayoutA, class LayoutB, class Epilogue>
void launch_gemm(const operand<T, LayoutA>& a, const operand<T, LayoutB>& b, std::size_t M, std::size_t N,
                 std::size_t K, unsigned slices, const Epilogue& epilogue, cudaStream_t stream) {
  const std::size_t k_slice = ((K + slices - 1) / slices + gemm_depth - 1) / gemm_depth * gemm_depth;
  const dim3 grid(unsigned(gemm_tiles(N)), unsigned(gemm_tiles(M)), slices);
  gemm_kernel<Precision><<<grid, gemm_threads, 0, stream>>>(a, b, M, N, K, k_slice ? k_slice : gemm_depth, epilogue);
}

}  // namespace tl::detail::gpu
