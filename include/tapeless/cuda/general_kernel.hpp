// The general per-step kernel: kernel 1 of the per-step path for models with more
// gradient sums than registers hold and no tiled path (docs/design.md, "GPU paths").
// Apart from kernels.hpp, whose per-sample code and partial rows it shares.
#pragma once

#include <cstddef>

#include "tapeless/cuda/kernels.hpp"

namespace tl::detail::gpu {

inline constexpr int general_threads = 64;

// Per-step path, kernel 1 for models with more gradient sums than registers hold
// (any layers, float or double): the same row, from sums kept in local memory and
// added across a warp one entry at a time. Slower than the register and tiled
// kernels; it exists so that every model runs (docs/design.md, "GPU paths").
template <class Model, class Loss, class T>
__global__ void general_partial_sums_kernel(Model model, Loss loss, const T* params, const T* x, const T* y,
                                            std::size_t batch, T* partials, long* step_counter) {
  constexpr std::size_t P = Model::parameter_count, N = P + 1;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* warp_rows = reinterpret_cast<T*>(shared_bytes);  // (blockDim / 32) rows of N
  if (step_counter && blockIdx.x == 0 && threadIdx.x == 0) ++*step_counter;
  T acc[N] = {};
  accumulate_samples(model, loss, params, x, y, batch, blockIdx.x * blockDim.x + threadIdx.x,
                     std::size_t(gridDim.x) * blockDim.x, acc);
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  for (std::size_t j = 0; j < N; ++j) {
    T v = acc[j];
    for (int offset = warp_size / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_rows[warp * N + j] = v;
  }
  __syncthreads();
  T* out = partials + blockIdx.x * partial_row<P>;
  bool finite = true;
  for (std::size_t j = threadIdx.x; j < N; j += blockDim.x) {
    T v = T(0);
    for (int w = 0; w < int(blockDim.x) / warp_size; ++w) v += warp_rows[w * N + j];
    out[j] = v;
    if (j < P) finite &= bool(isfinite(v));
  }
  const bool any_bad = __syncthreads_or(!finite);
  if (threadIdx.x == 0) out[P + 1] = any_bad ? T(1) : T(0);
}

}  // namespace tl::detail::gpu
