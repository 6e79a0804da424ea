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

// Sums acc over the block into out[0, N) (shared or global). `scratch` holds
// (blockDim / 32) * N floats of shared memory. Ends with a barrier.
template <std::size_t N>
__device__ inline void block_sum(float (&acc)[N], float* scratch, float* out) {
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size, warps = blockDim.x / warp_size;
#pragma unroll
  for (std::size_t j = 0; j < N; ++j) {
    float v = acc[j];
#pragma unroll
    for (int offset = warp_size / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) scratch[warp * N + j] = v;
  }
  __syncthreads();
  for (std::size_t j = threadIdx.x; j < N; j += blockDim.x) {
    float s = 0.0f;
    for (int w = 0; w < warps; ++w) s += scratch[w * N + j];
    out[j] = s;
  }
  __syncthreads();
}

template <class Optimizer>
__device__ inline void update_one(const Optimizer& opt, const typename Optimizer::constants& c, float& p, float g,
                                  float* state, std::size_t j, std::size_t n) {
  if constexpr (Optimizer::state_slots == 1) Optimizer::update(c, p, g, state[j]);
  else Optimizer::update(c, p, g, state[j], state[n + j]);
}

// Per-step path, kernel 1: one partial sum (gradient and loss) per block. Block 0
// also advances the device-side step counter, so that a captured graph of many steps
// can be replayed: no step number is baked into it.
template <class Model, class Loss>
__global__ void partial_sums_kernel(Model model, Loss loss, const float* params, const float* x, const float* y,
                                    std::size_t batch, float* partials, long* step_counter) {
  constexpr std::size_t N = Model::parameter_count + 1;
  extern __shared__ float shared[];
  if (step_counter && blockIdx.x == 0 && threadIdx.x == 0) ++*step_counter;
  float acc[N] = {};
  accumulate_samples(model, loss, params, x, y, batch, blockIdx.x * blockDim.x + threadIdx.x,
                     std::size_t(gridDim.x) * blockDim.x, acc);
  block_sum(acc, shared, partials + blockIdx.x * N);
}

// Per-step path, kernel 2: sums the block partials in a fixed order (deterministic),
// writes the loss (to loss_out and, if given, to history[step - 1 - step_counter[1]],
// step_counter[1] being the first step of the running fit), then either the gradient
// (`grad`) or the optimizer update for step step_counter[0]. A non-finite loss records
// the step in *failed_step and leaves everything unchanged.
template <class Model, class Optimizer>
__global__ void reduce_update_kernel(const float* partials, int blocks, float scale, float* loss_out, float* grad,
                                     Optimizer opt, float* params, float* state, const long* step_counter,
                                     float* history, long* failed_step) {
  constexpr std::size_t P = Model::parameter_count, N = P + 1;
  float loss = 0.0f;
  for (int b = 0; b < blocks; ++b) loss += partials[b * N + P];
  loss *= scale;
  const long step = step_counter ? *step_counter : 1;  // counts from 1
  const std::size_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j == 0) {
    *loss_out = loss;
    if (history) history[step - 1 - step_counter[1]] = loss;
  }
  if (!isfinite(loss)) {
    if (j == 0 && failed_step)
      atomicCAS(reinterpret_cast<unsigned long long*>(failed_step), ~0ull, (unsigned long long)(step - 1));
    return;
  }
  if (j >= P) return;
  float g = 0.0f;
  for (int b = 0; b < blocks; ++b) g += partials[b * N + j];
  g *= scale;
  if (grad) grad[j] = g;
  if (params) update_one(opt, opt.at_step(step), params[j], g, state, j, P);
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
// live in shared memory for all epochs; the loss history goes to global memory.
template <class Model, class Loss, class Optimizer>
__global__ void fit_one_block_kernel(Model model, Loss loss, Optimizer opt, const float* x, const float* y,
                                     std::size_t batch, float scale, float* params_global, float* state_global,
                                     long first_step, int epochs, float* history, long* failed_step) {
  constexpr std::size_t P = Model::parameter_count, N = P + 1, S = Optimizer::state_slots;
  extern __shared__ float shared[];
  float* params = shared;            // P
  float* state = params + P;         // S * P
  float* totals = state + S * P;     // N
  float* scratch = totals + N;       // warps * N
  for (std::size_t j = threadIdx.x; j < P; j += blockDim.x) params[j] = params_global[j];
  for (std::size_t j = threadIdx.x; j < S * P; j += blockDim.x) state[j] = state_global[j];
  __syncthreads();
  int e = 0;
  for (; e < epochs; ++e) {
    float acc[N] = {};
    accumulate_samples(model, loss, params, x, y, batch, threadIdx.x, blockDim.x, acc);
    block_sum(acc, scratch, totals);
    const float value = totals[P] * scale;
    if (!isfinite(value)) {  // every thread sees the same total: a uniform exit
      if (threadIdx.x == 0) *failed_step = first_step + e;
      break;
    }
    if (threadIdx.x == 0) history[e] = value;
    const auto c = opt.at_step(first_step + e + 1);
    for (std::size_t j = threadIdx.x; j < P; j += blockDim.x) update_one(opt, c, params[j], totals[j] * scale, state, j, P);
    __syncthreads();
  }
  for (std::size_t j = threadIdx.x; j < P; j += blockDim.x) params_global[j] = params[j];
  for (std::size_t j = threadIdx.x; j < S * P; j += blockDim.x) state_global[j] = state[j];
}

}  // namespace tl::detail::gpu
