// The layer-at-a-time path: chains of dense layers too large for a block to keep on
// chip (the tiled kernels' limit is ~200 KB of shared memory a block), in float or
// double. The batch goes through in chunks; for each chunk
//   forward      Z_l = A_{l-1} W_l^T (+ b_l), A_l = act(Z_l), act'(Z_l) kept   one GEMM a layer (a hidden
//                                                                              tanh, sigmoid, relu or
//                                                                              identity layer's act' is
//                                                                              recomputed from A_l)
//   loss         delta_L = act'(Z_L) * d loss / d A_L, per-sample losses      one kernel (with the last
//                                                                              layer's forward when it
//                                                                              has at most 4 outputs)
//   backward     dW_l += delta_l^T A_{l-1}                                     one GEMM a layer (a second
//                                                                              stream on small chunks)
//                delta_{l-1} = (delta_l W_l) * act'(Z_{l-1})                   one GEMM a layer
//                db_{l-1} += delta_{l-1}^T 1, summed as delta_{l-1} is written   (no pass of its own;
//                cuda/slice_sums.hpp adds the slices)
// through cuBLASLt (cuda/layer_products.hpp) and cuda/delta_kernels.hpp.
// Activations and deltas live in global memory, one chunk at a time (`chunk_bytes`:
// fewer, larger chunks measured faster on the H200 than L2-sized ones, whose extra
// launches cost more than the HBM traffic they save; docs/performance.md). Each chunk
// adds to the same gradient sums, and reduce_update_kernel takes those with the
// per-sample losses (summed by cub::DeviceReduce into one value) and applies the
// optimizer.
#pragma once

#include <cub/device/device_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "tapeless/cuda/delta_kernels.hpp"
#include "tapeless/cuda/device_buffer.hpp"
#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/launch_size.hpp"
#include "tapeless/cuda/layer_products.hpp"
#include "tapeless/cuda/layered_plan.hpp"
#include "tapeless/cuda/layered_stages.hpp"
#include "tapeless/cuda/slice_sums.hpp"

namespace tl::detail::gpu {

// The first chunk of a step clears the non-finite flag and advances the device's step
// counter, once (both loss kernels below).
template <class T>
__device__ inline void start_step_once(bool first_chunk, T* loss_and_flag, long* step_counter) {
  if (first_chunk && blockIdx.x == 0 && threadIdx.x == 0) {
    loss_and_flag[1] = T(0);
    if (step_counter) ++*step_counter;
  }
}

// Per sample of a chunk: the loss (into its slot of the batch's losses) and the last
// layer's delta, in place of its slopes. The first chunk of a step also clears the
// non-finite flag and advances the device's step counter.
template <class Loss, std::size_t Out, bool IntoSlopes, class T>
__global__ void loss_delta_kernel(Loss loss, const T* yhat, const T* y, T* slope, std::size_t rows, T* losses,
                                  T* loss_and_flag, long* step_counter, bool first_chunk) {
  start_step_once(first_chunk, loss_and_flag, step_counter);
  for (std::size_t s = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; s < rows;
       s += std::size_t(gridDim.x) * blockDim.x) {
    T dout[Out], l;
    loss.template group<Out, 1>(yhat + s * Out, y + s * Out, dout, &l);
    for (std::size_t o = 0; o < Out; ++o) {
      if constexpr (IntoSlopes) slope[s * Out + o] *= dout[o];
      else slope[s * Out + o] = dout[o];  // a last stage that is no dense layer: its deltas
    }
    losses[s] = l;
  }
}

// A head of at most thin_product_terms outputs (a regression model's last layer) is
// trained without a product of its own: per sample, its forward (In multiply-adds an
// output), the loss and the head's deltas in one kernel, in place of cuBLASLt's
// product, the bias-and-activation kernel and loss_delta_kernel. The head's outputs
// are never written (the backward reads only its deltas and inputs). A group of
// head_lanes(In) lanes takes a sample, each adding every head_lanes-th term, and
// cub::WarpReduce adds the lanes: reads of the inputs stay coalesced at every width.
template <class Model>
inline constexpr bool fuses_head = dense_at<Model, Model::depth - 1>() && Model::outputs <= thin_product_terms;
constexpr unsigned head_lanes(std::size_t inputs) {
  return unsigned(std::clamp<std::size_t>(std::bit_ceil(inputs), 4, 32));
}
template <class Activation, class Loss, std::size_t In, std::size_t Out, class T>
__global__ void __launch_bounds__(256)
    head_loss_kernel(Activation activation, Loss loss, const T* w, const T* bias, const T* in, const T* y,
                     std::size_t rows, T* delta, T* losses, T* loss_and_flag, long* step_counter, bool first_chunk) {
  constexpr unsigned lanes = head_lanes(In), groups = 256 / lanes;
  start_step_once(first_chunk, loss_and_flag, step_counter);
  using group_reduce = cub::WarpReduce<T, lanes>;
  __shared__ typename group_reduce::TempStorage storage[groups];
  const unsigned group = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  for (std::size_t s = blockIdx.x * std::size_t(groups) + group; s < rows; s += std::size_t(gridDim.x) * groups) {
    T z[Out];
#pragma unroll
    for (std::size_t o = 0; o < Out; ++o) {
      T sum = T(0);
      for (std::size_t k = lane; k < In; k += lanes) sum += w[o * In + k] * in[s * In + k];
      z[o] = group_reduce(storage[group]).Sum(sum);  // valid in lane 0
      __syncwarp();
    }
    if (lane != 0) continue;
    T yhat[Out], slope[Out], dout[Out], l;
#pragma unroll
    for (std::size_t o = 0; o < Out; ++o) yhat[o] = activation.value_and_derivative(z[o] + bias[o], slope[o]);
    loss.template group<Out, 1>(yhat, y + s * Out, dout, &l);
#pragma unroll
    for (std::size_t o = 0; o < Out; ++o) delta[s * Out + o] = slope[o] * dout[o];
    losses[s] = l;
  }
}
template <class Model, class Loss, class T>
void head_loss(const Model& model, const Loss& loss, const T* params, const T* in, const T* y, std::size_t rows,
               T* delta, T* losses, T* loss_and_flag, long* step_counter, bool first_chunk, cudaStream_t stream) {
  constexpr std::size_t L = Model::depth - 1;
  using layer = typename Model::template layer_type<L>;
  static_assert(blas_layout<layer>, "the layered path reads a dense layer's weights as a row-major Out x In block");
  constexpr std::size_t groups = 256 / head_lanes(layer::inputs);
  const T* p = params + Model::template parameter_offset<L>;
  const auto activation = model.template sublayer<L>().activation;
  head_loss_kernel<decltype(activation), Loss, layer::inputs, layer::outputs>
      <<<grid_stride_blocks(rows, groups), 256, 0, stream>>>(
          activation, loss, p + layer::weight_offset, p + layer::bias_offset, in, y, rows, delta, losses,
          loss_and_flag, step_counter, first_chunk);
  TL_CUDA_CHECK_LAUNCH("head_loss_kernel");
}

// Calls f(std::integral_constant<matmul_precision, P>) for the run-time precision;
// double has no tensor-core products, so it instantiates fp32 only, and bf16 only
// `WithBf16` (chains of dense layers: cuda/step.hpp refuses it for other models).
template <class T, bool WithBf16 = true, class F>
void with_precision(matmul_precision precision, F f) {
  using P = matmul_precision;
  if constexpr (std::is_same_v<T, float>) {
    if (precision == P::tf32) return f(std::integral_constant<P, P::tf32>{});
    if constexpr (WithBf16)
      if (precision == P::bf16) return f(std::integral_constant<P, P::bf16>{});
  }
  f(std::integral_constant<P, P::fp32>{});
}

// Forward of one chunk of `rows` samples. Layer l's outputs and slopes go to the
// workspace, except the last layer's outputs when `last_out` is given (apply), and
// the slopes the backward recomputes (forward_writes_slopes).
template <matmul_precision Precision, class Model, class T>
void layered_forward(const Model& model, const T* params, const T* x, std::size_t rows, T* units, T* last_out,
                     bool keep_slopes, layered_workspace<Model, T>& ws, cudaStream_t stream,
                     std::size_t layers = Model::depth) {
  const std::size_t stride = ws.plan.stride;
  [&]<std::size_t... L>(std::index_sequence<L...>) {
    ([&] {
      if (L >= layers) return;
      const T* in = layer_input<Model, L>(x, units, stride);
      T* out = (L + 1 == Model::depth && last_out) ? last_out : layer_outputs<Model, L>(units, stride);
      if constexpr (dense_at<Model, L>())
        forward_layer<Precision, L>(model, params, in, rows, out,
                                    keep_slopes && forward_writes_slopes<Model, L> ? layer_slopes<Model, L>(units, stride)
                                                                                   : static_cast<T*>(nullptr),
                                    keep_slopes, ws, stream);
      else forward_stage<L>(model, params, in, rows, out, units, stride, stream);
    }(), ...);
  }(std::make_index_sequence<Model::depth>{});
}

// The gradients left as partial rows, one a slice of samples (cuda/slice_sums.hpp):
// every bias_from_delta_sums layer's biases and the fused first layer's, in one launch.
template <class Model, class T>
void add_slice_sums(layered_workspace<Model, T>& ws, std::size_t rows, T* gradient, bool accumulate,
                    cudaStream_t stream) {
  slice_sums_table<Model::depth> table;
  [&]<std::size_t... L>(std::index_sequence<L...>) {
    ([&] {
      if constexpr (bias_from_delta_sums<Model, L>) {
        using layer = typename Model::template layer_type<L>;
        table.add(layer::outputs, Model::template parameter_offset<L> + layer::bias_offset,
                  bias_partial_offset<Model, L>, bias_slices<Model, L>(rows));
      }
    }(), ...);
  }(std::make_index_sequence<Model::depth>{});
  if constexpr (fuses_first_layer<Model>)
    table.add(first_layer_partial_width<Model>,
              Model::template parameter_offset<0> + Model::template layer_type<0>::weight_offset,
              first_layer_partial_offset<Model>, first_layer_slices<Model>(rows));
  slice_sums_kernel<<<unsigned((table.entries + 7) / 8), 256, 0, stream>>>(
      table, static_cast<const T*>(ws.slice_partials.data()), gradient, accumulate);
  TL_CUDA_CHECK_LAUNCH("slice_sums_kernel (layered backward)");
}

// Where the weight products overlap the input deltas: on chunks of up to this many
// samples, where every kernel is a launch-bound few microseconds. Measured on the H200
// against running them in sequence (docs/performance.md, 2026-12-04 evening): 1.25-1.45x
// at 10^3 samples and 1.00-1.21x at 10^4 (64-3/8/16, 128-4, 256-4); from 3 * 10^4 the
// result depends on the shape (0.76-1.12x: 64-wide chains at 65536 samples lost most),
// so larger chunks keep one stream.
inline constexpr std::size_t side_stream_rows = 16384;
inline bool overlaps_weight_products(std::size_t rows) { return rows <= side_stream_rows; }

// Backward of one chunk, from the last layer's deltas (in its slope rows); a thin
// first layer's gradient comes with the second layer's (fuses_first_layer); the
// gradients left as partial rows are added by add_slice_sums. On chunks of at most
// side_stream_rows samples, each layer's weight-gradient product runs on the side
// stream, beside the input deltas of the layers before it.
template <matmul_precision Precision, class Model, class T>
void layered_backward(const Model& model, const T* params, const T* x, std::size_t rows, T* units,
                      layered_workspace<Model, T>& ws, bool accumulate, cudaStream_t stream) {
  const std::size_t stride = ws.plan.stride;
  T* gradient = ws.gradient.data();
  const bool overlap = overlaps_weight_products(rows);
  try {
    [&]<std::size_t... R>(std::index_sequence<R...>) {
      ([&] {
        constexpr std::size_t L = Model::depth - 1 - R;
        if constexpr (!dense_at<Model, L>()) {
          backward_stage<L>(model, params, x, rows, units, gradient, accumulate, ws, stream);
        } else if constexpr (L > 0 || !fuses_first_layer<Model>) {
          T* previous_slope = nullptr;
          if constexpr (L > 0) previous_slope = layer_slopes<Model, L - 1>(units, stride);
          backward_layer<Precision, L>(model, params, x, layer_input<Model, L>(x, units, stride),
                                       layer_slopes<Model, L>(units, stride), previous_slope, rows, gradient, accumulate,
                                       ws, stream, overlap ? ws.side.fork(stream) : stream);
        }
      }(), ...);
    }(std::make_index_sequence<Model::depth>{});
    if constexpr (slice_partial_count<Model> > 0) add_slice_sums(ws, rows, gradient, accumulate, stream);
  } catch (...) {  // a capture must not end with the side stream forked
    if (overlap) ws.side.join_after_error(stream);
    throw;
  }
  // The next chunk's forward overwrites the activations the weight products read, and
  // the step's last kernels read their sums.
  if (overlap) ws.side.join(stream);
}

// Every chunk forward, loss and backward, at one precision.
template <matmul_precision Precision, class Model, class Loss, class T>
void layered_chunks(const Model& model, const Loss& loss, const T* params, const T* x, const T* y,
                    std::size_t batch, layered_workspace<Model, T>& ws, long* step_counter, cudaStream_t stream) {
  constexpr std::size_t In = Model::inputs, Out = Model::outputs;
  const std::size_t chunk = ws.plan.chunk, stride = ws.plan.stride;
  T* units = ws.units.data();
  T* losses = ws.sample_losses.data();
  T* loss_and_flag = ws.loss_and_flag.data();
  constexpr bool low = bfloat16_operands<Precision, T>;  // bfloat16 copies of the operands
  if constexpr (low) to_bfloat16(params, Model::parameter_count, ws.low_params(), stream);
  for (std::size_t first = 0; first < batch; first += chunk) {
    const std::size_t rows = std::min(chunk, batch - first);
    if constexpr (low) to_bfloat16(x + first * In, rows * In, ws.low_inputs(), stream);
    constexpr std::size_t last = Model::depth - 1;
    // A fused head's forward is head_loss's.
    layered_forward<Precision>(model, params, x + first * In, rows, units, static_cast<T*>(nullptr), true, ws, stream,
                               fuses_head<Model> ? last : Model::depth);
    if constexpr (fuses_head<Model>) {
      head_loss(model, loss, params, layer_input<Model, last>(x + first * In, units, stride), y + first * Out, rows,
                layer_slopes<Model, last>(units, stride), losses + first, loss_and_flag, step_counter, first == 0,
                stream);
    } else {
      loss_delta_kernel<Loss, Out, dense_at<Model, last>(), T><<<grid_stride_blocks(rows), 256, 0, stream>>>(
          loss, layer_outputs<Model, last>(units, stride), y + first * Out, layer_slopes<Model, last>(units, stride),
          rows, losses + first, loss_and_flag, step_counter, first == 0);
      TL_CUDA_CHECK_LAUNCH("loss_delta_kernel");
    }
    if constexpr (low)
      to_bfloat16(layer_slopes<Model, last>(units, stride), rows * Out, ws.template low_deltas<last>(), stream);
    layered_backward<Precision>(model, params, x + first * In, rows, units, ws, first > 0, stream);
  }
}

// A step's sums: every chunk, then the per-sample losses added by CUB into one value;
// the gradient and the loss are then ready for reduce_update_kernel through ws.view().
// ws.prepare() must have run for x's batch. The model is the user's; the path runs its
// stages (cuda/layered_model.hpp).
template <class Model, class Loss, class T>
void layered_partial_sums(const Model& model, const Loss& loss, const T* params, const T* x, const T* y,
                          std::size_t batch, layered_workspace<layered_view<Model>, T>& ws,
                          matmul_precision precision, long* step_counter, cudaStream_t stream) {
  with_precision<T, all_dense<layered_view<Model>>>(precision, [&](auto p) {
    layered_chunks<decltype(p)::value>(as_layered(model), loss, params, x, y, batch, ws, step_counter, stream);
  });
  constexpr std::size_t P = Model::parameter_count;
  flag_non_finite_kernel<<<grid_stride_blocks(P), 256, 0, stream>>>(
      static_cast<const T*>(ws.gradient.data()), P,
      ws.loss_and_flag.data() + 1);
  TL_CUDA_CHECK_LAUNCH("flag_non_finite_kernel");
  std::size_t storage = ws.reduce_storage.size();
  TL_CUDA_CHECK(cub::DeviceReduce::Sum(ws.reduce_storage.data(), storage,
                                       ws.sample_losses.data(),
                                       ws.loss_and_flag.data(), batch, stream));
}

// The model's outputs for a batch, chunk by chunk, into y ((outputs, batch)); ws
// prepared for the batch without training.
template <class Model, class T>
void layered_apply(const Model& model, const T* params, const T* x, std::size_t batch, T* y,
                   layered_workspace<layered_view<Model>, T>& ws) {
  decltype(auto) view = as_layered(model);
  const std::size_t chunk = ws.plan.chunk;
  T* units = ws.units.data();
  for (std::size_t first = 0; first < batch; first += chunk)
    layered_forward<matmul_precision::fp32>(view, params, x + first * Model::inputs, std::min(chunk, batch - first),
                                            units, y + first * Model::outputs, false, ws, cudaStream_t(0));
}

}  // namespace tl::detail::gpu
