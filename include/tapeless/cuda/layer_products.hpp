// One dense layer's products on the layer-at-a-time path, in column-major BLAS terms
// with a chunk's samples as columns (a layer's rows in the workspace are its samples):
//   forward       Z (Out x rows) = W^T X, then A = act(Z + b), slope = act'(Z + b)
//   weight grad   dW (In x Out) += X delta^T,  db (Out) += delta ones
//   input delta   delta_prev (In x rows) = (W delta) * slope_prev
// W is the layer's row-major Out x In weight block, i.e. a column-major In x Out matrix.
// The products are cuBLASLt's (cuda/blas.hpp), each followed by one elementwise kernel
// for the bias, the activation or the slope; products of at most 4 terms are that
// elementwise kernel alone (thin_product_terms). (cuBLASLt's epilogues know GELU and ReLU
// only; tapeless's own tiled GEMM with all of it fused into its epilogues measured
// 1.5-1.8x slower in fp32 and 2-8x in TF32, docs/performance.md, and was removed.)
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <type_traits>

#include "tapeless/cuda/blas.hpp"
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
// What the input-delta kernels write for unit i of the layer before from its sum over
// the next layer's deltas: delta = slope * sum, in place of the slope, and its bfloat16
// copy for bf16 products.
template <class T>
__device__ inline void write_delta(T sum, std::size_t i, T* slope, __nv_bfloat16* low) {
  const T delta = slope[i] * sum;
  slope[i] = delta;
  if (low) low[i] = __float2bfloat16(float(delta));
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
// After an input-delta product: its sums times the slopes.
template <class T>
__global__ void scale_by_kernel(T* slope, const T* sums, std::size_t count, __nv_bfloat16* low) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x)
    write_delta(sums[i], i, slope, low);
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
inline unsigned elementwise_blocks(std::size_t count) {
  return unsigned(std::min<std::size_t>((count + 255) / 256, 8192));
}
template <class T>
void to_bfloat16(const T* values, std::size_t count, __nv_bfloat16* low, cudaStream_t stream) {
  to_bfloat16_kernel<<<elementwise_blocks(count), 256, 0, stream>>>(values, count, low);
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
// Input delta through a layer with at most thin_product_terms outputs, scaled by the
// previous layer's slopes in place: delta_prev = (W^T delta) * slope_prev.
template <std::size_t In, std::size_t Out, class T>
__global__ void thin_input_delta_kernel(const T* w, const T* delta, T* previous_slope, std::size_t count,
                                        __nv_bfloat16* low) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t s = i / In, k = i % In;
    T sum = T(0);
#pragma unroll
    for (std::size_t o = 0; o < Out; ++o) sum += w[o * In + k] * delta[s * Out + o];
    write_delta(sum, i, previous_slope, low);
  }
}

// A first layer of at most thin_product_terms inputs gets its gradient straight from
// the deltas it would be given, which are never written: per sample, delta0 = slope0 *
// (W1^T delta1) (Out1 terms, a thin second layer) or slope0 * sums (the input-delta
// GEMM's products, Out1 = 0), then dW0 += delta0 x^T, db0 += delta0. Each thread is one
// unit o of the first layer over one slice of samples (blockIdx.y), its In0 + 1 sums
// in registers, written to that slice's partial row; first_layer_sums_kernel adds the
// slices in a fixed order. One read of the slopes instead of a write and three reads
// of the deltas (the GEMM's weight gradient, the bias gradient).
template <std::size_t In0, std::size_t Out0, std::size_t Out1, class T>
__global__ void first_layer_gradient_kernel(const T* x, const T* slope0, const T* w1, const T* delta1, const T* sums,
                                            std::size_t rows, T* partials) {
  const std::size_t o = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (o >= Out0) return;
  const std::size_t per = (rows + gridDim.y - 1) / gridDim.y, first = blockIdx.y * per,
                    last = first + per < rows ? first + per : rows;
  T w[Out1 > 0 ? Out1 : 1];  // this unit's column of W1 (row-major Out1 x Out0)
  if constexpr (Out1 > 0) {
#pragma unroll
    for (std::size_t j = 0; j < Out1; ++j) w[j] = w1[j * Out0 + o];
  }
  T acc[In0 + 1] = {};
  for (std::size_t s = first; s < last; ++s) {
    T sum;
    if constexpr (Out1 > 0) {
      sum = T(0);
#pragma unroll
      for (std::size_t j = 0; j < Out1; ++j) sum += w[j] * delta1[s * Out1 + j];
    } else {
      sum = sums[s * Out0 + o];
    }
    const T d = slope0[s * Out0 + o] * sum;
#pragma unroll
    for (std::size_t k = 0; k < In0; ++k) acc[k] += d * x[s * In0 + k];
    acc[In0] += d;
  }
  T* out = partials + (blockIdx.y * Out0 + o) * (In0 + 1);
#pragma unroll
  for (std::size_t k = 0; k <= In0; ++k) out[k] = acc[k];
}
template <std::size_t In0, std::size_t Out0, class T>
__global__ void first_layer_sums_kernel(const T* partials, unsigned slices, T* weight_grad, T* bias_grad,
                                        bool accumulate) {
  constexpr std::size_t row = Out0 * (In0 + 1);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < row;
       i += std::size_t(gridDim.x) * blockDim.x) {
    T sum = T(0);
    for (unsigned b = 0; b < slices; ++b) sum += partials[b * row + i];
    const std::size_t o = i / (In0 + 1), k = i % (In0 + 1);
    T& g = k < In0 ? weight_grad[o * In0 + k] : bias_grad[o];
    g = accumulate ? g + sum : sum;
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
// `slope` (none: apply).
template <matmul_precision Precision, std::size_t L, class Model, class T>
void forward_layer(const Model& model, const T* params, const T* in, std::size_t rows, T* out, T* slope,
                   layered_workspace<Model, T>& ws, cudaStream_t stream) {
  using layer = typename Model::template layer_type<L>;
  static_assert(blas_layout<layer>, "the layered path reads a dense layer's weights as a row-major Out x In block");
  constexpr std::size_t In = layer::inputs, Out = layer::outputs;
  const T* w = params + Model::template parameter_offset<L> + layer::weight_offset;
  const auto activation = model.template sublayer<L>().activation;
  __nv_bfloat16* low = nullptr;
  if constexpr (bfloat16_operands<Precision, T>)
    if (slope) low = ws.template low_outputs<L>();  // training: the next layer's operand
  if constexpr (In <= thin_product_terms) {
    thin_forward_kernel<decltype(activation), In, Out><<<elementwise_blocks(rows * Out), 256, 0, stream>>>(
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
  bias_activation_kernel<decltype(activation), Out><<<elementwise_blocks(rows * Out), 256, 0, stream>>>(
      activation, w + layer::bias_offset, out, slope, rows * Out, low);
  TL_CUDA_CHECK_LAUNCH("bias_activation_kernel (layered forward)");
}

// Layer L backward for `rows` samples from its deltas: its gradient into the step's
// `gradient` row (`accumulate`d over chunks), and the deltas of layer L - 1 in place of
// that layer's slopes `previous_slope`; for L = 1 before a thin first layer
// (fuses_first_layer), the first layer's gradient instead, from `x`.
template <matmul_precision Precision, std::size_t L, class Model, class T>
void backward_layer(const T* params, const T* x, const T* in, const T* delta, T* previous_slope, std::size_t rows,
                    T* gradient, bool accumulate, layered_workspace<Model, T>& ws, cudaStream_t stream) {
  using layer = typename Model::template layer_type<L>;
  constexpr std::size_t In = layer::inputs, Out = layer::outputs;
  const T* w = params + Model::template parameter_offset<L> + layer::weight_offset;
  T* grad = gradient + Model::template parameter_offset<L>;
  const T beta = accumulate ? T(1) : T(0);
  const T* ones = thrust::raw_pointer_cast(ws.ones.data());
  const blas_shape weights{false, true, In, Out, rows, In, Out, In}, deltas{false, false, In, rows, Out, In, Out, In};
  T* sums = thrust::raw_pointer_cast(ws.products.data());
  constexpr bool thin_delta = Out <= thin_product_terms;  // the input delta in one elementwise kernel
  constexpr bool fused_first = L == 1 && fuses_first_layer<Model>;
  __nv_bfloat16* low = nullptr;
  if constexpr (bfloat16_operands<Precision, T>) {
    const __nv_bfloat16* low_delta = ws.template low_deltas<L>();
    ws.blas.multiply(weights, ws.template low_layer_input<L>(), low_delta, grad + layer::weight_offset, beta,
                     Precision, stream);
    if constexpr (L > 0) {
      if constexpr (!thin_delta)
        ws.blas.multiply(deltas, ws.low_params() + (w - params), low_delta, sums, T(0), Precision, stream);
      if constexpr (!fused_first) low = ws.template low_deltas<L - 1>();
    }
  } else {
    ws.blas.multiply(weights, in, delta, grad + layer::weight_offset, beta, Precision, stream);
    if constexpr (L > 0 && !thin_delta) ws.blas.multiply(deltas, w, delta, sums, T(0), Precision, stream);
  }
  // The bias gradient (deltas times ones) in fp32 at any precision: a sum, not a product.
  ws.blas.multiply(blas_shape{false, false, Out, 1, rows, Out, rows, Out}, delta, ones, grad + layer::bias_offset,
                   beta, matmul_precision::fp32, stream);
  if constexpr (fused_first) {
    using first = typename Model::template layer_type<0>;
    constexpr std::size_t In0 = first::inputs, Out0 = first::outputs;
    T* partials = thrust::raw_pointer_cast(ws.first_layer_partials.data());
    const dim3 grid(unsigned((Out0 + 127) / 128), first_layer_slices);
    first_layer_gradient_kernel<In0, Out0, thin_delta ? Out : 0><<<grid, 128, 0, stream>>>(
        x, previous_slope, w, delta, static_cast<const T*>(sums), rows, partials);
    TL_CUDA_CHECK_LAUNCH("first_layer_gradient_kernel (layered backward)");
    first_layer_sums_kernel<In0, Out0><<<elementwise_blocks(Out0 * (In0 + 1)), 256, 0, stream>>>(
        partials, first_layer_slices, gradient + Model::template parameter_offset<0> + first::weight_offset,
        gradient + Model::template parameter_offset<0> + first::bias_offset, accumulate);
    TL_CUDA_CHECK_LAUNCH("first_layer_sums_kernel (layered backward)");
  } else if constexpr (L > 0 && thin_delta) {
    thin_input_delta_kernel<In, Out><<<elementwise_blocks(rows * In), 256, 0, stream>>>(w, delta, previous_slope,
                                                                                         rows * In, low);
    TL_CUDA_CHECK_LAUNCH("thin_input_delta_kernel (layered input delta)");
  } else if constexpr (L > 0) {
    scale_by_kernel<<<elementwise_blocks(rows * In), 256, 0, stream>>>(previous_slope, static_cast<const T*>(sums),
                                                                        rows * In, low);
    TL_CUDA_CHECK_LAUNCH("scale_by_kernel (layered input delta)");
  }
}

}  // namespace tl::detail::gpu
