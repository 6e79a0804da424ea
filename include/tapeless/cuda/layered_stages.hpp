// The layer-at-a-time path's stages other than dense layers (nn/stages.hpp;
// cuda/layered.hpp runs them between the dense layers' products):
//   sample       any other layer (layer_norm, a user's layer): one thread a sample runs
//                the layer's own forward and backward (the layer protocol with one
//                lane) on its rows of the chunk; its saved values lie in the chunk's
//                workspace between forward and backward; its backward writes one row of
//                parameter gradients a sample, which a product with a column of ones
//                adds up (cuBLASLt, fp32 sums at every precision), as it does the last
//                dense layer's bias gradient; a layer_norm up to 1024 wide instead
//                takes a warp a sample (cuda/layer_norm_stage.hpp)
//   skip_open    passes x on (its outputs are the stage below's rows, layered_plan.hpp;
//                a copy for a skip around the model's first stage); backward: its delta
//                plus its close stage's (the identity path), handed to the stage below
//                (after a fused first layer, to that layer's gradient kernel)
//   skip_close   f(x) + x
// Handing d loss / d (the output of the stage below) back: a dense layer's deltas are
// its slopes times that (input_delta_kernel with its sums as the product, which also
// takes that layer's bias sums, as after a dense layer's input-delta product); any other
// stage's deltas are that, written straight into its delta rows.
#pragma once

#include <cstddef>
#include <type_traits>

#include "tapeless/cuda/blas.hpp"
#include "tapeless/cuda/delta_kernels.hpp"
#include "tapeless/cuda/device_buffer.hpp"
#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/launch_size.hpp"
#include "tapeless/cuda/layer_norm_stage.hpp"
#include "tapeless/cuda/layer_products.hpp"
#include "tapeless/cuda/layered_plan.hpp"

namespace tl::detail::gpu {

template <class Layer, class T>
__global__ void sample_forward_kernel(Layer layer, const T* p, const T* in, T* out, T* saved, std::size_t rows) {
  constexpr std::size_t In = Layer::inputs, Out = Layer::outputs, S = Layer::saved_count;
  for (std::size_t s = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; s < rows;
       s += std::size_t(gridDim.x) * blockDim.x)
    layer.template forward<1>(p, in + s * In, out + s * Out, saved + s * S);
}

template <bool InputDelta, class Layer, class T>
__global__ void sample_backward_kernel(Layer layer, const T* p, const T* in, const T* out, T* saved, const T* delta,
                                       T* din, T* gradient_rows, std::size_t rows) {
  constexpr std::size_t In = Layer::inputs, Out = Layer::outputs, S = Layer::saved_count, P = Layer::parameter_count;
  for (std::size_t s = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; s < rows;
       s += std::size_t(gridDim.x) * blockDim.x) {
    T* g = gradient_rows + s * P;
    if constexpr (P > 0)  // (a loop to 0 is a warning for nvcc)
      for (std::size_t j = 0; j < P; ++j) g[j] = T(0);
    layer.template backward<InputDelta, 1>(p, in + s * In, out + s * Out, saved + s * S, delta + s * Out,
                                           InputDelta ? din + s * In : static_cast<T*>(nullptr), g);
  }
}

template <class T>
__global__ void add_kernel(const T* a, const T* b, T* out, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}
template <class T>
void add(const T* a, const T* b, T* out, std::size_t count, cudaStream_t stream) {
  add_kernel<<<grid_stride_blocks(count), 256, 0, stream>>>(a, b, out, count);
  TL_CUDA_CHECK_LAUNCH("add_kernel (layered skip)");
}
template <class T>
void copy(const T* from, T* to, std::size_t count, cudaStream_t stream) {
  if (from != to) TL_CUDA_CHECK(cudaMemcpyAsync(to, from, count * sizeof(T), cudaMemcpyDeviceToDevice, stream));
}

// Where stage L's backward writes d loss / d its input: stage L - 1's delta rows, or the
// products buffer when stage L - 1 is dense (its slopes multiply it on the way).
template <class Model, std::size_t L, class T>
T* handed_back_to(T* units, layered_workspace<Model, T>& ws) {
  if constexpr (dense_at<Model, L - 1>()) return ws.products.data();
  else return layer_slopes<Model, L - 1>(units, ws.plan.stride);
}
// Then, for a dense stage L - 1: its deltas from its slopes and `d` (plus `identity`, a
// skip's identity path, when given), and its bias sums.
template <class Model, std::size_t L, class T>
void finish_hand_back(const T* d, T* units, std::size_t rows, layered_workspace<Model, T>& ws, cudaStream_t stream,
                      const T* identity = nullptr) {
  constexpr std::size_t B = L - 1;
  if constexpr (dense_at<Model, B>()) {
    using below = typename Model::template layer_type<B>;
    const std::size_t stride = ws.plan.stride;
    T* partials = ws.slice_partials.data() + bias_partial_offset<Model, B>;
    const dim3 grid(unsigned(delta_column_blocks(below::outputs)), unsigned(bias_slices<Model, B>(rows)));
    const dim3 block(delta_block_columns, delta_block_rows);
    using activation = std::conditional_t<slopes_from_outputs<Model, B>, decltype(below::activation), void>;
    input_delta_kernel<below::outputs, 0, activation><<<grid, block, 0, stream>>>(
        static_cast<const T*>(nullptr), static_cast<const T*>(nullptr), d, identity,
        static_cast<const T*>(layer_outputs<Model, B>(units, stride)), layer_slopes<Model, B>(units, stride), rows,
        static_cast<__nv_bfloat16*>(nullptr), partials);
    TL_CUDA_CHECK_LAUNCH("input_delta_kernel (layered stage)");
  } else {
    T* below_delta = layer_slopes<Model, B>(units, ws.plan.stride);
    const std::size_t count = rows * Model::template layer_type<B>::outputs;
    if (identity) add(d, identity, below_delta, count, stream);
    else copy(d, below_delta, count, stream);
  }
}

// Stage L's forward (not a dense layer) for `rows` samples from `in` into `out`.
template <std::size_t L, class Model, class T>
void forward_stage(const Model& model, const T* params, const T* in, std::size_t rows, T* out, T* units,
                   std::size_t stride, cudaStream_t stream) {
  constexpr stage_kind kind = kind_at<Model, L>();
  constexpr std::size_t Out = Model::template layer_type<L>::outputs;
  if constexpr (kind == stage_kind::sample) {
    const auto layer = model.template sublayer<L>();
    const T* p = params + Model::template parameter_offset<L>;
    if constexpr (warp_layer_norm<std::remove_const_t<decltype(layer)>>) {
      layer_norm_forward(layer, p, in, out, stage_saved<Model, L>(units, stride), rows, stream);
    } else {
      // (Blocks counted as for 256 threads, as before the count had a header of its own:
      // each of the 128 threads takes about two samples.)
      sample_forward_kernel<<<grid_stride_blocks(rows), 128, 0, stream>>>(layer, p, in, out,
                                                                        stage_saved<Model, L>(units, stride), rows);
      TL_CUDA_CHECK_LAUNCH("sample_forward_kernel (layered stage)");
    }
  } else if constexpr (kind == stage_kind::skip_open) {
    copy(in, out, rows * Out, stream);
  } else {
    static_assert(kind == stage_kind::skip_close);
    add(in, static_cast<const T*>(layer_outputs<Model, open_of<typename Model::stages_type>(L)>(units, stride)), out,
        rows * Out, stream);
  }
}

// Stage L's backward (not a dense layer) from its deltas: its gradient into `gradient`
// (`accumulate`d over chunks) and d loss / d its input handed to stage L - 1.
template <std::size_t L, class Model, class T>
void backward_stage(const Model& model, const T* params, const T* x, std::size_t rows, T* units, T* gradient,
                    bool accumulate, layered_workspace<Model, T>& ws, cudaStream_t stream) {
  constexpr stage_kind kind = kind_at<Model, L>();
  const std::size_t stride = ws.plan.stride;
  T* delta = layer_slopes<Model, L>(units, stride);
  if constexpr (kind == stage_kind::sample) {
    using layer = typename Model::template layer_type<L>::layer_type;
    constexpr std::size_t P = layer::parameter_count;
    T* rows_of_gradients = sample_gradient_rows<Model>(units, stride);
    T* din = nullptr;
    if constexpr (L > 0) din = handed_back_to<Model, L>(units, ws);
    const T* p = params + Model::template parameter_offset<L>;
    const T* in = layer_input<Model, L>(x, units, stride);
    std::size_t gradient_rows = rows;  // rows of rows_of_gradients to add up
    if constexpr (warp_layer_norm<layer>) {
      gradient_rows = layer_norm_backward<(L > 0), layer::outputs>(
          p, in, static_cast<const T*>(stage_saved<Model, L>(units, stride)), static_cast<const T*>(delta), din,
          rows_of_gradients, rows, stream);
    } else {
      sample_backward_kernel<(L > 0)><<<grid_stride_blocks(rows), 128, 0, stream>>>(
          model.template sublayer<L>(), p, in, static_cast<const T*>(layer_outputs<Model, L>(units, stride)),
          stage_saved<Model, L>(units, stride), static_cast<const T*>(delta), din, rows_of_gradients, rows);
      TL_CUDA_CHECK_LAUNCH("sample_backward_kernel (layered stage)");
    }
    if constexpr (P > 0)
      ws.blas.multiply(blas_shape{false, false, P, 1, gradient_rows, P, gradient_rows, P},
                       static_cast<const T*>(rows_of_gradients),
                       static_cast<const T*>(ws.ones.data()),
                       gradient + Model::template parameter_offset<L>, accumulate ? T(1) : T(0),
                       matmul_precision::fp32, stream);
    if constexpr (L > 0) finish_hand_back<Model, L>(din, units, rows, ws, stream);
  } else if constexpr (L > 0) {
    // An open stage hands back the inner layers' delta plus the identity path's (its close
    // stage's delta), added by the kernel that hands them on.
    const T* identity = nullptr;
    if constexpr (kind == stage_kind::skip_open)
      identity = layer_slopes<Model, close_of<typename Model::stages_type>(L)>(units, stride);
    if constexpr (L == 1 && fuses_first_layer<Model>)  // a skip right after a fused first layer
      first_layer_gradient(model, params, x, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr),
                           static_cast<const T*>(delta), identity, rows, ws, stream);
    else finish_hand_back<Model, L>(static_cast<const T*>(delta), units, rows, ws, stream, identity);
  }
}

}  // namespace tl::detail::gpu
