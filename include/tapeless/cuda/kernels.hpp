// The fused CUDA kernels of the per-thread path. Each thread runs whole samples
// through the model's generated per-sample code (nn/sample_pass.hpp with one lane:
// the same layer protocol the CPU drives), keeping its activations and its share of
// the gradient in registers; a block sums the gradients with warp shuffles and one
// barrier. Only plain aggregates reach device code. T is float or double.
#pragma once

#include <cstddef>

#include "tapeless/nn/optimizers.hpp"
#include "tapeless/nn/sample_pass.hpp"

namespace tl::detail::gpu {

inline constexpr int warp_size = 32;

// Adds the losses and gradients of samples first, first + stride, ... into acc
// (acc[P] holds the summed loss).
// acc is a thread's own P + 1 values: registers or local memory (an array), or its row
// of global memory (the wide general kernel).
template <class Model, class Loss, class T>
__device__ inline void accumulate_samples(const Model& model, const Loss& loss, const T* params, const T* x, const T* y,
                                          std::size_t batch, std::size_t first, std::size_t stride, T* acc) {
  constexpr std::size_t In = Model::inputs, Out = Model::outputs, P = Model::parameter_count;
  for (std::size_t s = first; s < batch; s += stride) {
    group_buffers<Model, 1, T> buffers;
    const T* yhat = forward_group(model, params, x + s * In, buffers);
    T dout[Out], l;
    loss.template group<Out, 1>(yhat, y + s * Out, dout, &l);
    acc[P] += l;
    backward_group(model, params, x + s * In, buffers, dout, acc);
  }
}

// Block sums in two stages. A warp first reduce-scatters its acc (padded to a
// multiple of 32): at each of the 5 butterfly levels a lane sends the half it gives
// away and keeps the other, so a warp issues ~padded shuffles in all instead of
// 5 * N, and lane l ends with the warp's sums of entries padded/32 * l + i. The
// warps' rows then lie in `scratch` ((blockDim / 32) * padded values of shared
// memory) and warp_row_total() adds them up in a fixed order (deterministic).
template <std::size_t N>
inline constexpr std::size_t padded_sums = (N + warp_size - 1) / warp_size * warp_size;

// One butterfly level: lanes `Offset` apart swap halves of a[0, 2 Half).
template <int Offset, std::size_t Half, class T, std::size_t M>
__device__ inline void reduce_scatter_level(T (&a)[M], int lane) {
  const bool upper = lane & Offset;  // the upper lane keeps the second half
#pragma unroll
  for (std::size_t i = 0; i < Half; ++i) {
    const T send = upper ? a[i] : a[i + Half], keep = upper ? a[i + Half] : a[i];
    a[i] = keep + __shfl_xor_sync(0xffffffffu, send, Offset);
  }
}

template <class T, std::size_t N>
__device__ inline void warp_sums_to_shared(const T (&acc)[N], T* scratch) {
  constexpr std::size_t M = padded_sums<N>;
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  T a[M];
#pragma unroll
  for (std::size_t j = 0; j < M; ++j) a[j] = j < N ? acc[j] : T(0);
  reduce_scatter_level<16, M / 2>(a, lane);
  reduce_scatter_level<8, M / 4>(a, lane);
  reduce_scatter_level<4, M / 8>(a, lane);
  reduce_scatter_level<2, M / 16>(a, lane);
  reduce_scatter_level<1, M / 32>(a, lane);
  constexpr std::size_t per_lane = M / warp_size;
#pragma unroll
  for (std::size_t i = 0; i < per_lane; ++i) scratch[warp * M + per_lane * lane + i] = a[i];
}

template <std::size_t N, class T>
__device__ inline T warp_row_total(const T* scratch, std::size_t j) {
  T s = T(0);
  for (int w = 0; w < int(blockDim.x) / warp_size; ++w) s += scratch[w * padded_sums<N> + j];
  return s;
}

// The per-step path writes one row of `partial_row<P>` values per block: the P
// gradient sums, the loss sum, then a flag that is 1 when the block's gradient sums
// hold a NaN or an infinity (an Inf in the data can leave the loss finite). The
// reduce kernel sums the flags like the loss, so every block of it sees the same
// verdict and no parameter moves unless all may.
template <std::size_t P>
inline constexpr std::size_t partial_row = P + 2;

// Per-step path, kernel 1: one partial row per block. Block 0 also advances the
// device-side step counter, so that a captured graph of many steps can be replayed:
// no step number is baked into it.
template <class Model, class Loss, class T>
__global__ void partial_sums_kernel(Model model, Loss loss, const T* params, const T* x, const T* y,
                                    std::size_t batch, T* partials, long* step_counter) {
  constexpr std::size_t P = Model::parameter_count, N = P + 1;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* shared = reinterpret_cast<T*>(shared_bytes);  // (blockDim / 32) * padded_sums<N>
  if (step_counter && blockIdx.x == 0 && threadIdx.x == 0) ++*step_counter;
  T acc[N] = {};
  accumulate_samples(model, loss, params, x, y, batch, blockIdx.x * blockDim.x + threadIdx.x,
                     std::size_t(gridDim.x) * blockDim.x, acc);
  warp_sums_to_shared(acc, shared);
  __syncthreads();
  T* out = partials + blockIdx.x * partial_row<P>;
  bool finite = true;
  for (std::size_t j = threadIdx.x; j < N; j += blockDim.x) {
    out[j] = warp_row_total<N>(shared, j);
    if (j < P) finite &= bool(isfinite(out[j]));
  }
  const bool any_bad = __syncthreads_or(!finite);
  if (threadIdx.x == 0) out[P + 1] = any_bad ? T(1) : T(0);
}

// Where reduce_update_kernel finds a gradient column's partial sums: `rows` values,
// `stride` apart. A partials view says that for each column and gives the loss and
// the non-finite flag in `loss_rows` rows; the per-step kernels' view is one row of
// partial_row<P> values per block, the layered path's is cuda/layered.hpp's.
template <class T>
struct partial_column {
  const T* p;
  std::size_t stride;
  int rows;
};
template <std::size_t P, class T>
struct block_partials {
  static constexpr std::size_t R = partial_row<P>;
  const T* p;
  int blocks;
  __device__ int loss_rows() const { return blocks; }
  __device__ T loss(int b) const { return p[b * R + P]; }
  __device__ T flag(int b) const { return p[b * R + P + 1]; }
  __device__ partial_column<T> column(std::size_t j) const { return {p + j, R, blocks}; }
};

// Per-step path, kernel 2, on blocks of reduce_columns x reduce_rows threads: each
// block sums 32 columns of the partials (rows split over threadIdx.y, then added in a
// fixed order: deterministic), and every block sums the loss and flag rows the same
// way, so all agree on them. Writes the loss (to loss_out and, if given, to
// history[step - 1 - step_counter[1]], step_counter[1] being the first step of the
// running fit), then either the gradient (`grad`) or the optimizer update for step
// step_counter[0]. A non-finite loss or gradient records the step in failed[0] (and
// 0 for the loss, 1 for the gradient in failed[1]) and changes nothing.
inline constexpr int reduce_columns = warp_size, reduce_rows = 8;

template <class Model, class Optimizer, class T, class Partials>
__global__ void __launch_bounds__(reduce_columns * reduce_rows)
    reduce_update_kernel(Partials partials, T scale, T* loss_out, T* grad, Optimizer opt, T* params, T* state,
                         const long* step_counter, T* history, long* failed) {
  constexpr std::size_t P = Model::parameter_count;
  __shared__ T sums[reduce_rows][reduce_columns + 1];
  __shared__ T warp_totals[2][reduce_rows];
  const int tx = threadIdx.x, ty = threadIdx.y;
  T loss = T(0), flags = T(0);
  for (int b = ty * reduce_columns + tx; b < partials.loss_rows(); b += reduce_columns * reduce_rows) {
    loss += partials.loss(b);
    flags += partials.flag(b);
  }
  for (int offset = warp_size / 2; offset > 0; offset /= 2) {
    loss += __shfl_xor_sync(0xffffffffu, loss, offset);
    flags += __shfl_xor_sync(0xffffffffu, flags, offset);
  }
  if (tx == 0) {
    warp_totals[0][ty] = loss;
    warp_totals[1][ty] = flags;
  }
  const std::size_t j = blockIdx.x * reduce_columns + tx;
  T g = T(0);
  if (j < P) {
    const partial_column<T> column = partials.column(j);
    for (int b = ty; b < column.rows; b += reduce_rows) g += column.p[b * column.stride];
  }
  sums[ty][tx] = g;
  __syncthreads();
  if (ty != 0) return;
  loss = flags = T(0);
  for (int w = 0; w < reduce_rows; ++w) {
    loss += warp_totals[0][w];
    flags += warp_totals[1][w];
  }
  loss *= scale;
  const long step = step_counter ? *step_counter : 1;  // counts from 1
  if (blockIdx.x == 0 && tx == 0) {
    *loss_out = loss;
    if (history) history[step - 1 - step_counter[1]] = loss;
  }
  if (!isfinite(loss) || flags != T(0)) {
    if (blockIdx.x == 0 && tx == 0 && failed &&
        atomicCAS(reinterpret_cast<unsigned long long*>(failed), ~0ull, (unsigned long long)(step - 1)) == ~0ull)
      failed[1] = isfinite(loss) ? 1 : 0;
    return;
  }
  if (j >= P) return;
  g = T(0);
  for (int r = 0; r < reduce_rows; ++r) g += sums[r][tx];
  g *= scale;
  if (grad) grad[j] = g;
  if (params) optimizer_update<Optimizer>(opt.template at_step<T>(step), params, g, state, j, P);
}

template <class Model, class Optimizer, class T, class Partials>
void launch_reduce_update(const Partials& partials, T scale, T* loss_out, T* grad, const Optimizer& opt, T* params,
                          T* state, const long* step_counter, T* history, long* failed, cudaStream_t stream) {
  constexpr int grid = int((Model::parameter_count + reduce_columns - 1) / reduce_columns);
  reduce_update_kernel<Model, Optimizer, T, Partials><<<grid, dim3(reduce_columns, reduce_rows), 0, stream>>>(
      partials, scale, loss_out, grad, opt, params, state, step_counter, history, failed);
}

// The model's outputs, one thread per sample.
template <class Model, class T>
__global__ void apply_kernel(Model model, const T* params, const T* x, std::size_t batch, T* y) {
  for (std::size_t s = blockIdx.x * blockDim.x + threadIdx.x; s < batch; s += std::size_t(gridDim.x) * blockDim.x) {
    group_buffers<Model, 1, T> buffers;
    const T* out = forward_group(model, params, x + s * Model::inputs, buffers);
    for (std::size_t o = 0; o < Model::outputs; ++o) y[s * Model::outputs + o] = out[o];
  }
}

// The whole training loop in one launch of one block: parameters and optimizer state
// live in shared memory for all epochs; the loss history goes to global memory. Two
// barriers a step: after the warps' sums, and after the update, the latter a
// __syncthreads_or that also asks whether any thread found a NaN or infinity in its
// share of the gradient; then every thread undoes its part of that step (it kept the
// old values) and the loop stops: no parameter keeps a non-finite step. The optimizer's per-step constants (Adam's bias
// corrections: double-precision powers) are computed `constants_chunk` steps at a
// time by all threads, off the step's critical path, into one of two tables: a slow
// thread may still read the other in its last update.
inline constexpr int constants_chunk = 64;

template <class Model, class Optimizer, class T>
struct one_block_layout {
  using constants = typename Optimizer::template constants<T>;
  static constexpr std::size_t P = Model::parameter_count, N = P + 1, S = Optimizer::state_slots;
  static constexpr std::size_t per16 = 16 / sizeof(T);  // values per 16 bytes
  static constexpr std::size_t round16(std::size_t n) { return (n + per16 - 1) / per16 * per16; }
  static constexpr std::size_t state = round16(P), table = state + round16(S * P);
  static constexpr std::size_t scratch = table + round16((2 * constants_chunk * sizeof(constants) + sizeof(T) - 1) / sizeof(T));
  static constexpr std::size_t values(int threads) { return scratch + threads / warp_size * padded_sums<N>; }
  // The most gradient entries a thread updates in one step.
  static constexpr std::size_t per_thread(int threads) { return (P + threads - 1) / threads; }
};

template <class Model, class Loss, class Optimizer, class T>
__global__ void fit_one_block_kernel(Model model, Loss loss, Optimizer opt, const T* x, const T* y, std::size_t batch,
                                     T scale, T* params_global, T* state_global, long first_step, int epochs,
                                     T* history, long* failed) {
  using layout = one_block_layout<Model, Optimizer, T>;
  constexpr std::size_t P = layout::P, N = layout::N, S = layout::S;
  constexpr std::size_t max_owned = (P + warp_size - 1) / warp_size;  // at 32 threads, the fewest allowed
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* shared = reinterpret_cast<T*>(shared_bytes);
  T* params = shared;
  T* state = shared + layout::state;
  auto* table = reinterpret_cast<typename layout::constants*>(shared + layout::table);
  T* scratch = shared + layout::scratch;
  for (std::size_t j = threadIdx.x; j < P; j += blockDim.x) params[j] = params_global[j];
  for (std::size_t j = threadIdx.x; j < S * P; j += blockDim.x) state[j] = state_global[j];
  // A thread's parameters, optimizer state and gradient check from the step before:
  // the check is decided at the next step's first barrier (a __syncthreads_or in
  // place of a plain barrier), and a failed step is undone from these copies.
  T old_params[max_owned], old_state[max_owned][S];
  bool bad = false, any_bad = false;
  const auto undo = [&] {
#pragma unroll
    for (std::size_t r = 0; r < max_owned; ++r) {
      const std::size_t j = threadIdx.x + r * blockDim.x;
      if (j >= P) continue;
      params[j] = old_params[r];
#pragma unroll
      for (std::size_t k = 0; k < S; ++k) state[k * P + j] = old_state[r][k];
    }
  };
  int e = 0;
  for (; e < epochs; ++e) {
    auto* constants = table + (e / constants_chunk % 2) * constants_chunk;
    if (e % constants_chunk == 0)  // visible after the barrier below
      for (int i = threadIdx.x; i < constants_chunk && e + i < epochs; i += blockDim.x)
        constants[i] = opt.template at_step<T>(first_step + e + i + 1);
    // Parameters, state and constants written; the last step's sums read; and was any
    // thread's share of the last step's gradient not finite?
    any_bad = __syncthreads_or(bad);
    if (any_bad) break;
    T acc[N] = {};
    accumulate_samples(model, loss, params, x, y, batch, threadIdx.x, blockDim.x, acc);
    warp_sums_to_shared(acc, scratch);
    __syncthreads();
    // Every thread adds up the loss itself: all see the same value and stop together.
    const T value = warp_row_total<N>(scratch, P) * scale;
    if (!isfinite(value)) {
      if (threadIdx.x == 0) {
        failed[0] = first_step + e;
        failed[1] = 0;
      }
      break;
    }
    if (threadIdx.x == 0) history[e] = value;
    const auto& c = constants[e % constants_chunk];
#pragma unroll
    for (std::size_t r = 0; r < max_owned; ++r) {
      const std::size_t j = threadIdx.x + r * blockDim.x;
      if (j >= P) continue;
      const T g = warp_row_total<N>(scratch, j) * scale;
      bad |= !isfinite(g);
      old_params[r] = params[j];
#pragma unroll
      for (std::size_t k = 0; k < S; ++k) old_state[r][k] = state[k * P + j];
      optimizer_update<Optimizer>(c, params, g, state, j, P);
    }
  }
  if (e == epochs) any_bad = __syncthreads_or(bad);  // the last step's check
  if (any_bad) {  // uniform: every thread saw the same __syncthreads_or
    undo();
    if (threadIdx.x == 0) {
      failed[0] = first_step + e - 1;
      failed[1] = 1;
    }
  }
  __syncthreads();
  for (std::size_t j = threadIdx.x; j < P; j += blockDim.x) params_global[j] = params[j];
  for (std::size_t j = threadIdx.x; j < S * P; j += blockDim.x) state_global[j] = state[j];
}

}  // namespace tl::detail::gpu
