// One dense layer's products on the layer-at-a-time path, in column-major BLAS terms
// with a chunk's samples as columns (a layer's rows in the workspace are its samples):
//   forward       Z (Out x rows) = W^T X, then A = act(Z + b), slope = act'(Z + b)
//                 (unless the backward recomputes it: forward_writes_slopes)
//   weight grad   dW (In x Out) += X delta^T
//   input delta   delta_prev (In x rows) = (W delta) * slope_prev, db_prev += its row sums
// W is the layer's row-major Out x In weight block, i.e. a column-major In x Out matrix.
// The products are cuBLASLt's (cuda/blas.hpp), each followed by one elementwise kernel
// for the bias, the activation or the slope (cuda/delta_kernels.hpp: the input delta and
// the bias gradient); products of at most 4 terms are that kernel alone
// (thin_product_terms). (cuBLASLt's epilogues know GELU and ReLU only; tapeless's own
// tiled GEMM with all of it fused into its epilogues measured 1.5-1.8x slower in fp32
// and 2-8x in TF32, docs/performance.md, and was removed.)
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <type_traits>

#include "tapeless/cuda/blas.hpp"
#include "tapeless/cuda/delta_kernels.hpp"
#include "tapeless/cuda/launch_size.hpp"
#include "tapeless/cuda/layered_plan.hpp"

namespace tl::detail::gpu {

// What the forward kernels write for unit i from its pre-activation z: the activation,
// its derivative (`slope`, null in apply) and, for bf16 products, a bfloat16 copy of the
// activation in `low` (the next product's operand; null otherwise).
template <class Activation, class T>
__device__ inline void write_activation(const Activation& activation, T z, std::size_t i, T* out, T* slope,
                                        __nv_bfloat16* low) {
  T d;
  const T a = activation.value_and_derivative(z, d);
  out[i] = a;
  if (slope) slope[i] = d;
  if (low) low[i] = __float2bfloat16(float(a));
}
// After a forward product: the bias and the activation. Width is the layer's outputs, a
// constant, so a sample's unit is a cheap remainder.
template <class Activation, std::size_t Width, class T>
__global__ void bias_activation_kernel(Activation activation, const T* bias, T* out, T* slope, std::size_t count,
                                       __nv_bfloat16* low) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x)
    write_activation(activation, out[i] + bias[i % Width], i, out, slope, low);
}
template <class T>
__global__ void to_bfloat16_kernel(const T* values, std::size_t count, __nv_bfloat16* low) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x)
    low[i] = __float2bfloat16(float(values[i]));
}
// cuBLASLt's sums have no epilogue of ours to check them: the gradient's non-finite
// flag is set here, once a step, for reduce_update_kernel.
template <class T>
__global__ void flag_non_finite_kernel(const T* values, std::size_t count, T* flag) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x)
    if (!isfinite(values[i])) *flag = T(1);
}
template <class T>
void to_bfloat16(const T* values, std::size_t count, __nv_bfloat16* low, cudaStream_t stream) {
  to_bfloat16_kernel<<<grid_stride_blocks(count), 256, 0, stream>>>(values, count, low);
  TL_CUDA_CHECK_LAUNCH("to_bfloat16_kernel");
}
// Forward of a layer with at most thin_product_terms inputs: z = W x + b, act, slope.
template <class Activation, std::size_t In, std::size_t Out, class T>
__global__ void thin_forward_kernel(Activation activation, const T* w, const T* bias, const T* in, T* out, T* slope,
                                    std::size_t count, __nv_bfloat16* low) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t s = i / Out, o = i % Out;
    T z = bias[o];
#pragma unroll
    for (std::size_t k = 0; k < In; ++k) z += w[o * In + k] * in[s * In + k];
    write_activation(activation, z, i, out, slope, low);
  }
}
// A first layer of at most thin_product_terms inputs gets its gradient from its inputs
// and the second layer's deltas alone (fuses_first_layer): per sample, each unit's
// pre-activation z0 = W0 x + b0 is recomputed (In0 multiply-adds: cheaper than
// writing and reading back the slopes), then delta0 = act'(z0) * (W1^T delta1) (Out1
// terms, a thin second layer) or act'(z0) * sums (the input-delta GEMM's products, or
// a skip's open stage's delta plus its identity path's, `identity`; Out1 = 0), and
// dW0 += delta0 x^T, db0 += delta0; with a thin second layer also its
// weight gradient dW1 += delta1 act(z0)^T, in place of a GEMM that reads the first
// layer's outputs. Each thread is one unit o of the first layer (threadIdx.x) and
// every `blockDim.y`-th sample of its block's slice (blockIdx.y), its sums in
// registers; the block adds its rows of threads in shared memory, in a fixed order, and
// writes the slice's partial row in the gradient's order (first_layer_partial_width);
// slice_sums_kernel adds the slices.
template <class Activation, std::size_t In0, std::size_t Out0, std::size_t Out1, class T>
__global__ void __launch_bounds__(first_layer_block_threads)
    first_layer_gradient_kernel(Activation activation, const T* w0, const T* b0, const T* x, const T* w1,
                                const T* delta1, const T* sums, const T* identity, std::size_t rows, T* partials) {
  constexpr unsigned columns = first_layer_block_columns(Out0), block_rows = first_layer_block_threads / columns;
  constexpr std::size_t width = In0 + 1 + Out1;  // dW0[o][k], db0[o], dW1[j][o]
  const std::size_t o = blockIdx.x * std::size_t(columns) + threadIdx.x;
  const auto [first, last] = block_slice(rows);
  T acc[width] = {};
  if (o < Out0) {
    T v[In0], w[Out1 > 0 ? Out1 : 1];  // this unit's row of W0, its column of W1 (row-major Out1 x Out0)
#pragma unroll
    for (std::size_t k = 0; k < In0; ++k) v[k] = w0[o * In0 + k];
    const T bias = b0[o];
    if constexpr (Out1 > 0) {
#pragma unroll
      for (std::size_t j = 0; j < Out1; ++j) w[j] = w1[j * Out0 + o];
    }
    for (std::size_t s = first + threadIdx.y; s < last; s += block_rows) {
      T z = bias;
#pragma unroll
      for (std::size_t k = 0; k < In0; ++k) z += v[k] * x[s * In0 + k];
      T slope;
      const T a = activation.value_and_derivative(z, slope);
      T sum;
      if constexpr (Out1 > 0) {
        sum = T(0);
#pragma unroll
        for (std::size_t j = 0; j < Out1; ++j) {
          const T d1 = delta1[s * Out1 + j];
          sum += w[j] * d1;
          acc[In0 + 1 + j] += d1 * a;
        }
      } else {
        sum = sums[s * Out0 + o];
        if (identity) sum += identity[s * Out0 + o];
      }
      const T d = slope * sum;
#pragma unroll
      for (std::size_t k = 0; k < In0; ++k) acc[k] += d * x[s * In0 + k];
      acc[In0] += d;
    }
  }
  __shared__ T block_sums[block_rows][width][columns];
#pragma unroll
  for (std::size_t k = 0; k < width; ++k) block_sums[threadIdx.y][k][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || o >= Out0) return;
#pragma unroll
  for (std::size_t k = 0; k < width; ++k) {
    T total = T(0);
#pragma unroll
    for (unsigned r = 0; r < block_rows; ++r) total += block_sums[r][k][threadIdx.x];
    acc[k] = total;
  }
  T* row = partials + blockIdx.y * (Out0 * width);
#pragma unroll
  for (std::size_t k = 0; k < In0; ++k) row[o * In0 + k] = acc[k];
  row[Out0 * In0 + o] = acc[In0];
  if constexpr (Out1 > 0) {
#pragma unroll
    for (std::size_t j = 0; j < Out1; ++j) row[Out0 * (In0 + 1) + j * Out0 + o] = acc[In0 + 1 + j];
  }
}

// bf16 products read bfloat16 copies of their operands; fp32 and tf32 the values.
template <matmul_precision Precision, class T>
inline constexpr bool bfloat16_operands = Precision == matmul_precision::bf16 && std::is_same_v<T, float>;

// The layer's weight block must be row-major Out x In with its bias after it, as the
// products read it (nn/dense.hpp's layout).
template <class Layer>
inline constexpr bool blas_layout = Layer::weight_index(0, 0) == Layer::weight_offset &&
                                    (Layer::outputs == 1 || Layer::weight_index(1, 0) - Layer::weight_offset == Layer::inputs) &&
                                    (Layer::inputs == 1 || Layer::weight_index(0, 1) - Layer::weight_offset == 1) &&
                                    Layer::bias_index(0) == Layer::bias_offset &&
                                    (Layer::outputs == 1 || Layer::bias_index(1) == Layer::bias_offset + 1);

// Layer L forward for `rows` samples: outputs to `out`, activation derivatives to
// `slope` (none: apply, or a first layer whose backward recomputes them); `training`:
// the bfloat16 copies of the outputs for bf16 products too.
template <matmul_precision Precision, std::size_t L, class Model, class T>
void forward_layer(const Model& model, const T* params, const T* in, std::size_t rows, T* out, T* slope,
                   bool training, layered_workspace<Model, T>& ws, cudaStream_t stream) {
  using layer = typename Model::template layer_type<L>;
  static_assert(blas_layout<layer>, "the layered path reads a dense layer's weights as a row-major Out x In block");
  constexpr std::size_t In = layer::inputs, Out = layer::outputs;
  const T* w = params + Model::template parameter_offset<L> + layer::weight_offset;
  const auto activation = model.template sublayer<L>().activation;
  __nv_bfloat16* low = nullptr;
  if constexpr (bfloat16_operands<Precision, T>)
    if (training) low = ws.template low_outputs<L>();  // the next layer's operand
  if constexpr (In <= thin_product_terms) {
    thin_forward_kernel<decltype(activation), In, Out><<<grid_stride_blocks(rows * Out), 256, 0, stream>>>(
        activation, w, w + layer::bias_offset, in, out, slope, rows * Out, low);
    TL_CUDA_CHECK_LAUNCH("thin_forward_kernel (layered forward)");
    return;
  }
  const blas_shape shape{true, false, Out, rows, In, In, In, Out};
  if constexpr (bfloat16_operands<Precision, T>) {
    ws.blas.multiply(shape, ws.low_params() + (w - params), ws.template low_layer_input<L>(), out, T(0), Precision,
                     stream);
  } else {
    ws.blas.multiply(shape, w, in, out, T(0), Precision, stream);
  }
  bias_activation_kernel<decltype(activation), Out><<<grid_stride_blocks(rows * Out), 256, 0, stream>>>(
      activation, w + layer::bias_offset, out, slope, rows * Out, low);
  TL_CUDA_CHECK_LAUNCH("bias_activation_kernel (layered forward)");
}

// A fused first layer's gradient (and the second layer's weights' when
// fuses_second_layer_weights: from w1 and delta1) as partial rows, one a slice of
// samples, which add_slice_sums adds; `sums`: d loss / d the first layer's outputs
// otherwise, plus `identity` when given (the second stage is a skip's open stage).
template <class Model, class T>
void first_layer_gradient(const Model& model, const T* params, const T* x, const T* w1, const T* delta1,
                          const T* sums, const T* identity, std::size_t rows, layered_workspace<Model, T>& ws,
                          cudaStream_t stream) {
  using first = typename Model::template layer_type<0>;
  static_assert(first_layer_gradient_contiguous<Model>,
                "the fused first layer's partial rows are laid out as nn/dense.hpp lays out the gradient");
  constexpr std::size_t In0 = first::inputs, Out0 = first::outputs, Out1 = first_layer_fused_outputs<Model>;
  T* partials = ws.slice_partials.data() + first_layer_partial_offset<Model>;
  const T* params0 = params + Model::template parameter_offset<0>;
  const dim3 grid(unsigned(first_layer_column_blocks(Out0)), unsigned(first_layer_slices<Model>(rows)));
  const dim3 block(first_layer_block_columns(Out0), first_layer_block_threads / first_layer_block_columns(Out0));
  const auto activation0 = model.template sublayer<0>().activation;
  first_layer_gradient_kernel<decltype(activation0), In0, Out0, Out1><<<grid, block, 0, stream>>>(
      activation0, params0 + first::weight_offset, params0 + first::bias_offset, x, w1, delta1, sums, identity, rows,
      partials);
  TL_CUDA_CHECK_LAUNCH("first_layer_gradient_kernel (layered backward)");
}

// Layer L backward for `rows` samples from its deltas: its gradient into the step's
// `gradient` row (`accumulate`d over chunks), and the deltas of layer L - 1 in place of
// that layer's slopes `previous_slope`; for L = 1 after a thin first layer
// (fuses_first_layer), the first layer's gradient instead, from `x` (and, when this
// layer is thin too, this layer's weight gradient with it). The weight gradient's
// product (and the last layer's bias product) go to `side`, with cuBLASLt's second
// workspace: a stream forked from `stream` once the deltas are ready, which nothing on
// `stream` waits for until the chunk's backward ends, or `stream` itself
// (cuda/layered.hpp, side_stream_rows).
template <matmul_precision Precision, std::size_t L, class Model, class T>
void backward_layer(const Model& model, const T* params, const T* x, const T* in, const T* delta, T* previous_slope,
                    std::size_t rows, T* gradient, bool accumulate, layered_workspace<Model, T>& ws,
                    cudaStream_t stream, cudaStream_t side) {
  constexpr int side_lane = 1;
  using layer = typename Model::template layer_type<L>;
  constexpr std::size_t In = layer::inputs, Out = layer::outputs;
  const T* w = params + Model::template parameter_offset<L> + layer::weight_offset;
  T* grad = gradient + Model::template parameter_offset<L>;
  const T beta = accumulate ? T(1) : T(0);
  const T* ones = ws.ones.data();
  const blas_shape weights{false, true, In, Out, rows, In, Out, In}, deltas{false, false, In, rows, Out, In, Out, In};
  T* sums = ws.products.data();
  constexpr bool thin_delta = Out <= thin_product_terms;  // the input delta in input_delta_kernel alone
  constexpr bool fused_first = L == 1 && fuses_first_layer<Model>;
  constexpr bool fused_weights = L == 1 && fuses_second_layer_weights<Model>;  // in the first layer's kernel
  // A stage below that is no dense layer (cuda/layered_stages.hpp) takes the product
  // W^T delta itself as its deltas: no slopes, no bias.
  constexpr bool dense_below = [] {
    if constexpr (L > 0) return dense_at<Model, L - 1>();
    else return true;
  }();
  __nv_bfloat16* low = nullptr;
  if constexpr (bfloat16_operands<Precision, T>) {
    const __nv_bfloat16* low_delta = ws.template low_deltas<L>();
    if constexpr (!fused_weights)
      ws.blas.multiply(weights, ws.template low_layer_input<L>(), low_delta, grad + layer::weight_offset, beta,
                       Precision, side, side_lane);
    if constexpr (L > 0) {
      if constexpr (!thin_delta)
        ws.blas.multiply(deltas, ws.low_params() + (w - params), low_delta, sums, T(0), Precision, stream);
      if constexpr (!fused_first) low = ws.template low_deltas<L - 1>();
    }
  } else {
    if constexpr (!fused_weights)
      ws.blas.multiply(weights, in, delta, grad + layer::weight_offset, beta, Precision, side, side_lane);
    if constexpr (L > 0 && !thin_delta)
      ws.blas.multiply(deltas, w, delta, dense_below ? sums : previous_slope, T(0), Precision, stream);
  }
  // The last layer's bias gradient (deltas times ones) in fp32 at any precision: a sum,
  // not a product. Every other layer's comes from the kernel that writes its deltas.
  if constexpr (L + 1 == Model::depth)
    ws.blas.multiply(blas_shape{false, false, Out, 1, rows, Out, rows, Out}, delta, ones, grad + layer::bias_offset,
                     beta, matmul_precision::fp32, side, side_lane);
  if constexpr (fused_first) {
    first_layer_gradient(model, params, x, w, delta, static_cast<const T*>(sums), static_cast<const T*>(nullptr), rows,
                         ws, stream);
  } else if constexpr (L > 0 && !dense_below) {
    if constexpr (thin_delta) {
      input_delta_kernel<In, Out, no_slopes><<<dim3(unsigned(delta_column_blocks(In)), unsigned(delta_slices(rows, In))),
                                               dim3(delta_block_columns, delta_block_rows), 0, stream>>>(
          w, delta, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr), static_cast<const T*>(nullptr),
          previous_slope, rows,
          static_cast<__nv_bfloat16*>(nullptr), static_cast<T*>(nullptr));
      TL_CUDA_CHECK_LAUNCH("input_delta_kernel (layered backward, to a stage)");
    }
  } else if constexpr (L > 0) {
    // The deltas of layer L - 1 and its bias gradient's partial sums.
    T* partials = ws.slice_partials.data() + bias_partial_offset<Model, L - 1>;
    const dim3 grid(unsigned(delta_column_blocks(In)), unsigned(bias_slices<Model, L - 1>(rows)));
    const dim3 block(delta_block_columns, delta_block_rows);
    using below = decltype(Model::template layer_type<L - 1>::activation);
    input_delta_kernel<In, thin_delta ? Out : 0, std::conditional_t<slopes_from_outputs<Model, L - 1>, below, void>>
        <<<grid, block, 0, stream>>>(w, delta, static_cast<const T*>(sums), static_cast<const T*>(nullptr), in,
                                     previous_slope, rows, low, partials);
    TL_CUDA_CHECK_LAUNCH("input_delta_kernel (layered backward)");
  }
}

}  // namespace tl::detail::gpu
