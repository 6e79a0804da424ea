// The layer-at-a-time path's plan and device memory (cuda/layered.hpp runs it): how a
// step's batch is cut into chunks, and where each layer's activations lie in a chunk's
// workspace.
#pragma once

#include <cub/device/device_reduce.cuh>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "tapeless/cuda/blas.hpp"
#include "tapeless/cuda/device_buffer.hpp"
#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/graph_cache.hpp"
#include "tapeless/cuda/kernels.hpp"
#include "tapeless/cuda/layered_model.hpp"
#include "tapeless/cuda/side_stream.hpp"
#include "tapeless/cuda/tile_layout.hpp"
#include "tapeless/nn/dense_chain.hpp"

namespace tl {
// Which GPU kernels train a model (docs/design.md, "GPU paths"). automatic: the fused
// per-sample kernels (per-thread, one-block, tiled, general) when the model fits them,
// else layer-at-a-time; fused and layered force one (layered: chains of dense layers).
enum class gpu_regime { automatic, fused, layered };
}  // namespace tl

namespace tl::detail::gpu {

// The models the layered path can compute (cuda/step.hpp decides which of them compile
// it in): chains of dense layers, and any model with a dense layer whose other layers
// (layer_norm, skip, a user's) have at most layered_sample_parameter_limit parameters
// each: a sample stage's gradient is summed from one row a sample (cuda/layered_stages.hpp).
inline constexpr std::size_t layered_sample_parameter_limit = 65536;
template <class Model>
inline constexpr bool layered_supports = [] {
  if constexpr (is_dense_chain<Model>::value) return true;
  else return dense_stage_count<stages_of<Model>>() >= 1 &&
              sample_gradient_width<layered_model<Model>> <= layered_sample_parameter_limit;
}();

inline constexpr std::size_t default_chunk_bytes = std::size_t(512) << 20;

// A chunk's workspace (`units`): every stage's outputs for `stride` samples, then every
// stage's slopes (a dense layer's activation derivatives, turned into deltas by the
// backward pass) or deltas (any other stage's d loss / d output), then the sample
// stages' saved values and their per-sample gradient rows (cuda/layered_model.hpp).
// The stride is the chunk's samples rounded up to 64, so every layer's rows start
// 256-byte aligned, as vectorized product kernels want.
template <class Model>
inline constexpr std::size_t unit_count = Model::template output_offset<Model::depth>;
// A skip's open stage after the first stage passes its input on unchanged: its outputs
// are the stage below's rows themselves, not a copy (a chunk's pass over them less, and
// one more write and read; its own rows stay in the layout, unused).
template <class Model, std::size_t L, class T>
T* layer_outputs(T* units, std::size_t stride) {
  if constexpr (L > 0 && kind_at<Model, L>() == stage_kind::skip_open) return layer_outputs<Model, L - 1>(units, stride);
  else return units + Model::template output_offset<L> * stride;
}
template <class Model, std::size_t L, class T>
T* layer_slopes(T* units, std::size_t stride) {
  return units + (unit_count<Model> + Model::template output_offset<L>) * stride;
}
template <class Model, std::size_t L, class T>
T* stage_saved(T* units, std::size_t stride) {
  return units + (2 * unit_count<Model> + saved_offset<Model, L>) * stride;
}
template <class Model, class T>
T* sample_gradient_rows(T* units, std::size_t stride) {
  return units + (2 * unit_count<Model> + saved_total<Model>) * stride;
}
// Layer L's input: the chunk's data for the first layer, else the layer before's outputs.
template <class Model, std::size_t L, class T>
const T* layer_input(const T* x, T* units, std::size_t stride) {
  if constexpr (L == 0) return x;
  else return layer_outputs<Model, L - 1>(units, stride);
}
// The widest input of a layer after the first: cuBLASLt's input-delta products go
// through a buffer of that many values a sample before they are scaled by the slopes.
template <class Model>
inline constexpr std::size_t widest_hidden_input = []<std::size_t... L>(std::index_sequence<L...>) {
  return std::max({std::size_t(0), Model::template layer_type<L + 1>::inputs...});
}(std::make_index_sequence<Model::depth - 1>{});

// Products whose inner dimension is at most this many terms are not worth a GEMM: a
// neural field's first layer (2 or 3 inputs) and the input delta of its last (1 to 3
// outputs) run as one elementwise kernel with the work that follows them, in fp32 at
// every precision (they are memory-bound: the GEMM's output pass is what this saves).
inline constexpr std::size_t thin_product_terms = 4;
// Whether the backward pass computes such a first layer's gradient in one kernel
// (cuda/layer_products.hpp), when a dense layer or a skip follows it: it recomputes
// the first layer's activations and slopes from the chunk's inputs (at most 4
// multiply-adds a unit), so the forward pass writes no slopes for it, and the deltas
// it would be given are never written. When the second layer is thin too (at most 4 outputs, a neural
// field's 2-W-1), that kernel also takes the second layer's weight gradient from the
// recomputed activations. Its partial sums: one row of first_layer_partial_width values
// per slice of a chunk's samples.
template <class Model>
inline constexpr bool fuses_first_layer = [] {
  if constexpr (Model::depth >= 2) {
    if constexpr (dense_at<Model, 0>() && (dense_at<Model, 1>() || kind_at<Model, 1>() == stage_kind::skip_open))
      return Model::template layer_type<0>::inputs <= thin_product_terms;
    else return false;
  } else {
    return false;
  }
}();
// Whether layer L's forward writes its slopes for the backward. A fused first layer's
// kernel recomputes them from the inputs; a hidden layer whose activation's derivative
// is a function of its value (tanh, sigmoid, relu, identity) has them recomputed from
// its outputs by the input-delta kernel that turns them into deltas (which then writes
// the slope rows it never read): a pass over a chunk's rows x Out values less a layer.
// The last layer keeps them for the loss kernels.
template <class Model, std::size_t L>
inline constexpr bool slopes_from_outputs = [] {
  if constexpr (L + 1 < Model::depth && dense_at<Model, L>())
    return value_derivable_activation<decltype(Model::template layer_type<L>::activation)>;
  else return false;
}();
template <class Model, std::size_t L>
inline constexpr bool forward_writes_slopes =
    dense_at<Model, L>() && !(L == 0 && fuses_first_layer<Model>) && !slopes_from_outputs<Model, L>;
template <class Model>
inline constexpr bool fuses_second_layer_weights = [] {
  if constexpr (fuses_first_layer<Model> && dense_at<Model, 1>())
    return Model::template layer_type<1>::outputs <= thin_product_terms;
  else return false;
}();
// The slicing kernels (the fused first layer's, the input deltas') cut a chunk of
// `rows` samples into 1 to `limit` slices of about `rows_per_slice`, one a blockIdx.y,
// each block writing one partial row.
inline std::size_t slice_count(std::size_t rows, std::size_t rows_per_slice, std::size_t limit) {
  return std::clamp<std::size_t>(ceil_div(rows, rows_per_slice), 1, limit);
}
// This block's samples [first, last) of its slice; the last slices may be empty.
struct sample_range {
  std::size_t first, last;
};
__device__ inline sample_range block_slice(std::size_t rows) {
  const std::size_t per = ceil_div(rows, gridDim.y), first = blockIdx.y * per;
  return {first < rows ? first : rows, first + per < rows ? first + per : rows};
}
// That kernel runs blocks of up to 256 threads: up to 128 units of the first layer
// (first_layer_block_columns, a warp's worth at least) by 256 / that many rows of
// samples, over one slice of about first_layer_slice_rows samples; enough slices for up
// to first_layer_threads threads (about what the H200's 132 SMs keep resident). It was
// a fixed 256 slices of one row of threads: a 64-unit first layer ran 16k threads, half
// of them idle, and took 100 us at 10^5 samples.
inline constexpr std::size_t first_layer_slice_rows = 64, first_layer_threads = std::size_t(1) << 18;
inline constexpr unsigned first_layer_block_threads = 256;
constexpr unsigned first_layer_block_columns(std::size_t units) {
  return unsigned(std::min<std::size_t>(128, ceil_div(units, warp_size) * warp_size));
}
constexpr std::size_t first_layer_column_blocks(std::size_t units) {
  return ceil_div(units, first_layer_block_columns(units));
}
constexpr std::size_t first_layer_slice_limit(std::size_t units) {
  return std::max<std::size_t>(1, first_layer_threads / (first_layer_column_blocks(units) * first_layer_block_threads));
}
template <class Model>
std::size_t first_layer_slices(std::size_t rows) {
  return slice_count(rows, first_layer_slice_rows, first_layer_slice_limit(Model::template layer_type<0>::outputs));
}
// The second layer's outputs whose weights that kernel takes (0 when it takes none).
template <class Model>
inline constexpr std::size_t first_layer_fused_outputs = [] {
  if constexpr (fuses_second_layer_weights<Model>) return Model::template layer_type<1>::outputs;
  else return std::size_t(0);
}();
// One slice's partial row, as the kernel writes it: per unit o of the first layer,
// dW0[o][k] (In0 values), db0[o] and dW1[j][o] (Out1 values).
template <class Model>
inline constexpr std::size_t first_layer_partial_width =
    Model::template layer_type<0>::outputs *
    (Model::template layer_type<0>::inputs + 1 + first_layer_fused_outputs<Model>);
// Whether that row is one contiguous run of the gradient (nn/dense.hpp's layout: weights,
// then biases, layer after layer).
template <class Model>
inline constexpr bool first_layer_gradient_contiguous = [] {
  if constexpr (fuses_first_layer<Model>) {
    using first = typename Model::template layer_type<0>;
    constexpr bool first_contiguous = first::bias_offset == first::weight_offset + first::outputs * first::inputs;
    if constexpr (fuses_second_layer_weights<Model>) {
      using second = typename Model::template layer_type<1>;
      return first_contiguous && Model::template parameter_offset<1> + second::weight_offset ==
                                     Model::template parameter_offset<0> + first::bias_offset + first::outputs;
    } else {
      return first_contiguous;
    }
  } else {
    return true;
  }
}();
template <class Model>
inline constexpr std::size_t first_layer_partial_count =
    fuses_first_layer<Model>
        ? first_layer_slice_limit(Model::template layer_type<0>::outputs) * first_layer_partial_width<Model>
        : 0;

// The input-delta kernels (cuda/delta_kernels.hpp) write the deltas of the layer before
// and add up each of their columns on the way: that layer's bias gradient, in place of a
// product with a column of ones that read the deltas again. Blocks of 32 columns x 8
// rows of threads; a chunk is cut into slices of samples (about delta_slice_rows each,
// at most delta_slice_limit of them: about 1024 blocks a layer; a last slice may be
// empty and writes zeros), one partial row per slice, added in a fixed order by
// slice_sums_kernel (cuda/slice_sums.hpp), one warp a gradient entry.
inline constexpr unsigned delta_block_columns = 32, delta_block_rows = 8, delta_slice_rows = 32;
constexpr std::size_t delta_column_blocks(std::size_t width) { return ceil_div(width, delta_block_columns); }
constexpr std::size_t delta_slice_limit(std::size_t width) {
  return std::max<std::size_t>(1, 1024 / delta_column_blocks(width));
}
inline std::size_t delta_slices(std::size_t rows, std::size_t width) {
  return slice_count(rows, delta_slice_rows, delta_slice_limit(width));
}
// The slices of a chunk for layer L's deltas: the input-delta kernel that writes them
// (layer L + 1's backward) and add_slice_sums, which adds them, both ask here.
template <class Model, std::size_t L>
std::size_t bias_slices(std::size_t rows) {
  return delta_slices(rows, Model::template layer_type<L>::outputs);
}
// Which layers get their bias gradient so: every dense layer but the last (its deltas
// come from the loss) and a fused first layer (its own kernel adds it); other stages
// have no bias.
template <class Model, std::size_t L>
inline constexpr bool bias_from_delta_sums =
    dense_at<Model, L>() && L + 1 < Model::depth && !(L == 0 && fuses_first_layer<Model>);
template <class Model, std::size_t L>
inline constexpr std::size_t bias_partial_offset = []<std::size_t... I>(std::index_sequence<I...>) {
  return (std::size_t(0) + ... +
          (bias_from_delta_sums<Model, I>
               ? delta_slice_limit(Model::template layer_type<I>::outputs) * Model::template layer_type<I>::outputs
               : 0));
}(std::make_index_sequence<L>{});
template <class Model>
inline constexpr std::size_t bias_partial_count = bias_partial_offset<Model, Model::depth>;
// Every per-slice partial row of a chunk in one buffer: the bias rows, then the fused
// first layer's.
template <class Model>
inline constexpr std::size_t first_layer_partial_offset = bias_partial_count<Model>;
template <class Model>
inline constexpr std::size_t slice_partial_count = bias_partial_count<Model> + first_layer_partial_count<Model>;

// How one step is cut into chunks of samples.
template <class Model>
struct layered_plan {
  std::size_t batch = 0, chunk = 0, stride = 0, chunk_bytes = 0;
  bool training = false, low_operands = false;  // low_operands: bfloat16 copies kept (bf16)

  bool operator==(const layered_plan&) const = default;

  template <class T>
  static layered_plan make(std::size_t batch, std::size_t chunk_bytes, bool training) {
    layered_plan plan;
    plan.batch = batch;
    plan.chunk_bytes = chunk_bytes;
    plan.training = training;
    // outputs, slopes or deltas, and the sample stages' values
    const std::size_t per_sample = (2 * unit_count<Model> + sample_stage_values<Model>) * sizeof(T);
    plan.chunk = std::min(batch, std::clamp<std::size_t>(chunk_bytes / per_sample, 4096, std::size_t(1) << 21));
    plan.stride = (plan.chunk + 63) / 64 * 64;
    return plan;
  }
};

// reduce_update_kernel's view of the layered path's sums: the gradient is one row of P
// values (every chunk's products add to it), the loss and the non-finite flag single
// values.
template <class T>
struct layered_partials {
  const T* p;
  const T* loss_and_flag;
  __device__ int loss_rows() const { return 1; }
  __device__ T loss(int) const { return loss_and_flag[0]; }
  __device__ T flag(int) const { return loss_and_flag[1]; }
  __device__ partial_column<T> column(std::size_t j) const { return {p + j, 0, 1}; }
};

// The device memory of the layered path, sized for one plan (grown, never shrunk).
template <class Model, class T>
struct layered_workspace {
  layered_plan<Model> plan;
  device_buffer<T> units;          // a chunk's outputs, then its slopes / deltas
  device_buffer<T> gradient;       // the step's sums, every layer's in place
  device_buffer<T> slice_partials;  // per slice of samples: bias rows, the fused first layer's
  device_buffer<T> sample_losses;  // one per sample of the batch
  device_buffer<T> loss_and_flag = device_buffer<T>(2);
  device_buffer<unsigned char> reduce_storage;  // cub::DeviceReduce's
  // cuBLASLt's: its plans, a column of ones (the last layer's bias gradient is its
  // deltas times ones) and the input-delta products before they are scaled by the slopes.
  blas_products blas;
  device_buffer<T> ones, products;
  // The weight gradients' products run on a second stream beside the input deltas'
  // (cuda/layered.hpp): neither reads what the other writes.
  side_stream side;
  // bfloat16 copies of the products' operands, for matmul_precision::bf16: the
  // parameters (made once a step), a chunk's inputs, every layer's outputs, then every
  // layer's deltas, each written beside its fp32 values by the kernel that makes them.
  device_buffer<__nv_bfloat16> low;
  __nv_bfloat16* low_params() { return low.data(); }
  static constexpr std::size_t low_params_size = (Model::parameter_count + 127) / 128 * 128;  // 256-byte aligned
  __nv_bfloat16* low_inputs() { return low_params() + low_params_size; }
  template <std::size_t L>
  __nv_bfloat16* low_outputs() {
    return low_inputs() + Model::inputs * plan.stride + Model::template output_offset<L> * plan.stride;
  }
  template <std::size_t L>
  __nv_bfloat16* low_deltas() {
    return low_inputs() + (Model::inputs + unit_count<Model> + Model::template output_offset<L>) * plan.stride;
  }
  // Layer L's input as bfloat16: the chunk's inputs for the first layer.
  template <std::size_t L>
  __nv_bfloat16* low_layer_input() {
    if constexpr (L == 0) return low_inputs();
    else return low_outputs<L - 1>();
  }

  // Sizes everything for `batch` (outside any graph capture), growing only what is
  // short; a shortfall of device memory is reported before anything is allocated.
  // Without `training`, the forward pass's outputs only (apply); `bf16`: the bfloat16
  // copies too. It runs before every step, so an unchanged plan returns at once (a
  // copied state's plan is equal, but its cuBLASLt handle and side stream start empty).
  void prepare(const char* where, std::size_t batch, std::size_t chunk_bytes, bool training = true, bool bf16 = false) {
    auto next = layered_plan<Model>::template make<T>(batch, chunk_bytes, training);
    next.low_operands = bf16 && training;
    if (plan == next && blas.ready() && side.ready()) return;
    std::size_t storage = 0;
    if (training)  // (the argument types of the call that sums: others would compile CUB's kernels twice)
      TL_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, storage, static_cast<T*>(nullptr), static_cast<T*>(nullptr),
                                           batch));
    // (apply: the outputs alone, but for the sample stages' saved values, which lie after
    // every stage's deltas)
    const std::size_t want_units =
        (training || sample_stage_values<Model> > 0 ? 2 * unit_count<Model> + sample_stage_values<Model> : unit_count<Model>) *
        next.stride;
    const std::size_t want_ones = training ? next.stride : 0;
    const std::size_t want_products = training ? widest_hidden_input<Model> * next.stride : 0;
    const std::size_t want_low =
        next.low_operands ? low_params_size + (Model::inputs + 2 * unit_count<Model>) * next.stride : 0;
    const auto grow = [](std::size_t want, std::size_t have) { return want > have ? want - have : 0; };
    const std::size_t bytes =
        sizeof(T) * (grow(want_units, units.size()) + grow(training ? Model::parameter_count : 0, gradient.size()) +
                     grow(training ? batch : 0, sample_losses.size()) + grow(want_ones, ones.size()) +
                     grow(want_products, products.size()) +
                     grow(training ? slice_partial_count<Model> : 0, slice_partials.size())) +
        sizeof(__nv_bfloat16) * grow(want_low, low.size()) + grow(storage, reduce_storage.size()) +
        (blas.ready() ? 0 : blas_products::total_workspace_bytes);
    require_device_memory(where, bytes, "the layer-at-a-time path's activations for " + std::to_string(next.chunk) +
                                            " samples" + (training ? " and its gradient sums" : ""));
    units.resize(std::max(units.size(), want_units));
    if (training) {
      gradient.resize(Model::parameter_count);
      slice_partials.resize(slice_partial_count<Model>);
      sample_losses.resize(std::max(sample_losses.size(), batch));
      reduce_storage.resize(std::max(reduce_storage.size(), storage));
    }
    if (ones.size() < want_ones) {
      ones.resize(want_ones);
      ones.fill(T(1));
    }
    products.resize(std::max(products.size(), want_products));
    low.resize(std::max(low.size(), want_low));
    blas.prepare();
    side.prepare();
    plan = next;
  }

  // What a captured graph of steps bakes in (cuda/graph_cache.hpp).
  std::string addresses() const {
    return addresses_of(units, gradient, slice_partials, sample_losses, loss_and_flag,
                        reduce_storage, ones, products, low, blas.workspace());
  }

  layered_partials<T> view() const {
    return {gradient.data(), loss_and_flag.data()};
  }
};

}  // namespace tl::detail::gpu
