// The fused CUDA kernels. Each thread runs whole samples through the same generated
// per-sample code as the CPU (nn/sample_pass.hpp with one lane), keeping its
// activations and its share of the gradient in registers; a block sums the gradients
// with warp shuffles and one barrier. Only plain aggregates reach device code.
#pragma once

#include <cstddef>

#include "tapeless/nn/sample_pass.hpp"

namespace tl::detail::gpu {

inline constexpr int warp_size = 32;

// Adds the losses and gradients of samples first, first + stride, ... into acc
// (acc[P] holds the summed loss).
template <class Model, class Loss, std::size_t N = Model::parameter_count + 1>
__device__ inline void accumulate_samples(const Model& model, const Loss& loss, const float* params, const float* x,
                                          const float* y, std::size_t batch, std::size_t first, std::size_t stride,
                                          float (&acc)[N]) {
  constexpr std::size_t In = Model::inputs, Out = Model::outputs, P = Model::parameter_count;
  for (std::size_t s = first; s < batch; s += stride) {
    group_scratch<Model, 1, float> scratch;
    const float* yhat = forward_group(model, params, x + s * In, scratch);
    float dout[Out], l;
    loss.template group<Out, 1>(yhat, y + s * Out, dout, &l);
    acc[P] += l;
    backward_group<Model>(params, x + s * In, scratch, dout, acc);
  }
}

// Block sums in two stages. A warp first reduce-scatters its acc (padded to a
// multiple of 32): at each of the 5 butterfly levels a lane sends the half it gives
// away and keeps the other, so a warp issues ~padded shuffles in all instead of
// 5 * N, and lane l ends with the warp's sums of entries padded/32 * l + i. The
// warps' rows then lie in `scratch` ((blockDim / 32) * padded floats of shared
// memory) and warp_row_total() adds them up in a fixed order (deterministic).
template <std::size_t N>
inline constexpr std::size_t padded_sums = (N + warp_size - 1) / warp_size * warp_size;

// One butterfly level: lanes `Offset` apart swap halves of a[0, 2 Half).
template <int Offset, std::size_t Half, std::size_t M>
__device__ inline void reduce_scatter_level(float (&a)[M], int lane) {
  const bool upper = lane & Offset;  // the upper lane keeps the second half
#pragma unroll
  for (std::size_t i = 0; i < Half; ++i) {
    const float send = upper ? a[i] : a[i + Half], keep = upper ? a[i + Half] : a[i];
    a[i] = keep + __shfl_xor_sync(0xffffffffu, send, Offset);
  }
}

template <std::size_t N>
__device__ inline void warp_sums_to_shared(const float (&acc)[N], float* scratch) {
  constexpr std::size_t M = padded_sums<N>;
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  float a[M];
#pragma unroll
  for (std::size_t j = 0; j < M; ++j) a[j] = j < N ? acc[j] : 0.0f;
  reduce_scatter_level<16, M / 2>(a, lane);
  reduce_scatter_level<8, M / 4>(a, lane);
  reduce_scatter_level<4, M / 8>(a, lane);
  reduce_scatter_level<2, M / 16>(a, lane);
  reduce_scatter_level<1, M / 32>(a, lane);
  constexpr std::size_t per_lane = M / warp_size;
#pragma unroll
  for (std::size_t i = 0; i < per_lane; ++i) scratch[warp * M + per_lane * lane + i] = a[i];
}

template <std::size_t N>
__device__ inline float warp_row_total(const float* scratch, std::size_t j) {
  float s = 0.0f;
  for (int w = 0; w < int(blockDim.x) / warp_size; ++w) s += scratch[w * padded_sums<N> + j];
  return s;
}

// Sums acc over the block into out[0, N) (shared or global); `scratch` holds
// (blockDim / 32) * padded_sums<N> floats of shared memory.
template <std::size_t N>
__device__ inline void block_sum(const float (&acc)[N], float* scratch, float* out) {
  warp_sums_to_shared(acc, scratch);
  __syncthreads();
  for (std::size_t j = threadIdx.x; j < N; j += blockDim.x) out[j] = warp_row_total<N>(scratch, j);
}

// Per-step path, kernel 1: one partial sum (gradient and loss) per block. Block 0
// also advances the device-side step counter, so that a captured graph of many steps
// can be replayed: no step number is baked into it.
template <class Model, class Loss>
__global__ void partial_sums_kernel(Model model, Loss loss, const float* params, const float* x, const float* y,
                                    std::size_t batch, float* partials, long* step_counter) {
  constexpr std::size_t N = Model::parameter_count + 1;
  extern __shared__ float shared[];  // (blockDim / 32) * padded_sums<N>
  if (step_counter && blockIdx.x == 0 && threadIdx.x == 0) ++*step_counter;
  float acc[N] = {};
  accumulate_samples(model, loss, params, x, y, batch, blockIdx.x * blockDim.x + threadIdx.x,
                     std::size_t(gridDim.x) * blockDim.x, acc);
  block_sum(acc, shared, partials + blockIdx.x * N);
}

// Per-step path, kernel 2, on blocks of reduce_columns x reduce_rows threads: each
// block sums 32 columns of the block partials (rows split over threadIdx.y, then
// added in a fixed order: deterministic), and every block sums the loss column the
// same way, so all agree on it. Writes the loss (to loss_out and, if given, to
// history[step - 1 - step_counter[1]], step_counter[1] being the first step of the
// running fit), then either the gradient (`grad`) or the optimizer update for step
// step_counter[0]. A non-finite loss records the step in *failed_step and leaves
// everything unchanged.
inline constexpr int reduce_columns = warp_size, reduce_rows = 8;

template <class Model, class Optimizer>
__global__ void __launch_bounds__(reduce_columns * reduce_rows)
    reduce_update_kernel(const float* partials, int blocks, float scale, float* loss_out, float* grad, Optimizer opt,
                         float* params, float* state, const long* step_counter, float* history, long* failed_step) {
  constexpr std::size_t P = Model::parameter_count, N = P + 1;
  __shared__ float sums[reduce_rows][reduce_columns + 1];
  __shared__ float warp_losses[reduce_rows];
  const int tx = threadIdx.x, ty = threadIdx.y;
  float loss = 0.0f;
  for (int b = ty * reduce_columns + tx; b < blocks; b += reduce_columns * reduce_rows) loss += partials[b * N + P];
  for (int offset = warp_size / 2; offset > 0; offset /= 2) loss += __shfl_xor_sync(0xffffffffu, loss, offset);
  if (tx == 0) warp_losses[ty] = loss;
  const std::size_t j = blockIdx.x * reduce_columns + tx;
  float g = 0.0f;
  if (j < P)
    for (int b = ty; b < blocks; b += reduce_rows) g += partials[b * N + j];
  sums[ty][tx] = g;
  __syncthreads();
  if (ty != 0) return;
  loss = 0.0f;
  for (int w = 0; w < reduce_rows; ++w) loss += warp_losses[w];
  loss *= scale;
  const long step = step_counter ? *step_counter : 1;  // counts from 1
  if (blockIdx.x == 0 && tx == 0) {
    *loss_out = loss;
    if (history) history[step - 1 - step_counter[1]] = loss;
  }
  if (!isfinite(loss)) {
    if (blockIdx.x == 0 && tx == 0 && failed_step)
      atomicCAS(reinterpret_cast<unsigned long long*>(failed_step), ~0ull, (unsigned long long)(step - 1));
    return;
  }
  if (j >= P) return;
  g = 0.0f;
  for (int r = 0; r < reduce_rows; ++r) g += sums[r][tx];
  g *= scale;
  if (grad) grad[j] = g;
  if (params) optimizer_update(opt, opt.at_step(step), params, g, state, j, P);
}

template <class Model, class Optimizer>
void launch_reduce_update(const float* partials, int blocks, float scale, float* loss_out, float* grad,
                          const Optimizer& opt, float* params, float* state, const long* step_counter, float* history,
                          long* failed_step, cudaStream_t stream) {
  constexpr int grid = int((Model::parameter_count + reduce_columns - 1) / reduce_columns);
  reduce_update_kernel<Model, Optimizer><<<grid, dim3(reduce_columns, reduce_rows), 0, stream>>>(
      partials, blocks, scale, loss_out, grad, opt, params, state, step_counter, history, failed_step);
}

// The model's outputs, one thread per sample.
template <class Model>
__global__ void apply_kernel(Model model, const float* params, const float* x, std::size_t batch, float* y) {
  for (std::size_t s = blockIdx.x * blockDim.x + threadIdx.x; s < batch; s += std::size_t(gridDim.x) * blockDim.x) {
    group_scratch<Model, 1, float> scratch;
    const float* out = forward_group(model, params, x + s * Model::inputs, scratch);
    for (std::size_t o = 0; o < Model::outputs; ++o) y[s * Model::outputs + o] = out[o];
  }
}

// The whole training loop in one launch of one block: parameters and optimizer state
// live in shared memory for all epochs; the loss history goes to global memory. Two
// barriers a step: after the warps' sums, and after the update. The optimizer's
// per-step constants (Adam's bias corrections: double-precision powers) are computed
// `constants_chunk` steps at a time by all threads, off the step's critical path, into
// one of two tables: a slow thread may still read the other in its last update.
inline constexpr int constants_chunk = 64;

template <class Model, class Optimizer>
struct one_block_layout {
  using constants = typename Optimizer::constants;
  static constexpr std::size_t P = Model::parameter_count, N = P + 1, S = Optimizer::state_slots;
  static constexpr std::size_t state = (P + 3) / 4 * 4, table = state + (S * P + 3) / 4 * 4;
  static constexpr std::size_t scratch = table + (2 * constants_chunk * sizeof(constants) + 15) / 16 * 4;
  static constexpr std::size_t floats(int threads) { return scratch + threads / warp_size * padded_sums<N>; }
};

template <class Model, class Loss, class Optimizer>
__global__ void fit_one_block_kernel(Model model, Loss loss, Optimizer opt, const float* x, const float* y,
                                     std::size_t batch, float scale, float* params_global, float* state_global,
                                     long first_step, int epochs, float* history, long* failed_step) {
  using layout = one_block_layout<Model, Optimizer>;
  constexpr std::size_t P = layout::P, N = layout::N, S = layout::S;
  extern __shared__ float4 shared_storage[];  // 16-byte aligned: parameters load as float4
  float* shared = reinterpret_cast<float*>(shared_storage);
  float* params = shared;
  float* state = shared + layout::state;
  auto* table = reinterpret_cast<typename layout::constants*>(shared + layout::table);
  float* scratch = shared + layout::scratch;
  for (std::size_t j = threadIdx.x; j < P; j += blockDim.x) params[j] = params_global[j];
  for (std::size_t j = threadIdx.x; j < S * P; j += blockDim.x) state[j] = state_global[j];
  int e = 0;
  for (; e < epochs; ++e) {
    auto* constants = table + (e / constants_chunk % 2) * constants_chunk;
    if (e % constants_chunk == 0)  // visible after the barrier below
      for (int i = threadIdx.x; i < constants_chunk && e + i < epochs; i += blockDim.x)
        constants[i] = opt.at_step(first_step + e + i + 1);
    __syncthreads();  // parameters, state and constants written; the last step's sums read
    float acc[N] = {};
    accumulate_samples(model, loss, params, x, y, batch, threadIdx.x, blockDim.x, acc);
    warp_sums_to_shared(acc, scratch);
    __syncthreads();
    // Every thread adds up the loss itself: all see the same value and exit together.
    const float value = warp_row_total<N>(scratch, P) * scale;
    if (!isfinite(value)) {
      if (threadIdx.x == 0) *failed_step = first_step + e;
      break;
    }
    if (threadIdx.x == 0) history[e] = value;
    const auto& c = constants[e % constants_chunk];
    for (std::size_t j = threadIdx.x; j < P; j += blockDim.x)
      optimizer_update(opt, c, params, warp_row_total<N>(scratch, j) * scale, state, j, P);
  }
  __syncthreads();
  for (std::size_t j = threadIdx.x; j < P; j += blockDim.x) params_global[j] = params[j];
  for (std::size_t j = threadIdx.x; j < S * P; j += blockDim.x) state_global[j] = state[j];
}

}  // namespace tl::detail::gpu
