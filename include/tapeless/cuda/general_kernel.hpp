// The general per-step kernel: kernel 1 of the per-step path for models with more
// gradient sums than registers hold and no tiled path (docs/design.md, "GPU paths"),
// with its choice of block sums. Apart from kernels.hpp, whose per-sample code and
// partial rows it shares.
#pragma once

#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cstddef>

#include "tapeless/cuda/kernels.hpp"

namespace tl::detail::gpu {

// The general kernel's block size. A compile-time constant: cub::BlockReduce needs it.
inline constexpr int general_threads = 64;

// How the general kernel adds its threads' N = P + 1 sums into the block's row. The A/B
// in place (bench/micro/general_sums_gpu.cu; docs/design.md, "CUB and hand-written
// reductions") chose the chunked reduce-scatter: 1.3-7.5x faster than per-entry
// shuffles and 1.1-15x faster than cub::BlockReduce, at every size measured (H200,
// 2026-12-03). The others stay for that A/B.
//   per_entry_shuffles: each entry summed over a warp by its own 5 shuffles, lane 0
//     writing it to the warp's row in shared memory; the rows are then added in a
//     fixed order.
//   chunked_reduce_scatter: 32 entries at a time, through registers, by kernels.hpp's
//     reduce-scatter (reduce_scatter_level: 31 shuffles per 32 entries instead of
//     160); lane l ends with entry l of the chunk and writes it to the same rows,
//     which are added up the same way.
//   cub_block_reduce: cub::BlockReduce (warp reductions) once per entry; thread 0
//     writes each total straight to the partial row (no rows in shared memory).
// All write the same row and are deterministic for a given launch configuration.
enum class general_sums { per_entry_shuffles, chunked_reduce_scatter, cub_block_reduce };
inline constexpr general_sums general_default_sums = general_sums::chunked_reduce_scatter;

// The dynamic shared memory a launch with `Sums` must give: the warps' rows of N sums,
// or none for CUB, whose TempStorage ring is static (general_reduce_ring).
template <general_sums Sums, class T>
constexpr std::size_t general_shared_bytes(std::size_t N) {
  return Sums == general_sums::cub_block_reduce ? 0 : std::size_t(general_threads / warp_size) * N * sizeof(T);
}

template <class T>
using general_block_reduce = cub::BlockReduce<T, general_threads, cub::BLOCK_REDUCE_WARP_REDUCTIONS>;
// CUB asks for a barrier before a TempStorage is reused: a ring of them (at most 16 KiB
// of the 48 KB of static shared memory a kernel may declare) costs one barrier every
// `ring` entries instead of one per entry, as in bench/micro/block_sums_gpu.cu.
template <class T, std::size_t N>
inline constexpr std::size_t general_reduce_ring = [] {
  constexpr std::size_t fit = 16384 / sizeof(typename general_block_reduce<T>::TempStorage);
  return fit < 1 ? 1 : fit > N ? N : fit;
}();

// per_entry_shuffles: the warp's sums into its row warp_rows[warp * N, (warp + 1) * N).
template <class T, std::size_t N>
__device__ inline void per_entry_warp_rows(const T (&acc)[N], T* warp_rows) {
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  for (std::size_t j = 0; j < N; ++j) {
    T v = acc[j];
    for (int offset = warp_size / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_rows[warp * N + j] = v;
  }
}

// chunked_reduce_scatter, one chunk: entries [c, c + Count) of acc (Count <= 32, the
// rest of the chunk zeros) summed over the warp; lane l writes entry c + l to `row`.
template <std::size_t Count, class T, std::size_t N>
__device__ inline void reduce_scatter_chunk(const T (&acc)[N], std::size_t c, int lane, T* row) {
  T a[warp_size];
#pragma unroll
  for (std::size_t i = 0; i < warp_size; ++i) a[i] = i < Count ? acc[c + i] : T(0);
  reduce_scatter_level<16, 16>(a, lane);
  reduce_scatter_level<8, 8>(a, lane);
  reduce_scatter_level<4, 4>(a, lane);
  reduce_scatter_level<2, 2>(a, lane);
  reduce_scatter_level<1, 1>(a, lane);
  if (std::size_t(lane) < Count) row[c + lane] = a[0];  // as warp_sums_to_shared with one entry a lane
}

// chunked_reduce_scatter: whole chunks in a loop, then the compile-time tail, so that
// only the tail pads with zeros.
template <class T, std::size_t N>
__device__ inline void chunked_warp_rows(const T (&acc)[N], T* warp_rows) {
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  constexpr std::size_t whole = N / warp_size * warp_size;
  T* row = warp_rows + warp * N;
  for (std::size_t c = 0; c < whole; c += warp_size) reduce_scatter_chunk<warp_size>(acc, c, lane, row);
  if constexpr (whole < N) reduce_scatter_chunk<N - whole>(acc, whole, lane, row);
}

// cub_block_reduce: thread 0 writes the N totals to `out` and returns whether the first
// N - 1 (the gradient) are finite; the other threads return true.
template <class T, std::size_t N>
__device__ inline bool cub_sums_to_row(const T (&acc)[N], T* out) {
  using reduce = general_block_reduce<T>;
  constexpr std::size_t ring = general_reduce_ring<T, N>;
  __shared__ typename reduce::TempStorage temp[ring];
  bool finite = true;
  for (std::size_t j = 0, slot = 0; j < N; ++j, ++slot) {
    if (slot == ring) {
      __syncthreads();
      slot = 0;
    }
    const T s = reduce(temp[slot]).Sum(acc[j]);  // valid in thread 0
    if (threadIdx.x == 0) {
      out[j] = s;
      if (j + 1 < N) finite &= bool(isfinite(s));
    }
  }
  return finite;
}

// Per-step path, kernel 1 for models with more gradient sums than registers hold
// (any layers, float or double): the same row as partial_sums_kernel, from sums kept
// in local memory, on blocks of general_threads. Slower than the register and tiled
// kernels; it exists so that every model runs (docs/design.md, "GPU paths").
template <class Model, class Loss, class T, general_sums Sums = general_default_sums>
__global__ void general_partial_sums_kernel(Model model, Loss loss, const T* params, const T* x, const T* y,
                                            std::size_t batch, T* partials, long* step_counter) {
  constexpr std::size_t P = Model::parameter_count, N = P + 1;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* warp_rows = reinterpret_cast<T*>(shared_bytes);  // general_shared_bytes<Sums, T>(N)
  if (step_counter && blockIdx.x == 0 && threadIdx.x == 0) ++*step_counter;
  T acc[N] = {};
  accumulate_samples(model, loss, params, x, y, batch, blockIdx.x * blockDim.x + threadIdx.x,
                     std::size_t(gridDim.x) * blockDim.x, acc);
  T* out = partials + blockIdx.x * partial_row<P>;
  bool finite = true;  // this thread's share of the gradient sums
  if constexpr (Sums == general_sums::cub_block_reduce) {
    finite = cub_sums_to_row(acc, out);
  } else {
    if constexpr (Sums == general_sums::per_entry_shuffles) per_entry_warp_rows(acc, warp_rows);
    else chunked_warp_rows(acc, warp_rows);
    __syncthreads();
    for (std::size_t j = threadIdx.x; j < N; j += blockDim.x) {
      T v = T(0);
      for (int w = 0; w < int(blockDim.x) / warp_size; ++w) v += warp_rows[w * N + j];
      out[j] = v;
      if (j < P) finite &= bool(isfinite(v));
    }
  }
  const bool any_bad = __syncthreads_or(!finite);
  if (threadIdx.x == 0) out[P + 1] = any_bad ? T(1) : T(0);
}

// The general kernel past general_parameter_limit (models with other layers than dense
// ones and more parameters than a thread's local sums can hold): each thread adds its
// samples into its own row of partial_row<P> values in global memory, the layout of one
// block's row, so reduce_update_kernel adds the rows as it adds blocks' rows (in a fixed
// order: deterministic for a given row count). The rows are read and written sample
// after sample, uncoalesced: far slower than the dense paths, but no model is refused.
template <class Model, class Loss, class T>
__global__ void wide_general_sums_kernel(Model model, Loss loss, const T* params, const T* x, const T* y,
                                         std::size_t batch, T* partials, long* step_counter) {
  constexpr std::size_t P = Model::parameter_count;
  const std::size_t thread = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (step_counter && thread == 0) ++*step_counter;
  T* acc = partials + thread * partial_row<P>;
  for (std::size_t j = 0; j <= P; ++j) acc[j] = T(0);
  accumulate_samples(model, loss, params, x, y, batch, thread, std::size_t(gridDim.x) * blockDim.x, acc);
  bool finite = true;
  for (std::size_t j = 0; j < P; ++j) finite &= bool(isfinite(acc[j]));
  acc[P + 1] = finite ? T(0) : T(1);
}

// Its rows (threads, in blocks of general_threads): enough for every sample up to the
// most whose rows fit wide_general_bytes. Fixed by the model and the batch, never by the
// device, so that a model's sums are added in the same order on every GPU.
inline constexpr std::size_t wide_general_bytes = std::size_t(512) << 20;
inline constexpr std::size_t wide_general_max_rows = std::size_t(1) << 15;
template <class Model, class T>
std::size_t wide_general_rows(std::size_t batch) {
  constexpr std::size_t block = general_threads, row_bytes = partial_row<Model::parameter_count> * sizeof(T);
  constexpr std::size_t most = std::max(block, std::min(wide_general_max_rows, wide_general_bytes / row_bytes) / block * block);
  return std::min(most, (std::max<std::size_t>(batch, 1) + block - 1) / block * block);
}

}  // namespace tl::detail::gpu
