// The layer-at-a-time path: chains of dense layers too large for a block to keep on
// chip (the tiled kernels' limit is ~200 KB of shared memory a block), in float or
// double. The batch goes through in chunks; for each chunk
//   forward      Z_l = A_{l-1} W_l^T (+ b_l), A_l = act(Z_l), act'(Z_l) kept   one GEMM a layer
//   loss         delta_L = act'(Z_L) * d loss / d A_L, per-sample losses      one kernel
//   backward     dW_l, db_l += delta_l^T [A_{l-1}, 1]   (split over samples)   one GEMM a layer
//                delta_{l-1} = (delta_l W_l) * act'(Z_{l-1})                   one GEMM a layer
// with the bias and activation fused into the forward GEMM's epilogue and the
// activation's derivative into the input delta's (cuda/gemm.hpp). Activations and
// deltas live in global memory, one chunk at a time (`chunk_bytes`: fewer, larger
// chunks measured faster on the H200 than L2-sized ones, whose extra launches cost
// more than the HBM traffic they save; docs/performance.md). A layer's weight gradient is split
// over samples into `slices` rows (enough blocks to fill the device); each chunk adds
// to the same rows, and reduce_update_kernel sums them with the per-sample losses
// (summed by cub::DeviceReduce into one value) and applies the optimizer.
#pragma once

#include <cub/device/device_reduce.cuh>
#include <thrust/device_vector.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/gemm.hpp"
#include "tapeless/cuda/kernels.hpp"
#include "tapeless/cuda/tile_layout.hpp"

namespace tl {
// Which GPU kernels train a model (docs/design.md, "GPU paths"). automatic: the fused
// per-sample kernels (per-thread, one-block, tiled, general) when the model fits them,
// else layer-at-a-time; fused and layered force one (layered: chains of dense layers).
enum class gpu_regime { automatic, fused, layered };
}  // namespace tl

namespace tl::detail::gpu {

// The models the layered path can compute: chains of dense layers (cuda/step.hpp
// decides which of them compile it in).
template <class Model>
inline constexpr bool layered_supports = is_dense_chain<Model>::value;

inline constexpr std::size_t default_chunk_bytes = std::size_t(512) << 20;

// A chunk's workspace (`units`): every layer's outputs for `chunk` samples, then every
// layer's slopes (activation derivatives, turned into deltas by the backward pass).
template <class Model>
inline constexpr std::size_t unit_count = Model::template output_offset<Model::depth>;
template <class Model, std::size_t L, class T>
T* layer_outputs(T* units, std::size_t chunk) {
  return units + Model::template output_offset<L> * chunk;
}
template <class Model, std::size_t L, class T>
T* layer_slopes(T* units, std::size_t chunk) {
  return units + (unit_count<Model> + Model::template output_offset<L>) * chunk;
}
// Layer L's input: the chunk's data for the first layer, else the layer before's outputs.
template <class Model, std::size_t L, class T>
const T* layer_input(const T* x, T* units, std::size_t chunk) {
  if constexpr (L == 0) return x;
  else return layer_outputs<Model, L - 1>(units, chunk);
}

// How one step is cut: samples per chunk, and each layer's weight-gradient rows.
template <class Model>
struct layered_plan {
  static constexpr std::size_t depth = Model::depth;
  std::size_t batch = 0, chunk = 0, chunk_bytes = 0;
  std::array<unsigned, depth> slices{};
  std::array<std::size_t, depth> base{};  // layer l's rows start at base[l] in the partials
  std::size_t partial_floats = 0;

  template <class T>
  static layered_plan make(std::size_t batch, std::size_t chunk_bytes, int multiprocessors) {
    layered_plan plan;
    plan.batch = batch;
    plan.chunk_bytes = chunk_bytes;
    const std::size_t per_sample = 2 * unit_count<Model> * sizeof(T);  // outputs and slopes
    plan.chunk = std::min(batch, std::clamp<std::size_t>(chunk_bytes / per_sample, 4096, std::size_t(1) << 21));
    std::size_t offset = 0;
    [&]<std::size_t... L>(std::index_sequence<L...>) {
      ((plan.slices[L] = slices_for<typename Model::template layer_type<L>>(plan.chunk, multiprocessors),
        plan.base[L] = offset, offset += plan.slices[L] * Model::template layer_type<L>::parameter_count),
       ...);
    }(std::make_index_sequence<depth>{});
    plan.partial_floats = offset;
    return plan;
  }

 private:
  // Enough slices for two waves of blocks over the weight gradient's tiles, and at most
  // ~1024 samples a slice: a slice's slabs are read one after another, so a thin
  // layer's gradient (2 -> 512: 8 tiles) over 10^5 samples in few slices is a long
  // chain of dependent loads. Bounded by 2^25 partial values a layer (the rows are
  // written and read once a step) and by 64 samples a slice.
  template <class Layer>
  static unsigned slices_for(std::size_t chunk, int multiprocessors) {
    const std::size_t tiles = gemm_tiles(Layer::outputs) * gemm_tiles(Layer::inputs + 1);
    const std::size_t waves = (2 * std::size_t(multiprocessors) + tiles - 1) / tiles;
    const std::size_t wanted = std::max(waves, (chunk + 1023) / 1024);
    const std::size_t most = std::min<std::size_t>((chunk + 63) / 64, (std::size_t(1) << 25) / Layer::parameter_count);
    return unsigned(std::clamp<std::size_t>(std::min(wanted, most), 1, 1 << 16));
  }
};

// reduce_update_kernel's view of the layered partials: column j of layer l has
// slices[l] rows, P_l apart; the loss and the non-finite flag are single values.
template <class Model, class T>
struct layered_partials {
  static constexpr std::size_t depth = Model::depth;
  const T* p;
  const T* loss_and_flag;
  unsigned rows[depth];
  std::size_t base[depth], offset[depth + 1];
  __device__ int loss_rows() const { return 1; }
  __device__ T loss(int) const { return loss_and_flag[0]; }
  __device__ T flag(int) const { return loss_and_flag[1]; }
  __device__ partial_column<T> column(std::size_t j) const {
    std::size_t l = 0;
    while (l + 1 < depth && j >= offset[l + 1]) ++l;
    return {p + base[l] + (j - offset[l]), offset[l + 1] - offset[l], int(rows[l])};
  }
};

// The device memory of the layered path, sized for one plan (grown, never shrunk).
template <class Model, class T>
struct layered_workspace {
  layered_plan<Model> plan;
  thrust::device_vector<T> units;          // a chunk's outputs, then its slopes / deltas
  thrust::device_vector<T> partials;       // the weight-gradient rows of every layer
  thrust::device_vector<T> sample_losses;  // one per sample of the batch
  thrust::device_vector<T> loss_and_flag = thrust::device_vector<T>(2);
  thrust::device_vector<unsigned char> reduce_storage;  // cub::DeviceReduce's

  // Sizes everything for `batch` (outside any graph capture); a shortfall of device
  // memory is reported before anything is allocated.
  void prepare(const char* where, std::size_t batch, std::size_t chunk_bytes, int multiprocessors) {
    if (plan.batch == batch && plan.chunk_bytes == chunk_bytes) return;
    const auto next = layered_plan<Model>::template make<T>(batch, chunk_bytes, multiprocessors);
    std::size_t storage = 0;
    TL_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, storage, static_cast<const T*>(nullptr), static_cast<T*>(nullptr),
                                         batch));
    const auto grow = [](std::size_t want, std::size_t have) { return want > have ? want - have : 0; };
    const std::size_t bytes = sizeof(T) * (grow(2 * unit_count<Model> * next.chunk, units.size()) +
                                           grow(next.partial_floats, partials.size()) +
                                           grow(batch, sample_losses.size())) +
                              grow(storage, reduce_storage.size());
    require_device_memory(where, bytes, "the layer-at-a-time path's activations for " + std::to_string(next.chunk) +
                                            " samples and its gradient slices");
    units.resize(std::max(units.size(), 2 * unit_count<Model> * next.chunk));
    partials.resize(std::max(partials.size(), next.partial_floats));
    sample_losses.resize(std::max(sample_losses.size(), batch));
    reduce_storage.resize(std::max(reduce_storage.size(), storage));
    plan = next;
  }

  layered_partials<Model, T> view() const {
    layered_partials<Model, T> v{thrust::raw_pointer_cast(partials.data()),
                                 thrust::raw_pointer_cast(loss_and_flag.data()), {}, {}, {}};
    [&]<std::size_t... L>(std::index_sequence<L...>) {
      ((v.rows[L] = plan.slices[L], v.base[L] = plan.base[L], v.offset[L] = Model::template parameter_offset<L>), ...);
    }(std::make_index_sequence<Model::depth>{});
    v.offset[Model::depth] = Model::parameter_count;
    return v;
  }
};

// Epilogues of the three products (cuda/gemm.hpp calls them per output element).
template <class Activation, class T>
struct forward_epilogue {  // out = act(z + b), slope = act'(z + b)
  Activation activation;
  const T* bias;
  T* out;
  T* slope;  // null: not kept (apply)
  std::size_t width;
  __device__ void operator()(std::size_t m, std::size_t n, T z, unsigned) const {
    T d;
    out[m * width + n] = activation.value_and_derivative(z + bias[n], d);
    if (slope) slope[m * width + n] = d;
  }
};
template <class T>
struct input_delta_epilogue {  // delta_{l-1} = (delta_l W_l) * act'(z_{l-1}), in place of the slope
  T* slope;
  std::size_t width;
  __device__ void operator()(std::size_t m, std::size_t n, T sum, unsigned) const { slope[m * width + n] *= sum; }
};
// Row `slice` of a layer's gradient: dW[o][i], and db[o] at column i = inputs. One
// kernel for every layer (of one T and precision), so the place of (o, i) is data: the
// strides of the layer's own weight_index / bias_index (nn/dense.hpp).
template <class T>
struct weight_gradient_epilogue {
  T* rows;
  T* flag;
  bool accumulate;  // later chunks add to the first one's sums
  std::size_t inputs, parameter_count, weight_row, weight_column, bias_offset, bias_step;
  template <class Layer>
  static weight_gradient_epilogue make(T* rows, T* flag, bool accumulate) {
    return {rows,
            flag,
            accumulate,
            Layer::inputs,
            Layer::parameter_count,
            Layer::weight_index(1, 0) - Layer::weight_index(0, 0),
            Layer::inputs > 1 ? Layer::weight_index(0, 1) - Layer::weight_index(0, 0) : 1,
            Layer::bias_index(0),
            Layer::outputs > 1 ? Layer::bias_index(1) - Layer::bias_index(0) : 1};
  }
  __device__ void operator()(std::size_t o, std::size_t i, T sum, unsigned slice) const {
    T& g = rows[std::size_t(slice) * parameter_count +
                (i < inputs ? o * weight_row + i * weight_column : bias_offset + o * bias_step)];
    g = accumulate ? g + sum : sum;
    if (!isfinite(g)) *flag = T(1);
  }
};

// Per sample of a chunk: the loss (into its slot of the batch's losses) and the last
// layer's delta, in place of its slopes. The first chunk of a step also clears the
// non-finite flag and advances the device's step counter.
template <class Loss, std::size_t Out, class T>
__global__ void loss_delta_kernel(Loss loss, const T* yhat, const T* y, T* slope, std::size_t rows, T* losses,
                                  T* loss_and_flag, long* step_counter, bool first_chunk) {
  if (first_chunk && blockIdx.x == 0 && threadIdx.x == 0) {
    loss_and_flag[1] = T(0);
    if (step_counter) ++*step_counter;
  }
  for (std::size_t s = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; s < rows;
       s += std::size_t(gridDim.x) * blockDim.x) {
    T dout[Out], l;
    loss.template group<Out, 1>(yhat + s * Out, y + s * Out, dout, &l);
    for (std::size_t o = 0; o < Out; ++o) slope[s * Out + o] *= dout[o];
    losses[s] = l;
  }
}

inline unsigned loss_blocks(std::size_t rows) { return unsigned(std::min<std::size_t>((rows + 255) / 256, 4096)); }

// Calls f(std::integral_constant<matmul_precision, P>) for the run-time precision;
// double has no tensor-core products, so it instantiates fp32 only.
template <class T, class F>
void with_precision(matmul_precision precision, F f) {
  using P = matmul_precision;
  if constexpr (std::is_same_v<T, float>) {
    if (precision == P::tf32) return f(std::integral_constant<P, P::tf32>{});
    if (precision == P::bf16) return f(std::integral_constant<P, P::bf16>{});
  }
  f(std::integral_constant<P, P::fp32>{});
}

// Forward of one chunk of `rows` samples. Layer l's outputs and slopes go to the
// workspace, except the last layer's outputs when `last_out` is given (apply).
template <matmul_precision Precision, class Model, class T>
void layered_forward(const Model& model, const T* params, const T* x, std::size_t rows, std::size_t chunk, T* units,
                     T* last_out, bool keep_slopes, cudaStream_t stream) {
  [&]<std::size_t... L>(std::index_sequence<L...>) {
    ([&] {
      using layer = typename Model::template layer_type<L>;
      const T* in = layer_input<Model, L>(x, units, chunk);
      T* out = (L + 1 == Model::depth && last_out) ? last_out : layer_outputs<Model, L>(units, chunk);
      T* slope = keep_slopes ? layer_slopes<Model, L>(units, chunk) : nullptr;
      const T* w = params + Model::template parameter_offset<L> + layer::weight_offset;
      launch_gemm<Precision>(operand<T, row_major>{in, layer::inputs}, operand<T, col_major>{w, layer::inputs}, rows,
                             layer::outputs, layer::inputs, 1,
                             forward_epilogue<decltype(layer::activation), T>{
                                 model.template sublayer<L>().activation, w + layer::bias_offset, out, slope,
                                 layer::outputs},
                             stream);
      TL_CUDA_CHECK_LAUNCH("gemm_kernel (layered forward)");
    }(), ...);
  }(std::make_index_sequence<Model::depth>{});
}

// Backward of one chunk, from the last layer's deltas (in its slope rows).
template <matmul_precision Precision, class Model, class T>
void layered_backward(const Model&, const T* params, const T* x, std::size_t rows, std::size_t chunk, T* units,
                      layered_workspace<Model, T>& ws, bool accumulate, cudaStream_t stream) {
  T* partials = thrust::raw_pointer_cast(ws.partials.data());
  T* flag = thrust::raw_pointer_cast(ws.loss_and_flag.data()) + 1;
  [&]<std::size_t... R>(std::index_sequence<R...>) {
    ([&] {
      constexpr std::size_t L = Model::depth - 1 - R;
      using layer = typename Model::template layer_type<L>;
      constexpr std::size_t In = layer::inputs, Out = layer::outputs;
      const T* in = layer_input<Model, L>(x, units, chunk);
      T* delta = layer_slopes<Model, L>(units, chunk);
      launch_gemm<Precision>(
          operand<T, col_major>{delta, Out}, operand<T, row_major>{in, In, In}, Out, In + 1, rows, ws.plan.slices[L],
          weight_gradient_epilogue<T>::template make<layer>(partials + ws.plan.base[L], flag, accumulate), stream);
      TL_CUDA_CHECK_LAUNCH("gemm_kernel (layered weight gradient)");
      if constexpr (L > 0) {
        const T* w = params + Model::template parameter_offset<L> + layer::weight_offset;
        launch_gemm<Precision>(operand<T, row_major>{delta, Out}, operand<T, row_major>{w, In}, rows, In, Out, 1,
                               input_delta_epilogue<T>{layer_slopes<Model, L - 1>(units, chunk), In}, stream);
        TL_CUDA_CHECK_LAUNCH("gemm_kernel (layered input delta)");
      }
    }(), ...);
  }(std::make_index_sequence<Model::depth>{});
}

// Every chunk forward, loss and backward, at one precision.
template <matmul_precision Precision, class Model, class Loss, class T>
void layered_chunks(const Model& model, const Loss& loss, const T* params, const T* x, const T* y,
                    std::size_t batch, layered_workspace<Model, T>& ws, long* step_counter, cudaStream_t stream) {
  constexpr std::size_t In = Model::inputs, Out = Model::outputs;
  const std::size_t chunk = ws.plan.chunk;
  T* units = thrust::raw_pointer_cast(ws.units.data());
  T* losses = thrust::raw_pointer_cast(ws.sample_losses.data());
  T* loss_and_flag = thrust::raw_pointer_cast(ws.loss_and_flag.data());
  for (std::size_t first = 0; first < batch; first += chunk) {
    const std::size_t rows = std::min(chunk, batch - first);
    layered_forward<Precision>(model, params, x + first * In, rows, chunk, units, static_cast<T*>(nullptr), true,
                               stream);
    constexpr std::size_t last = Model::depth - 1;
    loss_delta_kernel<Loss, Out, T><<<loss_blocks(rows), 256, 0, stream>>>(
        loss, layer_outputs<Model, last>(units, chunk), y + first * Out, layer_slopes<Model, last>(units, chunk), rows,
        losses + first, loss_and_flag, step_counter, first == 0);
    TL_CUDA_CHECK_LAUNCH("loss_delta_kernel");
    layered_backward<Precision>(model, params, x + first * In, rows, chunk, units, ws, first > 0, stream);
  }
}

// A step's sums: every chunk, then the per-sample losses added by CUB into one value;
// the partials are then ready for reduce_update_kernel through ws.view().
// ws.prepare() must have run for x's batch.
template <class Model, class Loss, class T>
void layered_partial_sums(const Model& model, const Loss& loss, const T* params, const T* x, const T* y,
                          std::size_t batch, layered_workspace<Model, T>& ws, matmul_precision precision,
                          long* step_counter, cudaStream_t stream) {
  with_precision<T>(precision, [&](auto p) {
    layered_chunks<decltype(p)::value>(model, loss, params, x, y, batch, ws, step_counter, stream);
  });
  std::size_t storage = ws.reduce_storage.size();
  TL_CUDA_CHECK(cub::DeviceReduce::Sum(thrust::raw_pointer_cast(ws.reduce_storage.data()), storage,
                                       thrust::raw_pointer_cast(ws.sample_losses.data()),
                                       thrust::raw_pointer_cast(ws.loss_and_flag.data()), batch, stream));
}

// The model's outputs for a batch, chunk by chunk, into y ((outputs, batch)).
template <class Model, class T>
void layered_apply(const Model& model, const T* params, const T* x, std::size_t batch, T* y,
                   layered_workspace<Model, T>& ws) {
  const std::size_t chunk = ws.plan.chunk;
  T* units = thrust::raw_pointer_cast(ws.units.data());
  for (std::size_t first = 0; first < batch; first += chunk)
    layered_forward<matmul_precision::fp32>(model, params, x + first * Model::inputs, std::min(chunk, batch - first),
                                            chunk, units, y + first * Model::outputs, false, cudaStream_t(0));
}

}  // namespace tl::detail::gpu
